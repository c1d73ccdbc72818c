"""ATen ops that make tensors from sizes and numbers: full, arange, scalar_tensor, empty."""

from __future__ import annotations

import math
from typing import Any, Sequence

from ._context import Context, Value, check, handles


def _filled(ctx: Context, shape: Sequence[int], value: Any, dtype: str) -> Value:
    scalar = ctx.scalar(float(value), dtype)
    return ctx.broadcast_to(scalar, [int(d) for d in shape]) if len(shape) else scalar


@handles("aten.full.default", "aten.new_full.default")
def full(ctx: Context, *args: Any, **ignored: Any) -> Value:
    shape, value = (args[0], args[1]) if ctx.node.target.__name__.startswith("full") else (args[1], args[2])
    return _filled(ctx, shape, value, ctx.result_dtype())


@handles("aten.full_like.default")
def full_like(ctx: Context, x: Value, value: Any, **ignored: Any) -> Value:
    return _filled(ctx, ctx.shape_of(x), value, ctx.result_dtype())


@handles("aten.zeros_like.default", "aten.ones_like.default")
def zeros_ones_like(ctx: Context, x: Value, **ignored: Any) -> Value:
    value = 0.0 if ctx.node.target.__name__.startswith("zeros") else 1.0
    return _filled(ctx, ctx.shape_of(x), value, ctx.result_dtype())


@handles("aten.zeros.default", "aten.ones.default", "aten.new_zeros.default", "aten.new_ones.default")
def zeros_ones(ctx: Context, *args: Any, **ignored: Any) -> Value:
    name = ctx.node.target.__name__
    shape = args[1] if name.startswith("new_") else args[0]
    return _filled(ctx, shape, 0.0 if "zeros" in name else 1.0, ctx.result_dtype())


@handles("aten.empty.memory_format", "aten.empty_permuted.default")
def empty(ctx: Context, shape: Sequence[int], *args: Any, **ignored: Any) -> Value:
    # Uninitialized memory: any values are right, and a functional graph only reads its shape
    # (full_like(empty(...)), decompositions' zeros_like) or what a fill wrote over it.
    return _filled(ctx, shape, 0, ctx.result_dtype())


@handles("aten.scalar_tensor.default")
def scalar_tensor(ctx: Context, value: Any, **ignored: Any) -> Value:
    return ctx.scalar(float(value), ctx.result_dtype())


@handles("aten.arange.start_step", "aten.arange.start", "aten.arange.default")
def arange(ctx: Context, *args: Any, **ignored: Any) -> Value:
    numbers = [a for a in args if isinstance(a, (int, float))]
    if len(numbers) == 1:
        start, end, step = 0, numbers[0], 1
    else:
        start, end = numbers[0], numbers[1]
        step = numbers[2] if len(numbers) > 2 else 1
    check(step != 0, "arange with step 0")
    count = max(int(math.ceil((end - start) / step)), 0)
    dtype = ctx.result_dtype()
    wide = "f64" if dtype in ("f64", "f32", "f16", "bf16") else "i64"
    x = ctx.iota([count], 0, wide)
    if step != 1:
        x = ctx.pointwise("mul", [x, ctx.scalar(float(step), wide)])
    if start != 0:
        x = ctx.pointwise("add", [x, ctx.scalar(float(start), wide)])
    return ctx.cast(x, dtype)

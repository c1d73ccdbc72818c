"""ATen matrix products: mm, bmm, addmm, baddbmm, matmul, dot."""

from __future__ import annotations

from typing import Any

from ._context import Context, Value, handles


def _scaled(ctx: Context, x: Value, factor: Any, dtype: str) -> Value:
    return x if factor == 1 else ctx.pointwise("mul", [x, ctx.scalar(float(factor), dtype)])


@handles("aten.mm.default", "aten.bmm.default", "aten.matmul.default")
def mm(ctx: Context, a: Value, b: Value) -> Value:
    return ctx.matmul(a, b)


@handles("aten.dot.default")
def dot(ctx: Context, a: Value, b: Value) -> Value:
    return ctx.matmul(a, b)


@handles("aten.addmm.default", "aten.baddbmm.default")
def addmm(ctx: Context, bias: Value, a: Value, b: Value, beta: Any = 1, alpha: Any = 1) -> Value:
    dtype = ctx.result_dtype()
    product = _scaled(ctx, ctx.matmul(a, b), alpha, dtype)
    if beta == 0:  # PyTorch ignores the bias then, NaNs included
        return product
    return ctx.pointwise("add", [product, ctx.broadcast_to(_scaled(ctx, ctx.cast(bias, dtype), beta, dtype),
                                                           ctx.shape_of(product))])

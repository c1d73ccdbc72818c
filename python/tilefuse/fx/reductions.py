"""ATen reductions: sums, means, extrema, products, any/all, variance."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

from ._context import Context, Unsupported, Value, check, handles, opmath


def _axes(ctx: Context, x: Value, dims: Any) -> List[int]:
    rank = ctx.rank(x)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({ctx.normalize_dim(d, rank) for d in dims})


def _reduce(ctx: Context, op: str, x: Value, dims: Any, keepdim: bool, dtype: str) -> Value:
    if ctx.rank(x) == 0:
        return ctx.cast(x, dtype)
    return ctx.reduce(op, ctx.cast(x, dtype), _axes(ctx, x, dims), keepdim)


@handles("aten.sum.dim_IntList", "aten.sum.default")
def sum_(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, "reduce_sum", x, dim, keepdim, ctx.result_dtype())


@handles("aten.mean.dim", "aten.mean.default")
def mean(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, "reduce_mean", x, dim, keepdim, ctx.result_dtype())


@handles("aten.prod.dim_int", "aten.prod.default")
def prod(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, "reduce_prod", x, dim, keepdim, ctx.result_dtype())


@handles("aten.amax.default", "aten.max.default")
def amax(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
    return _reduce(ctx, "reduce_max", x, dim, keepdim, ctx.result_dtype())


@handles("aten.amin.default", "aten.min.default")
def amin(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
    return _reduce(ctx, "reduce_min", x, dim, keepdim, ctx.result_dtype())


@handles("aten.max.dim")
def max_dim(ctx: Context, x: Value, dim: int, keepdim: bool = False) -> list:
    return _extreme_with_index(ctx, "reduce_max", x, dim, keepdim)


@handles("aten.min.dim")
def min_dim(ctx: Context, x: Value, dim: int, keepdim: bool = False) -> list:
    return _extreme_with_index(ctx, "reduce_min", x, dim, keepdim)


def _extreme_with_index(ctx: Context, op: str, x: Value, dim: int, keepdim: bool) -> list:
    """(values, indices): the index is the first one holding the extreme, as PyTorch picks it."""
    if ctx.rank(x) == 0:
        return [x, ctx.scalar(0.0, "i64")]
    shape = ctx.shape_of(x)
    dim = ctx.normalize_dim(dim, len(shape))
    extreme = ctx.reduce(op, x, [dim], True)
    hit = ctx.pointwise("equal", [x, extreme])
    if ctx.dtype_of(x) in ("f64", "f32", "f16", "bf16"):  # max and min propagate NaN: then the NaNs are the hits
        hit = ctx.pointwise("or", [hit, ctx.pointwise("isnan", [x])])
    candidates = ctx.pointwise("where", [hit, ctx.iota(shape, dim, "i64"), ctx.scalar(float(shape[dim]), "i64")])
    index = ctx.reduce("reduce_min", candidates, [dim], keepdim)
    return [extreme if keepdim else ctx.squeeze(extreme, [dim]), index]


@handles("aten.argmax.default", "aten.argmin.default")
def arg_extreme(ctx: Context, x: Value, dim: Optional[int] = None, keepdim: bool = False) -> Value:
    """The index of the first extreme along `dim` (over the flattened tensor without one)."""
    op = "reduce_max" if ctx.node.target.__name__.startswith("argmax") else "reduce_min"
    if dim is None:
        count = 1
        for d in ctx.shape_of(x):
            count *= d
        index = _extreme_with_index(ctx, op, ctx.reshape(x, [count]), 0, False)[1]
        return ctx.reshape(index, [1] * ctx.rank(x)) if keepdim else index
    return _extreme_with_index(ctx, op, x, dim, keepdim)[1]


@handles("aten.any.dim", "aten.any.dims", "aten.any.default")
def any_(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
    as_number = ctx.cast(ctx.pointwise("not", [ctx.pointwise("equal", [x, ctx.scalar(0.0, ctx.dtype_of(x))])]), "f32")
    return ctx.cast(_reduce(ctx, "reduce_max", as_number, dim, keepdim, "f32"), "bool")


@handles("aten.all.dim", "aten.all.dims", "aten.all.default")
def all_(ctx: Context, x: Value, dim: Any = None, keepdim: bool = False) -> Value:
    as_number = ctx.cast(ctx.pointwise("not", [ctx.pointwise("equal", [x, ctx.scalar(0.0, ctx.dtype_of(x))])]), "f32")
    return ctx.cast(_reduce(ctx, "reduce_min", as_number, dim, keepdim, "f32"), "bool")


def _variance(ctx: Context, x: Value, dims: Any, correction: float, keepdim: bool) -> List[Value]:
    dtype = ctx.result_dtype()
    x = ctx.cast(x, dtype)
    axes = _axes(ctx, x, dims)
    count = 1
    for a in axes:
        count *= ctx.shape_of(x)[a]
    mean_kept = ctx.reduce("reduce_mean", x, axes, True)
    centered = ctx.pointwise("sub", [x, ctx.broadcast_to(mean_kept, ctx.shape_of(x))])
    squares = ctx.reduce("reduce_sum", ctx.pointwise("mul", [centered, centered]), axes, keepdim)
    variance = ctx.pointwise("div", [squares, ctx.scalar(float(max(count - correction, 0)), dtype)])
    mean_value = mean_kept if keepdim else ctx.squeeze(mean_kept, axes)
    return [variance, mean_value]


@handles("aten.var.correction", "aten.var.dim")
def var(ctx: Context, x: Value, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
        correction: Optional[float] = None) -> Value:
    return _variance(ctx, x, dim, _correction(unbiased, correction), keepdim)[0]


@handles("aten.var_mean.correction", "aten.var_mean.dim")
def var_mean(ctx: Context, x: Value, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Optional[float] = None) -> list:
    return _variance(ctx, x, dim, _correction(unbiased, correction), keepdim)


def _correction(unbiased: Any, correction: Optional[float]) -> float:
    if correction is not None:
        return float(correction)
    if isinstance(unbiased, bool):
        return 1.0 if unbiased else 0.0
    return 1.0


@handles("aten.linalg_vector_norm.default")
def vector_norm(ctx: Context, x: Value, ord: float = 2.0, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Value:
    """The p-norm over `dim` (F.normalize, x.norm()), computed in f32 for the half types."""
    result = ctx.result_dtype()
    wide = opmath(result)
    magnitude = ctx.pointwise("abs", [ctx.cast(x, wide)])
    if ord == math.inf:
        return ctx.cast(_reduce(ctx, "reduce_max", magnitude, dim, keepdim, wide), result)
    if ord == -math.inf:
        return ctx.cast(_reduce(ctx, "reduce_min", magnitude, dim, keepdim, wide), result)
    check(ord != 0, "the 0-norm (a count of non-zeros)")
    if ord == 1:
        return ctx.cast(_reduce(ctx, "reduce_sum", magnitude, dim, keepdim, wide), result)
    if ord == 2:
        total = _reduce(ctx, "reduce_sum", ctx.pointwise("mul", [magnitude, magnitude]), dim, keepdim, wide)
        return ctx.cast(ctx.pointwise("sqrt", [total]), result)
    powered = ctx.pointwise("pow", [magnitude, ctx.scalar(float(ord), wide)])
    total = _reduce(ctx, "reduce_sum", powered, dim, keepdim, wide)
    return ctx.cast(ctx.pointwise("pow", [total, ctx.scalar(1.0 / float(ord), wide)]), result)

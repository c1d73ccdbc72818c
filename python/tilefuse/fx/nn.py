"""ATen neural-network ops: softmax, normalizations, convolution and pooling."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

from ._context import Context, Unsupported, Value, check, handles


@handles("aten._softmax.default", "aten.softmax.int")
def softmax(ctx: Context, x: Value, dim: int, half_to_float: Any = False) -> Value:
    dtype = ctx.result_dtype()
    return ctx.softmax(ctx.cast(x, dtype), ctx.normalize_dim(dim, ctx.rank(x)))


@handles("aten._log_softmax.default", "aten.log_softmax.int")
def log_softmax(ctx: Context, x: Value, dim: int, half_to_float: Any = False) -> Value:
    dtype = ctx.result_dtype()
    return ctx.log_softmax(ctx.cast(x, dtype), ctx.normalize_dim(dim, ctx.rank(x)))


def _ones(ctx: Context, shape: List[int], dtype: str) -> Value:
    return ctx.broadcast_to(ctx.scalar(1.0, dtype), shape)


@handles("aten.native_layer_norm.default")
def native_layer_norm(ctx: Context, x: Value, normalized_shape: Sequence[int], weight: Optional[Value],
                      bias: Optional[Value], eps: float) -> list:
    # (output, mean, rstd): the statistics are not computed; reading them fails at the getitem.
    dtype = ctx.result_dtype()
    axis = ctx.rank(x) - len(normalized_shape)
    scale = ctx.cast(weight, dtype) if weight is not None else _ones(ctx, list(normalized_shape), dtype)
    return [ctx.layer_norm(x, scale, ctx.cast(bias, dtype) if bias is not None else None, axis, float(eps)), None, None]


def _per_channel(ctx: Context, v: Value, rank: int, dtype: str) -> Value:
    """A [C] vector shaped [C, 1, ...] to broadcast along dim 1 of a rank-`rank` tensor."""
    return ctx.reshape(ctx.cast(v, dtype), [ctx.shape_of(v)[0]] + [1] * (rank - 2))


@handles("aten._native_batch_norm_legit_no_training.default")
def batch_norm_inference(ctx: Context, x: Value, weight: Optional[Value], bias: Optional[Value], running_mean: Value,
                         running_var: Value, momentum: float, eps: float) -> list:
    dtype = ctx.result_dtype()
    rank = ctx.rank(x)
    mean = _per_channel(ctx, running_mean, rank, dtype)
    inv_std = ctx.pointwise("rsqrt", [ctx.pointwise("add", [_per_channel(ctx, running_var, rank, dtype),
                                                             ctx.scalar(float(eps), dtype)])])
    y = ctx.pointwise("mul", [ctx.pointwise("sub", [x, mean]), inv_std])
    if weight is not None:
        y = ctx.pointwise("mul", [y, _per_channel(ctx, weight, rank, dtype)])
    if bias is not None:
        y = ctx.pointwise("add", [y, _per_channel(ctx, bias, rank, dtype)])
    return [y, None, None]


@handles("aten.native_group_norm.default")
def group_norm(ctx: Context, x: Value, weight: Optional[Value], bias: Optional[Value], n: int, c: int, hw: int,
               group: int, eps: float) -> list:
    dtype = ctx.result_dtype()
    shape = ctx.shape_of(x)
    grouped = ctx.reshape(x, [n, group, (c // group) * hw])
    ones = _ones(ctx, [(c // group) * hw], dtype)
    y = ctx.reshape(ctx.layer_norm(grouped, ones, None, 2, float(eps)), shape)
    rank = len(shape)
    if weight is not None:
        y = ctx.pointwise("mul", [y, _per_channel(ctx, weight, rank, dtype)])
    if bias is not None:
        y = ctx.pointwise("add", [y, _per_channel(ctx, bias, rank, dtype)])
    return [y, None, None]


def _spatial(values: Any, count: int, default: int) -> List[int]:
    if values is None or (isinstance(values, (list, tuple)) and len(values) == 0):
        return [default] * count
    if isinstance(values, int):
        return [values] * count
    values = [int(v) for v in values]
    return values * count if len(values) == 1 else values


@handles("aten.convolution.default")
def convolution(ctx: Context, x: Value, weight: Value, bias: Optional[Value], stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> Value:
    check(not transposed, "transposed convolution (conv_transpose) is not mapped yet")
    spatial = ctx.rank(x) - 2
    pads = _spatial(padding, spatial, 0)
    return ctx.conv(x, weight, bias, _spatial(stride, spatial, 1), pads + pads, _spatial(dilation, spatial, 1), groups)


def _check_ceil_mode(ctx: Context, x: Value, kernel: List[int], stride: List[int], pads: List[int],
                     dilation: List[int], ceil_mode: bool) -> None:
    if not ceil_mode:
        return
    for size, k, s, p, d in zip(ctx.shape_of(x)[2:], kernel, stride, pads, dilation):
        span = size + 2 * p - d * (k - 1) - 1
        check(span % s == 0, "pooling with ceil_mode=True where it rounds up (a partial last window)")


@handles("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default", "aten.max_pool1d.default",
         "aten.max_pool3d_with_indices.default")
def max_pool(ctx: Context, x: Value, kernel_size: Sequence[int], stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Any:
    spatial = ctx.rank(x) - 2
    kernel = _spatial(kernel_size, spatial, 1)
    strides = _spatial(stride, spatial, 0) if stride else kernel
    pads = _spatial(padding, spatial, 0)
    dilations = _spatial(dilation, spatial, 1)
    _check_ceil_mode(ctx, x, kernel, strides, pads, dilations, ceil_mode)
    out = ctx.pool("max", x, kernel, strides, pads + pads, dilations, False)
    return [out, None] if "with_indices" in str(ctx.node.target) else out


@handles("aten.avg_pool2d.default", "aten.avg_pool1d.default", "aten.avg_pool3d.default")
def avg_pool(ctx: Context, x: Value, kernel_size: Sequence[int], stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Optional[int] = None) -> Value:
    check(divisor_override is None, "avg_pool with divisor_override")
    spatial = ctx.rank(x) - 2
    kernel = _spatial(kernel_size, spatial, 1)
    strides = _spatial(stride, spatial, 0) if stride else kernel
    pads = _spatial(padding, spatial, 0)
    _check_ceil_mode(ctx, x, kernel, strides, pads, [1] * spatial, ceil_mode)
    return ctx.pool("average", x, kernel, strides, pads + pads, [1] * spatial, bool(count_include_pad))


@handles("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool1d.default",
         "aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool(ctx: Context, x: Value, output_size: Sequence[int]) -> Value:
    shape = ctx.shape_of(x)
    spatial = len(shape) - 2
    out = _spatial(output_size, spatial, 1)
    if all(o == 1 for o in out):
        return ctx.reduce("reduce_mean", x, list(range(2, len(shape))), True)
    check(all(size % o == 0 for size, o in zip(shape[2:], out)),
          f"adaptive average pooling of {shape[2:]} to {out} (only sizes that divide evenly)")
    kernel = [size // o for size, o in zip(shape[2:], out)]
    return ctx.pool("average", x, kernel, kernel, [0] * (2 * spatial), [1] * spatial, False)

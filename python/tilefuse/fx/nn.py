"""ATen neural-network ops: softmax, normalizations, convolution and pooling."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence

import numpy as np
import torch

from ._context import Context, Unsupported, Value, check, handles, opmath, torch_dtype


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
    # (output, mean, rstd). The statistics are built only when the graph reads them (a training
    # forward saves them for the backward), in their own dtype (f32 for bf16 inputs).
    dtype = ctx.result_dtype()
    axis = ctx.rank(x) - len(normalized_shape)
    scale = ctx.cast(weight, dtype) if weight is not None else _ones(ctx, list(normalized_shape), dtype)
    out = ctx.layer_norm(x, scale, ctx.cast(bias, dtype) if bias is not None else None, axis, float(eps))
    if not _results_read(ctx, (1, 2)):
        return [out, None, None]
    stats = torch_dtype(ctx.node.meta["val"][1].dtype)
    axes = list(range(axis, ctx.rank(x)))
    wide = ctx.cast(x, stats)
    mean = ctx.reduce("reduce_mean", wide, axes, True)
    centered = ctx.pointwise("sub", [wide, mean])
    variance = ctx.reduce("reduce_mean", ctx.pointwise("mul", [centered, centered]), axes, True)
    rstd = ctx.pointwise("rsqrt", [ctx.pointwise("add", [variance, ctx.scalar(float(eps), stats)])])
    return [out, mean, rstd]


def _results_read(ctx: Context, indices: Sequence[int]) -> bool:
    """Whether the graph reads any of these results of the node being translated."""
    import operator

    return any(user.target is operator.getitem and user.args[1] in indices for user in ctx.node.users)


def _per_channel(ctx: Context, v: Value, rank: int, dtype: str) -> Value:
    """A [C] vector shaped [C, 1, ...] to broadcast along dim 1 of a rank-`rank` tensor."""
    return ctx.reshape(ctx.cast(v, dtype), [ctx.shape_of(v)[0]] + [1] * (rank - 2))


@handles("aten._native_batch_norm_legit_no_training.default")
def batch_norm_inference(ctx: Context, x: Value, weight: Optional[Value], bias: Optional[Value], running_mean: Value,
                         running_var: Value, momentum: float, eps: float) -> list:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)  # one rounding at the end, as PyTorch's kernel (bf16 in, f32 math)
    rank = ctx.rank(x)
    mean = _per_channel(ctx, running_mean, rank, wide)
    inv_std = ctx.pointwise("rsqrt", [ctx.pointwise("add", [_per_channel(ctx, running_var, rank, wide),
                                                             ctx.scalar(float(eps), wide)])])
    y = ctx.pointwise("mul", [ctx.pointwise("sub", [ctx.cast(x, wide), mean]), inv_std])
    if weight is not None:
        y = ctx.pointwise("mul", [y, _per_channel(ctx, weight, rank, wide)])
    if bias is not None:
        y = ctx.pointwise("add", [y, _per_channel(ctx, bias, rank, wide)])
    return [ctx.cast(y, dtype), None, None]


@handles("aten.native_group_norm.default")
def group_norm(ctx: Context, x: Value, weight: Optional[Value], bias: Optional[Value], n: int, c: int, hw: int,
               group: int, eps: float) -> list:
    dtype = ctx.result_dtype()
    wide = opmath(dtype)  # normalized, scaled and shifted before one rounding, as PyTorch's kernel
    shape = ctx.shape_of(x)
    grouped = ctx.reshape(ctx.cast(x, wide), [n, group, (c // group) * hw])
    ones = _ones(ctx, [(c // group) * hw], wide)
    y = ctx.reshape(ctx.layer_norm(grouped, ones, None, 2, float(eps)), shape)
    rank = len(shape)
    if weight is not None:
        y = ctx.pointwise("mul", [y, _per_channel(ctx, weight, rank, wide)])
    if bias is not None:
        y = ctx.pointwise("add", [y, _per_channel(ctx, bias, rank, wide)])
    return [ctx.cast(y, dtype), None, None]


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
    strides, dilations = _spatial(stride, spatial, 1), _spatial(dilation, spatial, 1)
    patches = strides == ctx.shape_of(weight)[2:] and not any(pads) and min(strides) > 1 and max(dilations) == 1
    return ctx.conv(x, weight, bias, strides, pads + pads, dilations, groups, tf32=_convolution_tf32(ctx) and not patches)


def _convolution_tf32(ctx: Context) -> bool:
    """Whether PyTorch would run this convolution's f32 product on TF32 tensor cores: on a GPU
    under torch.backends.cudnn.allow_tf32 (True by default, eager's and TorchInductor's
    convolutions alike), unlike its matmuls (float32 matmul precision, "highest" by default).
    The flag allows, cuDNN chooses: a patch embedding (windows that neither overlap nor pad, a
    linear layer over patches) cuDNN ran in exact f32 (timm's ViT-B/16 in f32 on an H200,
    2026-12-02: eager 0 from exact f32, and tilefuse with it on TF32 2.4e-4 of the output's
    scale), so the caller keeps such a convolution exact."""
    value = ctx.node.meta.get("val") if ctx.node is not None else None
    return (isinstance(value, torch.Tensor) and value.dtype == torch.float32 and value.device.type == "cuda"
            and torch.backends.cudnn.enabled and torch.backends.cudnn.allow_tf32)


# Transposed convolutions are not mapped yet: split out to PyTorch, the rest of the graph kept.
convolution.why_not = lambda node: "a transposed convolution" if len(node.args) >= 7 and node.args[6] else None


def _pool_pads(ctx: Context, x: Value, kernel: List[int], stride: List[int], pads: List[int],
               dilation: List[int], ceil_mode: bool) -> List[int]:
    """Begin and end pads; ceil_mode's partial last window as padding past the end (PyTorch's
    output size: rounded up, but a window starts inside the input or its left padding)."""
    ends = list(pads)
    if ceil_mode:
        for i, (size, k, s, p, d) in enumerate(zip(ctx.shape_of(x)[2:], kernel, stride, pads, dilation)):
            reach = d * (k - 1) + 1
            out = -(-(size + 2 * p - reach) // s) + 1
            if (out - 1) * s >= size + p:
                out -= 1
            ends[i] = p + max(0, (out - 1) * s + reach - (size + 2 * p))
    return list(pads) + ends


@handles("aten.max_pool2d_with_indices.default", "aten.max_pool2d.default", "aten.max_pool1d.default",
         "aten.max_pool3d_with_indices.default")
def max_pool(ctx: Context, x: Value, kernel_size: Sequence[int], stride: Any = None, padding: Any = 0,
             dilation: Any = 1, ceil_mode: bool = False) -> Any:
    spatial = ctx.rank(x) - 2
    kernel = _spatial(kernel_size, spatial, 1)
    strides = _spatial(stride, spatial, 0) if stride else kernel
    pads = _spatial(padding, spatial, 0)
    dilations = _spatial(dilation, spatial, 1)
    out = ctx.pool("max", x, kernel, strides, _pool_pads(ctx, x, kernel, strides, pads, dilations, ceil_mode),
                   dilations, False)
    return [out, None] if "with_indices" in str(ctx.node.target) else out


@handles("aten.avg_pool2d.default", "aten.avg_pool1d.default", "aten.avg_pool3d.default")
def avg_pool(ctx: Context, x: Value, kernel_size: Sequence[int], stride: Any = None, padding: Any = 0,
             ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Optional[int] = None) -> Value:
    spatial = ctx.rank(x) - 2
    kernel = _spatial(kernel_size, spatial, 1)
    strides = _spatial(stride, spatial, 0) if stride else kernel
    pads = _spatial(padding, spatial, 0)
    all_pads = _pool_pads(ctx, x, kernel, strides, pads, [1] * spatial, ceil_mode)
    past_padding = all_pads[spatial:] != pads  # ceil_mode's last window
    # PyTorch divides a window past the padding by its part inside the input and padding:
    # without padding, its part in the input, which is what excluding the pads counts.
    if divisor_override is None and not (past_padding and count_include_pad and any(pads)):
        include_pad = bool(count_include_pad) and not past_padding
        return ctx.pool("average", x, kernel, strides, all_pads, [1] * spatial, include_pad)
    # Otherwise the window's sum (its average over the whole padded window, times its size)
    # over the given divisor, or over each window's size inside input and padding.
    dtype = ctx.dtype_of(x)
    sums = ctx.pointwise("mul", [ctx.pool("average", x, kernel, strides, all_pads, [1] * spatial, True),
                                 ctx.scalar(float(math.prod(kernel)), dtype)])
    if divisor_override is not None:
        return ctx.pointwise("div", [sums, ctx.scalar(float(divisor_override), dtype)])
    sizes = np.ones((), dtype=np.float32)
    for size, k, s, p, end in zip(ctx.shape_of(x)[2:], kernel, strides, pads, all_pads[spatial:]):
        starts = np.arange((size + p + end - k) // s + 1) * s - p
        sizes = np.multiply.outer(sizes, np.minimum(starts + k, size + p) - starts).astype(np.float32)
    return ctx.pointwise("div", [sums, ctx.cast(ctx.constant(sizes), dtype)])


@handles("aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default", "aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool(ctx: Context, x: Value, output_size: Sequence[int]) -> Value:
    shape = ctx.shape_of(x)
    spatial = len(shape) - 2
    out = _spatial(output_size, spatial, 1)
    if all(o == 1 for o in out):
        return ctx.reduce("reduce_mean", x, list(range(2, len(shape))), True)
    if all(size % o == 0 for size, o in zip(shape[2:], out)):
        kernel = [size // o for size, o in zip(shape[2:], out)]
        return ctx.pool("average", x, kernel, kernel, [0] * (2 * spatial), [1] * spatial, False)
    # Windows of unequal sizes, [floor(i·size/o), ceil((i+1)·size/o)): a box's mean is the mean
    # over one dim of the means over the next, so one dim at a time, a slice and a mean per window.
    for axis, (size, o) in enumerate(zip(shape[2:], out), start=2):
        windows = [ctx.reduce("reduce_mean", ctx.slice(x, [i * size // o], [-(-(i + 1) * size // o)], [axis], [1]),
                              [axis], True) for i in range(o)]
        x = windows[0] if o == 1 else ctx.concat(windows, axis)
    return x


@handles("aten.native_dropout.default")
def native_dropout(ctx: Context, x: Value, p: float, train: Optional[bool]) -> list:
    """(output, mask): each element kept with probability 1 - p and scaled by 1 / (1 - p), as
    PyTorch's kernel computes it (x * mask * scale). The random numbers are drawn by PyTorch's
    generator at each call (Context.uniform_input); the mask is returned for the backward."""
    shape, dtype = ctx.shape_of(x), ctx.dtype_of(x)
    if not train or p == 0.0:
        return [x, ctx.broadcast_to(ctx.scalar(1.0, "bool"), shape)]
    if p >= 1.0:
        return [ctx.pointwise("mul", [x, ctx.scalar(0.0, dtype)]), ctx.broadcast_to(ctx.scalar(0.0, "bool"), shape)]
    keep = ctx.pointwise("less", [ctx.uniform_input(shape), ctx.scalar(1.0 - p, "f32")])
    kept = ctx.pointwise("mul", [x, ctx.cast(keep, dtype)])
    return [ctx.pointwise("mul", [kept, ctx.scalar(1.0 / (1.0 - p), dtype)]), keep]

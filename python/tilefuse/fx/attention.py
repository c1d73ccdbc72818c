"""Scaled dot-product attention, whichever kernel PyTorch's dispatcher picked for it, written
as the primitives tilefuse's attention matcher claims as one flash-attention group:
matmul(Q, Kᵀ) · scale, the mask (added, or a where for booleans and is_causal), a softmax
over the keys, matmul with V."""

from __future__ import annotations

import math
from typing import Any, Optional

from ._context import Context, Value, check, handles
from .nn import _results_read


def attention(ctx: Context, q: Value, k: Value, v: Value, mask: Optional[Value], dropout_p: float, is_causal: bool,
              scale: Optional[float], enable_gqa: bool = False, logsumexp: bool = False,
              masked_rows_zero: bool = False) -> Any:
    """The attention's output; with `logsumexp`, (output, logsumexp of each query's scores in f32
    (f64 for f64 inputs),
    shaped like the scores without their key axis: what a training forward saves for the backward).
    `masked_rows_zero`: a query whose keys are all masked gets 0 (the softmax's NaNs replaced, the
    "safe softmax" the attention templates take), not NaN."""
    check(dropout_p == 0.0, "attention with dropout (tilefuse runs inference: call model.eval())")
    dtype = ctx.dtype_of(q)
    q_shape, k_shape = ctx.shape_of(q), ctx.shape_of(k)
    rank = len(q_shape)
    check(rank >= 2, "attention on tensors of rank < 2")
    if rank >= 3 and k_shape[-3] != q_shape[-3]:  # grouped-query attention: each K/V head serves a group of Q heads
        check(q_shape[-3] % k_shape[-3] == 0, f"{q_shape[-3]} query heads over {k_shape[-3]} key heads")
        k, v = (_repeat_heads(ctx, t, q_shape[-3] // k_shape[-3]) for t in (k, v))
    scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    scores = _scores(ctx, q, k, mask, is_causal, scale, dtype)
    probs = ctx.softmax(scores, rank - 1)
    if masked_rows_zero and mask is not None:
        probs = ctx.pointwise("where", [ctx.pointwise("isnan", [probs]), ctx.scalar(0.0, ctx.dtype_of(probs)), probs])
    out = ctx.matmul(probs, v)
    if not logsumexp:
        return out
    # In f32 from f32 products for half inputs, as PyTorch's kernels accumulate them: the half
    # scores' rounding (0.4% in bf16) would be 0.01 in the saved logsumexp. In f64 for f64
    # inputs, as PyTorch's CPU kernel returns it (its backward takes no other).
    wide_dtype = "f64" if dtype == "f64" else "f32"
    wide = scores if dtype == wide_dtype else _scores(ctx, q, k, mask, is_causal, scale, wide_dtype)
    return out, _logsumexp(ctx, wide)


def _scores(ctx: Context, q: Value, k: Value, mask: Optional[Value], is_causal: bool, scale: float, dtype: str) -> Value:
    """Q·Kᵀ · scale with the causal mask and `mask` applied, in `dtype`."""
    rank = ctx.rank(q)
    length, keys = ctx.shape_of(q)[-2], ctx.shape_of(k)[-2]
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = ctx.matmul(ctx.cast(q, dtype), ctx.transpose(ctx.cast(k, dtype), perm))
    scores = ctx.pointwise("mul", [scores, ctx.scalar(scale, dtype)])
    if is_causal:  # PyTorch's causal mask is aligned top-left: key j is seen by query i when j <= i
        rows = ctx.iota([length, keys], 0, "i64")
        cols = ctx.iota([length, keys], 1, "i64")
        visible = ctx.pointwise("less_equal", [cols, rows])
        scores = ctx.pointwise("where", [visible, scores, ctx.scalar(-math.inf, dtype)])
    if mask is not None:
        if ctx.dtype_of(mask) == "bool":
            scores = ctx.pointwise("where", [mask, scores, ctx.scalar(-math.inf, dtype)])
        else:
            # Broadcast before the cast: a cast of the scores' size is one more per-score op of
            # the attention group, where a cast of the smaller mask would be a kernel of its own
            # that the attention matcher stops at (an f32 mask on half scores, as BERT's).
            if ctx.dtype_of(mask) != dtype:
                mask = ctx.cast(ctx.broadcast_to(mask, ctx.shape_of(scores)), dtype)
            scores = ctx.pointwise("add", [scores, mask])
    return scores


def _logsumexp(ctx: Context, wide: Value) -> Value:
    # max + log(sum(exp(s - max))) over the keys of f32 (f64) scores; a row with every key masked
    # gives 0, as PyTorch's CPU flash kernel does (its output row is 0 too).
    axis = ctx.rank(wide) - 1
    dtype = ctx.dtype_of(wide)
    peak = ctx.reduce("reduce_max", wide, [axis], True)
    masked = ctx.pointwise("equal", [peak, ctx.scalar(-math.inf, dtype)])
    safe_peak = ctx.pointwise("where", [masked, ctx.scalar(0.0, dtype), peak])
    total = ctx.reduce("reduce_sum", ctx.pointwise("exp", [ctx.pointwise("sub", [wide, safe_peak])]), [axis], True)
    lse = ctx.pointwise("where", [masked, ctx.scalar(0.0, dtype), ctx.pointwise("add", [safe_peak, ctx.pointwise("log", [total])])])
    return ctx.reshape(lse, ctx.shape_of(lse)[:-1])


def _repeat_heads(ctx: Context, t: Value, group: int) -> Value:
    shape = ctx.shape_of(t)
    heads_axis = len(shape) - 3
    expanded = ctx.broadcast_to(ctx.unsqueeze(t, [heads_axis + 1]),
                                shape[:heads_axis + 1] + [group] + shape[heads_axis + 1:])
    return ctx.reshape(expanded, shape[:heads_axis] + [shape[heads_axis] * group] + shape[heads_axis + 1:])


@handles("aten.scaled_dot_product_attention.default")
def sdpa(ctx: Context, q: Value, k: Value, v: Value, attn_mask: Optional[Value] = None, dropout_p: float = 0.0,
         is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False) -> Value:
    return attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)


@handles("tilefuse.attention.default")
def whole_attention(ctx: Context, q: Value, k: Value, v: Value, attn_mask: Optional[Value], dropout_p: float, is_causal: bool,
                    scale: Optional[float], enable_gqa: bool) -> Value:
    # F.scaled_dot_product_attention kept whole (tilefuse.fx.whole_attention). PyTorch's math
    # path, which such a call may take, gives 0 for a query whose keys are all masked.
    return attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, masked_rows_zero=True)


# The kernels the dispatcher picks return (output, logsumexp, ...). The CPU kernel's logsumexp
# ([batch, heads, queries], f32) is computed where the graph reads it (a training forward saves it
# for PyTorch's backward); the GPU kernels' are not (their layouts and padding differ per kernel,
# and no GPU check of them has run): a call whose other results are read (a training forward's)
# is split out and runs in PyTorch, and the rest of its graph goes through tilefuse.

@handles("aten._scaled_dot_product_flash_attention_for_cpu.default")
def sdpa_flash_cpu(ctx: Context, q: Value, k: Value, v: Value, dropout_p: float = 0.0, is_causal: bool = False, *,
                   attn_mask: Optional[Value] = None, scale: Optional[float] = None) -> list:
    # The kernel gives 0 for a query whose keys are all masked.
    if _results_read(ctx, (1,)):
        return list(attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, logsumexp=True, masked_rows_zero=True))
    return [attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, masked_rows_zero=True), None]


@handles("aten._scaled_dot_product_flash_attention.default")
def sdpa_flash(ctx: Context, q: Value, k: Value, v: Value, dropout_p: float = 0.0, is_causal: bool = False,
               return_debug_mask: bool = False, *, scale: Optional[float] = None) -> list:
    return [attention(ctx, q, k, v, None, dropout_p, is_causal, scale)] + [None] * 8


@handles("aten._scaled_dot_product_efficient_attention.default")
def sdpa_efficient(ctx: Context, q: Value, k: Value, v: Value, attn_bias: Optional[Value], compute_log_sumexp: bool,
                   dropout_p: float = 0.0, is_causal: bool = False, *, scale: Optional[float] = None) -> list:
    return [attention(ctx, q, k, v, attn_bias, dropout_p, is_causal, scale)] + [None] * 3


@handles("aten._scaled_dot_product_cudnn_attention.default")
def sdpa_cudnn(ctx: Context, q: Value, k: Value, v: Value, attn_bias: Optional[Value], compute_log_sumexp: bool,
               dropout_p: float = 0.0, is_causal: bool = False, return_debug_mask: bool = False, *,
               scale: Optional[float] = None) -> list:
    return [attention(ctx, q, k, v, attn_bias, dropout_p, is_causal, scale)] + [None] * 8


def _unless_only_output_read(node) -> Optional[str]:
    import operator

    if all(user.target is operator.getitem and user.args[1] == 0 for user in node.users):
        return None
    return "its logsumexp is read (a training forward): the GPU's attention template does not write it yet"


sdpa_flash.why_not = sdpa_efficient.why_not = sdpa_cudnn.why_not = _unless_only_output_read

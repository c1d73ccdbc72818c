"""Scaled dot-product attention, whichever kernel PyTorch's dispatcher picked for it, written
as the primitives tilefuse's attention matcher claims as one flash-attention group:
matmul(Q, Kᵀ) · scale, the mask (added, or a where for booleans and is_causal), a softmax
over the keys, matmul with V."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch

from ._context import Context, Value, check, handles, opmath
from .nn import _results_read


def attention(ctx: Context, q: Value, k: Value, v: Value, mask: Optional[Value], dropout_p: float, is_causal: bool,
              scale: Optional[float], enable_gqa: bool = False, logsumexp: bool = False,
              masked_rows_zero: bool = False) -> Any:
    """The attention's output; with `logsumexp`, (output, logsumexp of each query's scores in f32
    (f64 for f64 inputs),
    shaped like the scores without their key axis: what a training forward saves for the backward).
    `masked_rows_zero`: a query whose keys are all masked gets 0 (the softmax's NaNs replaced, the
    "safe softmax" the attention templates take), not NaN."""
    q, k, v, scale, dtype = _operands(ctx, q, k, v, dropout_p, scale)
    rank = ctx.rank(q)
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


def attention_saving_logsumexp(ctx: Context, q: Value, k: Value, v: Value, mask: Optional[Value], dropout_p: float,
                               is_causal: bool, scale: Optional[float]) -> Tuple[Value, Value]:
    """(output, logsumexp of each query's logits, f32, [.., queries, 1]): the GPU attention
    kernels' results a training forward saves. The softmax is written out in f32 and the
    logsumexp is max + log(sum) of its own row max and row sum, the form the attention matcher
    claims with the rest (fusion/attention_matcher.cc): the attention template writes both in
    one kernel, from its f32 scores. (The CPU kernel's `attention(logsumexp=True)` recomputes
    f32 scores beside the half ones instead: its matcher-free form on any backend.)"""
    q, k, v, scale, dtype = _operands(ctx, q, k, v, dropout_p, scale)
    scores = _scores(ctx, q, k, mask, is_causal, scale, dtype)
    axis = ctx.rank(scores) - 1
    wide = ctx.cast(scores, opmath(dtype))
    peak = ctx.reduce("reduce_max", wide, [axis], True)
    exps = ctx.pointwise("exp", [ctx.pointwise("sub", [wide, peak])])
    total = ctx.reduce("reduce_sum", exps, [axis], True)
    probs = ctx.cast(ctx.pointwise("div", [exps, total]), dtype)
    return ctx.matmul(probs, v), ctx.pointwise("add", [peak, ctx.pointwise("log", [total])])


def _operands(ctx: Context, q: Value, k: Value, v: Value, dropout_p: float, scale: Optional[float]) -> tuple:
    """Q, K and V with K/V heads repeated for grouped-query attention, the scale, the dtype."""
    check(dropout_p == 0.0, "attention with dropout (tilefuse's attention kernels have none yet; without dropout, "
                            "as in model.eval(), the call runs in tilefuse)")
    q_shape, k_shape = ctx.shape_of(q), ctx.shape_of(k)
    rank = len(q_shape)
    check(rank >= 2, "attention on tensors of rank < 2")
    if rank >= 3 and k_shape[-3] != q_shape[-3]:  # grouped-query attention: each K/V head serves a group of Q heads
        check(q_shape[-3] % k_shape[-3] == 0, f"{q_shape[-3]} query heads over {k_shape[-3]} key heads")
        k, v = (_repeat_heads(ctx, t, q_shape[-3] // k_shape[-3]) for t in (k, v))
    scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    return q, k, v, scale, ctx.dtype_of(q)


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
# for PyTorch's backward). On a GPU, a cuDNN or FlashAttention call whose logsumexp is read is
# taken where its backward will be too (attention_backward.template_limits) and that backward is
# tilefuse's: the forward template writes the logsumexp beside the output, and the dropout seed
# and offset the kernels also return (read by nothing but the backward op, which ignores them
# without dropout) are int64 zeros, as the kernels give them without dropout. The efficient
# kernel's call whose logsumexp is read (padded to 32 queries) splits out and runs in PyTorch, and
# the rest of its graph goes through tilefuse.

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
    if not _results_read(ctx, range(1, 9)):
        return [attention(ctx, q, k, v, None, dropout_p, is_causal, scale)] + [None] * 8
    return _saving_logsumexp(ctx, q, k, v, None, dropout_p, is_causal, scale, ctx.shape_of(q)[:3])


@handles("aten._scaled_dot_product_efficient_attention.default")
def sdpa_efficient(ctx: Context, q: Value, k: Value, v: Value, attn_bias: Optional[Value], compute_log_sumexp: bool,
                   dropout_p: float = 0.0, is_causal: bool = False, *, scale: Optional[float] = None) -> list:
    return [attention(ctx, q, k, v, attn_bias, dropout_p, is_causal, scale)] + [None] * 3


@handles("aten._scaled_dot_product_cudnn_attention.default")
def sdpa_cudnn(ctx: Context, q: Value, k: Value, v: Value, attn_bias: Optional[Value], compute_log_sumexp: bool,
               dropout_p: float = 0.0, is_causal: bool = False, return_debug_mask: bool = False, *,
               scale: Optional[float] = None) -> list:
    if not _results_read(ctx, range(1, 9)):
        return [attention(ctx, q, k, v, attn_bias, dropout_p, is_causal, scale)] + [None] * 8
    return _saving_logsumexp(ctx, q, k, v, attn_bias, dropout_p, is_causal, scale, ctx.shape_of(q)[:3] + [1])


def _saving_logsumexp(ctx: Context, q: Value, k: Value, v: Value, bias: Optional[Value], dropout_p: float, is_causal: bool,
                      scale: Optional[float], logsumexp_shape: list) -> list:
    """A GPU kernel's nine results: the output, the logsumexp (shaped as the kernel gives it),
    cumulative and maximum sequence lengths, the seed and offset, the debug mask."""
    out, logsumexp = attention_saving_logsumexp(ctx, q, k, v, bias, dropout_p, is_causal, scale)
    seed, offset = (ctx.scalar(0.0, "i64") for _ in range(2))
    return [out, ctx.reshape(logsumexp, logsumexp_shape), None, None, ctx.shape_of(q)[2], ctx.shape_of(k)[2], seed, offset, None]


# Marks a training forward's attention calls whose backward PyTorch runs (options backward or
# attention_backward "pytorch"): their logsumexp, seed and offset must then be the kernel's own.
IN_PYTORCH = "tilefuse_attention_in_pytorch"


def _only_output_read(node) -> bool:
    import operator

    return all(user.target is operator.getitem and user.args[1] == 0 for user in node.users)


def _why_not_saving(node) -> Optional[str]:
    """GPU calls whose other results are read are taken within the backward template's limits."""
    from .attention_backward import template_limits

    if _only_output_read(node):
        return None
    if node.meta.get(IN_PYTORCH):
        return "its logsumexp is read (a training forward) and its backward runs in PyTorch (options)"
    cudnn = node.target is torch.ops.aten._scaled_dot_product_cudnn_attention.default
    dropout_at = 5 if cudnn else 3
    dropout = node.args[dropout_at] if len(node.args) > dropout_at else node.kwargs.get("dropout_p", 0.0)
    bias = (node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_bias")) if cudnn else None
    reason = template_limits(node.args[0], node.args[1], dropout, bias)
    return None if reason is None else f"its logsumexp is read (a training forward) and the backward template does not take it: {reason}"


def _why_not_efficient(node) -> Optional[str]:
    if _only_output_read(node):
        return None
    return "its logsumexp is read (a training forward): the efficient kernel's is padded to 32 queries, which tilefuse does not write"


sdpa_cudnn.why_not = sdpa_flash.why_not = _why_not_saving
sdpa_efficient.why_not = _why_not_efficient

"""Scaled dot-product attention, whichever kernel PyTorch's dispatcher picked for it, written
as the primitives tilefuse's attention matcher claims as one flash-attention group:
matmul(Q, Kᵀ) · scale, the mask (added, or a where for booleans and is_causal), a softmax
over the keys, matmul with V."""

from __future__ import annotations

import math
from typing import Any, Optional

from ._context import Context, Value, check, handles


def attention(ctx: Context, q: Value, k: Value, v: Value, mask: Optional[Value], dropout_p: float, is_causal: bool,
              scale: Optional[float], enable_gqa: bool = False) -> Value:
    check(dropout_p == 0.0, "attention with dropout (tilefuse runs inference: call model.eval())")
    dtype = ctx.dtype_of(q)
    q_shape, k_shape = ctx.shape_of(q), ctx.shape_of(k)
    rank = len(q_shape)
    check(rank >= 2, "attention on tensors of rank < 2")
    if rank >= 3 and k_shape[-3] != q_shape[-3]:  # grouped-query attention: each K/V head serves a group of Q heads
        check(q_shape[-3] % k_shape[-3] == 0, f"{q_shape[-3]} query heads over {k_shape[-3]} key heads")
        k, v = (_repeat_heads(ctx, t, q_shape[-3] // k_shape[-3]) for t in (k, v))
    length, keys = q_shape[-2], k_shape[-2]
    scale = 1.0 / math.sqrt(q_shape[-1]) if scale is None else float(scale)
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    scores = ctx.matmul(q, ctx.transpose(k, perm))
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
            scores = ctx.pointwise("add", [scores, ctx.cast(mask, dtype)])
    return ctx.matmul(ctx.softmax(scores, rank - 1), v)


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


# The kernels the dispatcher picks return (output, logsumexp, ...): only the output is computed.

@handles("aten._scaled_dot_product_flash_attention_for_cpu.default")
def sdpa_flash_cpu(ctx: Context, q: Value, k: Value, v: Value, dropout_p: float = 0.0, is_causal: bool = False, *,
                   attn_mask: Optional[Value] = None, scale: Optional[float] = None) -> list:
    return [attention(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale), None]


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

"""PyTorch's attention backward ops (cuDNN's and FlashAttention's on a GPU, the CPU's flash
kernel's), what AOTAutograd's backward graph of a training step calls, as nodes of tilefuse's
graph: attention_grad_q, _k and _v over the same operands. The CPU backend computes them as
primitives (passes/attention_grads); the CUDA backend runs the three as one step of its
attention backward template (codegen/cuda/device/attention_bwd_sm90.cuh), so the backward graph
is not split around the call. On a GPU only the calls the template takes (bf16 or f16, head dim
64 or 128, no dropout, no attention bias; causal or not; grouped-query heads) become nodes; the
rest run in PyTorch between the graph's parts, as do all of them under
options={"attention_backward": "pytorch"} (`keep_in_pytorch`). The forward call whose
logsumexp such a call reads is taken under the same limits (tilefuse.fx.attention), its
logsumexp written by the forward template.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from ._context import Context, Value, check, handles

# The overloads taken: where their attn_bias (None: none), dropout_p and is_causal are; grad_out,
# query, key, value, out and logsumexp come first in both.
_OPS = {
    torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default: (8, 13, 14),
    torch.ops.aten._scaled_dot_product_flash_attention_backward.default: (None, 10, 11),
}


# Ops of a split graph's PyTorch parts that take their operands in any layout, so the part does
# not copy them into eager's layouts first (torch_backend._PyTorchPart): 12 of the 15 copies a
# layer GPT-2's training step made around its attention (H200, 2026-11-30). PyTorch's attention
# forwards read any strides whose last is 1; their outputs are still laid out as traced.
ANY_LAYOUT = {
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
}


def _value(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def why_not(node: torch.fx.Node) -> Optional[str]:
    """Why the template does not take this attention backward call (None: it does)."""
    bias_at, dropout_at, _ = _OPS[node.target]
    bias = node.args[bias_at] if bias_at is not None and bias_at < len(node.args) else None
    return template_limits(node.args[1], node.args[2], node.args[dropout_at], bias)


def template_limits(query_node: Any, key_node: Any, dropout: Any, bias_node: Any) -> Optional[str]:
    """Why the backward template does not take an attention of these operands (traced FX nodes),
    dropout and bias (None: it does)."""
    query, key = _value(query_node), _value(key_node)
    if not all(isinstance(t, torch.Tensor) for t in (query, key)):
        return "no traced values for its operands"
    if not (query.is_cuda and key.is_cuda):
        return f"operands on {query.device}"
    if query.dim() != 4 or key.dim() != 4:
        return f"operands of rank {query.dim()}"
    if query.dtype not in (torch.bfloat16, torch.float16):
        return f"{query.dtype} operands"
    if query.shape[-1] not in (64, 128) or key.shape[-1] != query.shape[-1]:
        return f"head dim {query.shape[-1]}"
    if query.shape[1] % key.shape[1] != 0:
        return f"{query.shape[1]} query heads over {key.shape[1]} key/value heads"
    if not isinstance(dropout, (int, float)) or float(dropout) != 0.0:
        return f"dropout {dropout}"
    bias = _value(bias_node)
    if bias is not None and not (isinstance(bias, torch.Tensor) and bias.numel() == 0):
        return "an attention bias"
    return None


# As nodes of tilefuse's graph: attention_grad_q, _k and _v (one op per gradient), which the CPU
# backend computes as primitives (passes/attention_grads) and the CUDA backend's attention
# backward template as one step, so the backward graph is not split around the call.

def _gradients(ctx: Context, grad_out: Value, query: Value, key: Value, value: Value, out: Value, logsumexp: Value,
               dropout_p: float, is_causal: bool, scale: Optional[float]) -> list:
    check(float(dropout_p) == 0.0, f"attention's backward with dropout {dropout_p}")
    shape = ctx.shape_of(query)
    check(len(shape) == 4, f"attention's backward over rank-{len(shape)} operands")
    scale = 1.0 / math.sqrt(shape[-1]) if scale is None else float(scale)
    # cuDNN's logsumexp is [batch, heads, queries, 1]; the others' [batch, heads, queries].
    if ctx.shape_of(logsumexp) != shape[:3]:
        logsumexp = ctx.reshape(logsumexp, shape[:3])
    return [ctx.attention_grad(which, grad_out, query, key, value, out, logsumexp, scale, bool(is_causal)) for which in "qkv"]


@handles("aten._scaled_dot_product_flash_attention_for_cpu_backward.default")
def sdpa_flash_cpu_backward(ctx: Context, grad_out: Value, query: Value, key: Value, value: Value, out: Value, logsumexp: Value,
                            dropout_p: float, is_causal: bool, *, attn_mask: Optional[Value] = None,
                            scale: Optional[float] = None) -> list:
    check(attn_mask is None, "attention's backward with a mask")
    return _gradients(ctx, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale)


@handles("aten._scaled_dot_product_cudnn_attention_backward.default")
def sdpa_cudnn_backward(ctx: Context, grad_out: Value, query: Value, key: Value, value: Value, out: Value, logsumexp: Value,
                        philox_seed: Any, philox_offset: Any, attn_bias: Any, cum_seq_q: Any, cum_seq_k: Any, max_q: int,
                        max_k: int, dropout_p: float, is_causal: bool, *, scale: Optional[float] = None) -> list:
    return _gradients(ctx, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale)


@handles("aten._scaled_dot_product_flash_attention_backward.default")
def sdpa_flash_backward(ctx: Context, grad_out: Value, query: Value, key: Value, value: Value, out: Value, logsumexp: Value,
                        cum_seq_q: Any, cum_seq_k: Any, max_q: int, max_k: int, dropout_p: float, is_causal: bool,
                        philox_seed: Any, philox_offset: Any, *, scale: Optional[float] = None) -> list:
    return _gradients(ctx, grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale)


# Marks a backward graph's attention backward calls that PyTorch's kernels run instead
# (options={"attention_backward": "pytorch"}): the handlers do not take them.
IN_PYTORCH = "tilefuse_attention_backward_in_pytorch"


def _why_not_taken(node: torch.fx.Node) -> Optional[str]:
    """The GPU ops are graph nodes only where the template takes them (the CUDA backend runs them
    on it); the rest, and those left to PyTorch, split out."""
    return "options attention_backward='pytorch'" if node.meta.get(IN_PYTORCH) else why_not(node)


def _why_not_taken_on_cpu(node: torch.fx.Node) -> Optional[str]:
    """The CPU kernel's calls are graph nodes without dropout or a mask."""
    if node.meta.get(IN_PYTORCH):
        return "options attention_backward='pytorch'"
    dropout = node.args[6] if len(node.args) > 6 else node.kwargs.get("dropout_p", 0.0)
    if not isinstance(dropout, (int, float)) or float(dropout) != 0.0 or node.kwargs.get("attn_mask") is not None:
        return "dropout or an attention mask"
    return None


sdpa_cudnn_backward.why_not = sdpa_flash_backward.why_not = _why_not_taken
sdpa_flash_cpu_backward.why_not = _why_not_taken_on_cpu


def keep_in_pytorch(gm: torch.fx.GraphModule) -> None:
    """Leaves gm's attention backward calls to PyTorch's kernels (split out of the graph), and a
    training forward's attention calls whose logsumexp those read."""
    from .attention import IN_PYTORCH as FORWARD_IN_PYTORCH

    for node in gm.graph.nodes:
        if node.op == "call_function" and str(node.target) in ("aten._scaled_dot_product_cudnn_attention.default",
                                                               "aten._scaled_dot_product_flash_attention.default"):
            node.meta[FORWARD_IN_PYTORCH] = True
        if node.op == "call_function" and str(node.target) in (
                "aten._scaled_dot_product_cudnn_attention_backward.default",
                "aten._scaled_dot_product_flash_attention_backward.default",
                "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"):
            node.meta[IN_PYTORCH] = True

"""PyTorch's attention backward ops (cuDNN's and FlashAttention's, what AOTAutograd's backward
graph of a training step calls on a GPU) run on tilefuse's attention backward template
(codegen/cuda/device/attention_bwd_sm90.cuh) instead of PyTorch's kernels.

`use_attention_backward_template(gm)` rewrites a backward graph's calls the template takes
(bf16 or f16, head dim 64 or 128, no dropout, no attention bias; causal or not; grouped-query
heads) into `template_attention_backward`, which the graph's split runs between its parts (the
backend puts it there: named in explain(), not warned about). The operands are read dense
[batch · heads][rows][d] (copied so where PyTorch's are not); the gradients come back dense and
are given eager's layouts as any split op's outputs are.

Not yet: the op as a node of tilefuse's graph, so that the graph is not split around it, and the
forward's attention (which saves the logsumexp) on the forward template. Both need the graph to
hold the backward (design notes, 2026-11-30).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Optional, Set

import torch

logger = logging.getLogger("tilefuse")

# The overloads taken: where their attn_bias (None: none), dropout_p and is_causal are; grad_out,
# query, key, value, out and logsumexp come first in both.
_OPS = {
    torch.ops.aten._scaled_dot_product_cudnn_attention_backward.default: (8, 13, 14),
    torch.ops.aten._scaled_dot_product_flash_attention_backward.default: (None, 10, 11),
}


def template_attention_backward(op: Any, args: tuple, kwargs: dict, eager_strides: tuple = ()):
    """What `op(*args, **kwargs)` (one of PyTorch's attention backward ops the template takes)
    returns, by the template, which reads its operands in any layout (the split's PyTorch part
    does not lay them out as eager's first: ANY_LAYOUT). By `op` itself where the template
    cannot run (no NVRTC, say: said once in the log), its tensor operands first given
    `eager_strides` (per argument, None: as they are), the layouts eager PyTorch traced: cuDNN's
    backward reads the layout, not only the values (a dense grad_output where eager's had the
    output's strides gave a wrong dQ: GPT-2 small, bf16, H200, 2026-11-29)."""
    from .._errors import Error

    causal_at = _OPS[op][2]
    try:
        return _run_template(*args[:6], bool(args[causal_at]), kwargs.get("scale"))
    except Error as error:
        if str(error) not in _FAILED:
            _FAILED.add(str(error))
            logger.warning("tilefuse: attention backward on PyTorch's kernel: the template could not run: %s", error)
        from ..torch_backend import laid_out_as

        args = tuple(laid_out_as(a, s) for a, s in zip(args, eager_strides)) + tuple(args[len(eager_strides):])
        return op(*args, **kwargs)


# Ops of a split graph's PyTorch parts that take their operands in any layout, so the part does
# not copy them into eager's layouts first (torch_backend._PyTorchPart): 12 of the 15 copies a
# layer GPT-2's training step made around its attention (H200, 2026-11-30). PyTorch's attention
# forwards read any strides whose last is 1; their outputs are still laid out as traced.
ANY_LAYOUT = {
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    template_attention_backward,
}


_FAILED: Set[str] = set()


def _run_template(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, out: torch.Tensor,
                  logsumexp: torch.Tensor, is_causal: bool, scale: Optional[float]):
    """(dQ, dK, dV) of attention over [batch, heads, rows, d] operands (key and value may have
    fewer heads: grouped-query attention), by the template, queued on PyTorch's current stream."""
    from .. import _tilefuse

    batch, heads, rows, d = query.shape
    keys = key.shape[2]
    problem = ({torch.bfloat16: "bf16", torch.float16: "f16"}[query.dtype], batch * heads, heads // key.shape[1], rows, keys, d,
               bool(is_causal))
    dense = [t.contiguous() for t in (query, key, value, out, grad_out)]
    lse = logsumexp.reshape(batch * heads, rows).to(torch.float32).contiguous()
    dq, dk, dv = (torch.empty_like(t) for t in dense[:3])
    scratch = torch.empty(_tilefuse.attention_backward_scratch_bytes(*problem), dtype=torch.uint8, device=query.device)
    pointers = [t.data_ptr() for t in (*dense, lse, dq, dk, dv, scratch)]
    stream = torch.cuda.current_stream(query.device).cuda_stream
    _tilefuse.attention_backward(*problem, 1.0 / math.sqrt(d) if scale is None else float(scale), pointers, query.get_device(), stream)
    return dq, dk, dv


def _value(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def why_not(node: torch.fx.Node) -> Optional[str]:
    """Why the template does not take this attention backward call (None: it does)."""
    bias_at, dropout_at, _ = _OPS[node.target]
    query, key = _value(node.args[1]), _value(node.args[2])
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
    dropout = node.args[dropout_at]
    if not isinstance(dropout, (int, float)) or float(dropout) != 0.0:
        return f"dropout {dropout}"
    bias = _value(node.args[bias_at]) if bias_at is not None and bias_at < len(node.args) else None
    if bias is not None and not (isinstance(bias, torch.Tensor) and bias.numel() == 0):
        return "an attention bias"
    return None


def use_attention_backward_template(gm: torch.fx.GraphModule) -> int:
    """Rewrites gm's attention backward calls the template takes; returns how many. Each call
    left to PyTorch is logged (logger "tilefuse", INFO) with the reason."""
    from ..torch_backend import eager_strides

    rewritten = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _OPS:
            continue
        reason = why_not(node)
        if reason is not None:
            logger.info("tilefuse: %s runs on PyTorch's kernel, not the attention backward template: %s", node.target, reason)
            continue
        node.args = (node.target, tuple(node.args), dict(node.kwargs), tuple(eager_strides(a) for a in node.args))
        node.kwargs = {}
        node.target = template_attention_backward
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten

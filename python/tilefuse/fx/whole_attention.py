"""Scaled dot-product attention kept whole through AOTAutograd.

F.scaled_dot_product_attention is a composite op: AOTAutograd's tracing picks one of PyTorch's
kernels for it the way the eager dispatcher would, and where none of the fused ones takes the
call (on a GPU, a half-precision attention with an f32 additive mask, as transformers' BERT
passes) it is written out as its math path: f32 products, a softmax with a row guard, and casts.
Neither tilefuse's attention matcher nor its template take that form, so the attention ran as
separate f32 products (BERT-base at 1x128 on an H200: 0.68x torch.compile, its 60 f32 products on
cuBLASLt). `keep_attention_whole` rewrites Dynamo's graph before AOTAutograd sees it: each
inference call of F.scaled_dot_product_attention on a device in WHOLE_ON becomes
`tilefuse::attention`, an opaque op (its fake kernel gives the output's shape) that the
translator maps onto the attention group directly, and that runs F.scaled_dot_product_attention
where PyTorch runs it (a graph tilefuse splits). Calls that need gradients stay as they are.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from ._dynamo_graph import SDPA_SIGNATURE, bound_calls, example_value

WHOLE_ON = {"cuda"}  # device types whose attention calls are kept whole (the CPU's flash kernel already is)


@torch.library.custom_op("tilefuse::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor], dropout_p: float,
                 is_causal: bool, scale: Optional[float], enable_gqa: bool) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa).contiguous()


@attention_op.register_fake
def _(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))




def _needs_grad(node: torch.fx.Node) -> bool:
    values = [a.meta.get("example_value") for a in node.all_input_nodes]
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


def keep_attention_whole(gm: torch.fx.GraphModule) -> int:
    """Rewrites gm's inference attention calls on WHOLE_ON devices in place; returns how many."""
    rewritten = 0
    for node, args in bound_calls(gm, F.scaled_dot_product_attention, SDPA_SIGNATURE):
        query = example_value(args["query"])
        if not isinstance(query, torch.Tensor) or query.device.type not in WHOLE_ON or _needs_grad(node):
            continue
        node.target = torch.ops.tilefuse.attention.default
        node.args = (args["query"], args["key"], args["value"], args["attn_mask"], float(args["dropout_p"]),
                     bool(args["is_causal"]), args["scale"], bool(args["enable_gqa"]))
        node.kwargs = {}
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten

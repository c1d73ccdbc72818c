"""Attention masks proven causal become is_causal.

Traced by Dynamo, transformers' models (GPT-2, LLaMA, ...) do not pass is_causal to
F.scaled_dot_product_attention: their mask code cannot skip the mask while tracing, so it builds a
[batch, 1, queries, keys] boolean mask from aranges (the causal rule and-ed with a packed-sequence
rule) and passes it as attn_mask. PyTorch then runs the attention with a bias: cuDNN's kernels
read it, and its backward (with an attention bias) is one tilefuse's attention backward template
does not take. Where such a mask depends on no input of the graph, `prove_causal_masks` computes
it, and where it equals the causal rule (key j seen by query i when j <= i, for every batch entry
and head), the call becomes is_causal=True without the mask: the same attention, proven on the
mask's values rather than assumed from the code that made it.
"""

from __future__ import annotations

from typing import List, Optional

import torch
import torch.nn.functional as F

from ._dynamo_graph import SDPA_SIGNATURE, bound_calls, example_value

_MAX_MASK_ELEMENTS = 1 << 26  # masks computed at compile time: at most this many elements




def _ancestors(node: torch.fx.Node) -> Optional[List[torch.fx.Node]]:
    """The nodes `node` is computed from, in graph order, where none is an input of the graph."""
    seen, stack = set(), [node]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        if n.op == "placeholder" or n.op == "output":
            return None
        seen.add(n)
        stack.extend(n.all_input_nodes)
    return [n for n in node.graph.nodes if n in seen]


def _computed_mask(gm: torch.fx.GraphModule, mask: torch.fx.Node) -> Optional[torch.Tensor]:
    """The mask's value, computed from the graph's nodes (None where it depends on an input,
    is not a boolean tensor, or is too large to compute at compile time)."""
    value = example_value(mask)
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.dim() != 4 or value.numel() > _MAX_MASK_ELEMENTS:
        return None
    nodes = _ancestors(mask)
    if nodes is None:
        return None
    graph = torch.fx.Graph()
    copies = {}
    for n in nodes:
        copies[n] = graph.node_copy(n, lambda x: copies[x])
    graph.output(copies[mask])
    try:
        return torch.fx.GraphModule(gm, graph)()
    except Exception:  # noqa: BLE001 - a mask that cannot be computed here stays a mask
        return None


def _is_causal(mask: torch.Tensor) -> bool:
    queries, keys = mask.shape[-2], mask.shape[-1]
    causal = torch.ones(queries, keys, dtype=torch.bool, device=mask.device).tril()
    return bool(torch.equal(mask, causal.expand(mask.shape)))


def prove_causal_masks(gm: torch.fx.GraphModule) -> int:
    """Rewrites gm's attention calls whose mask is computed to be causal; returns how many."""
    rewritten = 0
    for node, args in bound_calls(gm, F.scaled_dot_product_attention, SDPA_SIGNATURE):
        mask = args["attn_mask"]
        if not isinstance(mask, torch.fx.Node) or args["is_causal"] is not False:
            continue
        query, key = example_value(args["query"]), example_value(args["key"])
        if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor):
            continue
        value = _computed_mask(gm, mask)
        if value is None or value.shape[-2:] != (query.shape[-2], key.shape[-2]) or not _is_causal(value):
            continue
        kwargs = {name: args[name] for name in ("dropout_p", "scale", "enable_gqa")}
        node.args = (args["query"], args["key"], args["value"])
        node.kwargs = dict(kwargs, attn_mask=None, is_causal=True)
        # The mask's own computation goes where nothing else reads it (what it shares, such as
        # position ids, stays).
        for n in reversed(_ancestors(mask) or []):
            if not n.users:
                gm.graph.erase_node(n)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten

"""Reading Dynamo's graph (before AOTAutograd) for the backend's rewrites of it
(whole_attention, causal_masks, linear_cross_entropy): calls of a Python function with their
arguments bound, F.scaled_dot_product_attention's signature to bind them to."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Iterator, Tuple

import torch


def bound_calls(gm: torch.fx.GraphModule, function: Callable, signature: inspect.Signature
                ) -> Iterator[Tuple[torch.fx.Node, Dict[str, Any]]]:
    """Each call of `function` in gm (a snapshot: the caller may rewrite as it goes) with its
    arguments bound to `signature`, defaults applied; calls that do not bind are skipped."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not function:
            continue
        try:
            bound = signature.bind(*node.args, **node.kwargs)
        except TypeError:
            continue
        bound.apply_defaults()
        yield node, bound.arguments


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    pass


# F.scaled_dot_product_attention's arguments, to bind its calls to.
SDPA_SIGNATURE = inspect.signature(_sdpa)


def example_value(node: Any) -> Any:
    """The value Dynamo traced for a node (None for what is not a node)."""
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None

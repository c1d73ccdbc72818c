"""Which of a graph's weights tilefuse folds into the compiled model, and which it reads at each call.

A weight (a module's parameter or buffer, lifted by Dynamo into a graph input) may become a
constant of the tilefuse graph, which the graph passes fold, or stay an input the kernels read
where it lies, as any other input. Folding pays only where it computes something at compile
time: an op all of whose tensor operands are known then (a weight cast to another dtype, scaled,
gathered by constant indices), or a convolution or batch norm, whose weights the window passes
reshape and into which a batch norm is folded. A weight that only feeds products, gathers by the
call's indices and pointwise ops with activations is read the same way in either form: as a
constant it would cost a copy of its bytes to the host and back to the device per compile (GPT-2
small's 124 M weights), a compiled model pinned to those tensors, and a recompile after each
change in place (an optimizer step); as an input it costs nothing. That holds on the GPU; on the
CPU a constant weight is worth its copy (oneDNN packs a constant matrix once, and GPT-2 small's
call took 280 ms with folded weights against 360-670 ms with them as inputs, 2 cores, 2026-11-30),
so `policy` "auto" folds a graph's weights that live on the host.
"""

from __future__ import annotations

import operator
from typing import Set

import torch

aten = torch.ops.aten

# Ops that only reinterpret their input's bytes: a weight read through them is still read, not computed on.
_VIEWS = {aten.t.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
          aten.transpose.int, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
          aten.squeeze.default, aten.alias.default, aten.detach.default, aten.slice.Tensor, aten.select.int,
          aten.clone.default}

# Ops whose weights the graph passes rewrite at compile time (window ops, batch norm folded into the convolution).
_FOLDED_BY_PASSES = {aten.convolution.default, aten._native_batch_norm_legit_no_training.default,
                     aten.native_batch_norm.default}


def _tensor_nodes(node: torch.fx.Node) -> list:
    """The FX nodes among a call's arguments (nested lists included)."""
    found = []
    torch.fx.node.map_arg((node.args, node.kwargs), lambda n: found.append(n))
    return found


def folded_weights(gm: torch.fx.GraphModule, weights: Set[int], policy: str = "auto") -> Set[int]:
    """The positions among `weights` (placeholder indices) compiled in as constants: under
    "fold", all; under "inputs", those whose values folding uses; under "auto", as "inputs" for
    weights on a GPU and as "fold" for those on the host."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if policy == "fold":
        return set(weights)
    if policy == "auto":
        on_host = {i for i in weights if i < len(placeholders) and _on_host(placeholders[i])}
        return on_host | folded_weights(gm, weights - on_host, "inputs")
    weight_nodes = {placeholders[i] for i in weights if i < len(placeholders)}
    # Nodes whose values are known at compile time: weights, the graph's own tensors, and
    # every call on those alone (a creation op such as arange has no tensor operand).
    known = set(weight_nodes)
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            known.add(node)
        elif node.op == "call_function" and node.target is not operator.getitem and all(a in known for a in _tensor_nodes(node)):
            known.add(node)
        elif node.op == "call_function" and node.target is operator.getitem and node.args[0] in known:
            known.add(node)

    def folding_pays(weight: torch.fx.Node) -> bool:
        pending, seen = [weight], set()
        while pending:
            node = pending.pop()
            for user in node.users:
                if user in seen or user.op != "call_function":
                    continue
                seen.add(user)
                if user.target in _VIEWS:
                    pending.append(user)
                elif user.target in _FOLDED_BY_PASSES or user in known:
                    return True
        return False

    return {i for i in weights if i < len(placeholders) and folding_pays(placeholders[i])}


def _on_host(placeholder: torch.fx.Node) -> bool:
    value = placeholder.meta.get("val")
    return not isinstance(value, torch.Tensor) or value.device.type == "cpu"

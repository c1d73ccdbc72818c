"""An ATen FX graph (Dynamo's, after AOTAutograd) as a tilefuse graph, for one call's inputs.

The graph is walked once, in order, with this call's arguments: tensors that are model
inputs become parameters, weights (the positions the caller names) become constants the
planner folds, symbolic sizes become this call's integers, and every call_function node
goes to the handler registered for its ATen overload (one module per op family). Each
result is checked against the dtype and static shape PyTorch traced for the node, so a
handler that disagrees with PyTorch fails here, naming the node, instead of later as a wrong
number.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import torch

from .._errors import Error
from ._context import HANDLERS, Context, Unsupported, Value, torch_dtype

# Python-level functions in ATen graphs (symbolic size arithmetic, tuple indexing).
_PYTHON_FUNCTIONS = {operator.getitem, operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv,
                     operator.mod, operator.neg, operator.pow, operator.eq, operator.ne, operator.lt, operator.le,
                     operator.gt, operator.ge, operator.abs, math.floor, math.ceil,
                     # what a symbolic size goes through in user code (float(n), max(n, 1)): on ints, as in Python
                     torch.sym_float, torch.sym_int, torch.sym_max, torch.sym_min, torch.sym_not}
_SYM_OPS = {"aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int", "aten.sym_storage_offset.default"}


@dataclass
class Translation:
    graph: Any                 # _tilefuse.Graph
    # Where the graph's inputs come from, in order: (argument,) or, for a tensor inside a list or
    # tuple argument (a split graph's part receives tuples), (argument, item); ("uniform", shape):
    # random numbers drawn at each call (Context.uniform_input).
    input_positions: List[Tuple[Any, ...]]
    output_spec: Any            # pytree spec of the FX graph's outputs
    num_outputs: int
    none_outputs: List[int]  # outputs that are None (the graph's outputs skip them)
    # Outputs the compiled graph does not produce, as eager returns them: an argument itself
    # (output -> its position among the call's arguments), or the same tensor as an earlier
    # output (output -> that output's index). A training forward returns some of its inputs
    # as saved tensors; made graph outputs, each was a copy per call.
    forwarded_arguments: Dict[int, int]
    repeated_outputs: Dict[int, int]
    # Layouts other than row-major, as orders of dims in memory (storage_order): inputs' (by
    # their number among the graph's inputs), read where they lie through a transpose in the
    # graph; outputs' (by their index), written in eager's layout by the graph's kernels. Each
    # was a copy per call outside the graph (GPT-2's training step: 144 copies, 1.5 ms of the
    # GPU's time, H200, 2026-11-30).
    input_orders: Dict[int, Tuple[int, ...]]
    output_orders: Dict[int, Tuple[int, ...]]
    # Outputs that are views of an argument (a transposed weight a training forward saves):
    # output -> (the argument's position, the view ops from it), taken by PyTorch at each call
    # instead of a copy the run makes (GPT-2's training step: 95 such copies).
    viewed_arguments: Dict[int, Tuple[int, List[torch.fx.Node]]]
    # Outputs written with zero columns appended (output -> the columns eager's has): logits
    # of an unaligned vocabulary (_padded_columns). The caller gets the columns eager has, a
    # strided view of the padded rows, as TorchInductor returns such logits.
    padded_columns: Dict[int, int] = field(default_factory=dict)
    # Inputs the graph updates in place (AOTAutograd's copy_ into an input at the end of an
    # inference graph: a static KV cache, a counter): (the compiled graph's output with the
    # new value, the argument's position). These outputs follow the FX graph's own; the
    # caller leaves each in its argument (Specialization.run).
    mutations: List[Tuple[int, int]] = field(default_factory=list)

    def __post_init__(self):
        # How to make each of the FX graph's outputs, read once (each call walked the dicts,
        # GPT-2's training step 28 times): "tensor" is the compiled graph's next output as it is.
        self._output_plan = []
        for i in range(self.num_outputs):
            if i in self.none_outputs:
                self._output_plan.append(("none", None))
            elif i in self.forwarded_arguments:
                self._output_plan.append(("argument", self.forwarded_arguments[i]))
            elif i in self.viewed_arguments:
                self._output_plan.append(("view", self.viewed_arguments[i]))
            elif i in self.repeated_outputs:
                self._output_plan.append(("repeat", self.repeated_outputs[i]))
            elif i in self.output_orders:
                self._output_plan.append(("ordered", _inverse(self.output_orders[i])))
            elif i in self.padded_columns:
                self._output_plan.append(("narrowed", self.padded_columns[i]))
            else:
                self._output_plan.append(("tensor", None))
        self._plain = all(kind == "tensor" for kind, _ in self._output_plan)
        # The graph's inputs as the call's arguments themselves, taken by position (no random
        # numbers, no tensor inside a tuple, none read in another order): most forwards.
        plain = not self.input_orders and all(len(p) == 1 and p[0] != "uniform" for p in self.input_positions)
        self._argument_positions = [p[0] for p in self.input_positions] if plain else None
        # One C call per call (a decode step's ~220 inputs by a list comprehension: ~6 us).
        self._take_arguments = operator.itemgetter(*self._argument_positions) if plain and len(self._argument_positions) > 1 else None

    def outputs(self, tensors: List[Any], args: Sequence[Any]) -> List[Any]:
        """The FX graph's outputs, in order, from the compiled graph's and the call's arguments
        (None where it returns None)."""
        if self.mutations:
            tensors = tensors[:len(tensors) - len(self.mutations)]
        if self._plain:
            return list(tensors)
        result, it = [], iter(tensors)
        for kind, data in self._output_plan:
            if kind == "none":
                result.append(None)
            elif kind == "argument":
                result.append(args[data])
            elif kind == "view":
                position, views = data
                result.append(_replay_views(args[position], views))
            elif kind == "repeat":
                result.append(result[data])
            elif kind == "ordered":  # the graph wrote it in memory order: a view gives eager's dims
                result.append(next(it).permute(data))
            elif kind == "narrowed":  # the graph wrote padded rows: a view gives eager's columns
                result.append(next(it).narrow(-1, 0, data))
            else:
                result.append(next(it))
        return result

    def inputs(self, args: Sequence[Any], draw: bool = True) -> List[Any]:
        """The graph's inputs, in order, taken from a call's arguments (random ones drawn on the
        arguments' device; without `draw`, left unset: the generator's state is the call's)."""
        if self._take_arguments is not None:
            return list(self._take_arguments(args))
        if self._argument_positions is not None:
            return [args[i] for i in self._argument_positions]
        inputs = []
        orders = self.input_orders
        for n, p in enumerate(self.input_positions):
            if p[0] == "uniform":
                device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
                make = torch.rand if draw else torch.empty
                inputs.append(make(p[1], dtype=torch.float32, device=device))
            else:
                value = args[p[0]] if len(p) == 1 else args[p[0]][p[1]]
                if orders and n in orders:
                    value = value.permute(orders[n])  # dense in memory order
                inputs.append(value)
        return inputs


def storage_order(value: Any) -> Optional[Tuple[int, ...]]:
    """The order of a tensor's dims in memory, outermost first, where it is not the row-major
    one and the layout has an order: dense under a permutation of the dims (a transpose's
    result), or a strided view of such (a slice of a fused QKV product's output, ordered as a
    dense copy of it would be). None for a row-major layout or one with no order (expanded,
    overlapping) and for what is not a tensor. Dims of size one, which have no place in memory,
    come first."""
    if not isinstance(value, torch.Tensor) or value.is_contiguous():
        return None
    dims = [d for d in range(value.dim()) if value.shape[d] != 1]
    ordered = sorted(dims, key=lambda d: -value.stride(d))
    steps = [value.stride(d) for d in ordered]
    if any(step <= 0 for step in steps) or len(set(steps)) != len(steps) or ordered == dims:
        return None
    return tuple(d for d in range(value.dim()) if value.shape[d] == 1) + tuple(ordered)


# View ops whose eager replay on an argument gives a graph's output without computing it (and
# that a split graph's parts made of nothing else run in PyTorch: torch_backend._has_tensor_work).
VIEW_OPS = {"aten.view.default", "aten._unsafe_view.default", "aten.permute.default", "aten.transpose.int",
             "aten.t.default", "aten.expand.default", "aten.slice.Tensor", "aten.select.int", "aten.unsqueeze.default",
             "aten.squeeze.dim", "aten.squeeze.dims", "aten.alias.default", "aten.detach.default"}


def _viewed_argument(leaf: Any, placeholders: Dict[torch.fx.Node, int], args: Sequence[Any]) -> Optional[Tuple[int, List[torch.fx.Node]]]:
    """(the argument's position, the view ops from it, first first) where `leaf` is views of a
    tensor argument whose other operands are constants, and replaying them on this call's
    argument gives eager's value; else None."""
    views: List[torch.fx.Node] = []
    node = leaf
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and target_name(node) in VIEW_OPS:
        if not node.args or _has_nodes(node.args[1:]) or node.kwargs:  # a symbolic size: not replayed
            return None
        views.insert(0, node)
        node = node.args[0]
    if not views or node not in placeholders or not isinstance(args[placeholders[node]], torch.Tensor):
        return None
    try:
        value = _replay_views(args[placeholders[node]], views)
    except RuntimeError:  # a view PyTorch cannot take of this layout (its _unsafe_view after a copy)
        return None
    traced = leaf.meta.get("val")
    if isinstance(traced, torch.Tensor) and list(value.shape) != list(traced.shape):
        return None
    return placeholders[node], views


def _has_nodes(args: Any) -> bool:
    found = []
    torch.fx.node.map_arg(args, lambda n: found.append(n))
    return bool(found)


def _replay_views(value: torch.Tensor, views: List[torch.fx.Node]) -> torch.Tensor:
    for node in views:
        value = node.target(value, *node.args[1:])
    return value


def _inverse(order: Sequence[int]) -> List[int]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return inverse


def target_name(node: torch.fx.Node) -> str:
    """The key handlers are registered under: "aten.add.Tensor", or a Python function's name."""
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target)
    if isinstance(node.target, str):
        return node.target
    return getattr(node.target, "__name__", str(node.target))


def is_supported(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return True
    if node.target in _PYTHON_FUNCTIONS or target_name(node) in _SYM_OPS:
        return True
    return why_unsupported(node) is None


def why_unsupported(node: torch.fx.Node) -> Optional[str]:
    """Why a call is not taken (None: it is): no handler for its op, or the handler's reason for
    this use. A handler may take only some uses of its overload: its `why_not(node)`, read from
    the node alone, names the others, which are split out to PyTorch like unmapped ops, not
    failing the whole graph."""
    if node.target is torch.ops.aten.copy_.default:
        return _why_not_update(node)
    handler = HANDLERS.get(target_name(node))
    if handler is None:
        return "no mapping"
    return getattr(handler, "why_not", lambda n: None)(node)


def unsupported_nodes(gm: torch.fx.GraphModule) -> List[torch.fx.Node]:
    """The graph's calls of ops tilefuse has no handler for (call_module/call_method too)."""
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module") and
            (n.op != "call_function" or not is_supported(n))]


def translate(gm: torch.fx.GraphModule, args: Sequence[Any], weight_positions: Set[int],
              row_major_outputs: Set[int] = frozenset(), pad_outputs: bool = False) -> Translation:
    """The graph for these arguments; raises Unsupported (an op or use tilefuse does not take)
    or Error (the builder refused a node), both naming the FX node. Outputs are written in the
    layouts eager traced, but those in `row_major_outputs` (by leaf) row-major, and with
    `pad_outputs` (the caller's outputs on a GPU, not tensors a backward or another part
    reads) a product's unaligned rows padded (_padded_columns)."""
    ctx = Context()
    env: Dict[torch.fx.Node, Any] = {}
    input_positions: List[Tuple[Any, ...]] = ctx.input_positions
    input_orders: Dict[int, Tuple[int, ...]] = {}
    placeholder = 0
    outputs: List[Any] = []
    leaves: List[Any] = []
    placeholders: Dict[torch.fx.Node, int] = {}
    updates: List[Tuple[int, Value]] = []  # (argument position, its new value)
    spec = None
    for node in gm.graph.nodes:
        ctx.node = node
        where = f"FX node '{node.name}' ({target_name(node) if node.op == 'call_function' else node.op})"
        ctx.set_location(where, node.name)
        try:
            if node.op == "placeholder":
                placeholders[node] = placeholder
                env[node] = _argument(ctx, node, args[placeholder], placeholder in weight_positions, input_positions,
                                      placeholder, input_orders)
                placeholder += 1
            elif node.op == "get_attr":
                env[node] = _constant(ctx, _fetch_attr(gm, node.target))
            elif node.op == "call_function" and node.target is torch.ops.aten.copy_.default:
                updates.append(_update_in_place(ctx, node, env, placeholders, updates))
                env[node] = env[node.args[0]]
            elif node.op == "call_function":
                env[node] = _call(ctx, node, env)
                _check_result(ctx, node, env[node])
            elif node.op == "output":
                leaves, spec = torch.utils._pytree.tree_flatten(node.args[0])
                outputs = [_load(env, leaf) for leaf in leaves]
            else:
                raise Unsupported(f"{node.op} nodes are not taken (only ATen call_function graphs)")
        except Unsupported as error:
            raise Unsupported(f"{where}: {error}") from None
        if not ctx.ok:
            raise Error(ctx.error)
    none_outputs, forwarded, repeated, first_of, output_orders, viewed, padded_columns = [], {}, {}, {}, {}, {}, {}
    graph_outputs = 0
    for i, (leaf, value) in enumerate(zip(leaves, outputs)):
        if value is None:  # a backward graph's gradient of an input that needs none
            none_outputs.append(i)
        elif not isinstance(value, Value):
            raise Unsupported(f"output {i} is a {type(value).__name__}, not a tensor")
        elif leaf in placeholders and isinstance(args[placeholders[leaf]], torch.Tensor):
            forwarded[i] = placeholders[leaf]
        elif _is_update(leaf):  # the updated input itself, its new value in it after the run
            forwarded[i] = placeholders[leaf.args[0]]
        elif (view := _viewed_argument(leaf, placeholders, args)) is not None:
            viewed[i] = view
        elif isinstance(leaf, torch.fx.Node) and leaf in first_of:
            repeated[i] = first_of[leaf]
        else:
            if isinstance(leaf, torch.fx.Node):
                first_of[leaf] = i
                # eager's layout, written by the kernels
                order = None if i in row_major_outputs else storage_order(leaf.meta.get("val"))
                if order is not None:
                    output_orders[i] = order
                    value = ctx.transpose(value, list(order))
                elif pad_outputs and (columns := _padded_columns(ctx, leaf, value)):
                    padded_columns[i] = ctx.shape_of(value)[-1]
                    shape = ctx.shape_of(value)
                    shape[-1] = columns - shape[-1]
                    value = ctx.concat([value, ctx.broadcast_to(ctx.scalar(0.0, ctx.dtype_of(value)), shape)], -1)
            ctx.output(value, f"output_{i}")
            graph_outputs += 1
    if len(none_outputs) + len(forwarded) + len(repeated) + len(viewed) == len(outputs) and not updates:
        raise Unsupported("the graph computes nothing (its outputs are its inputs, views of them or None)")
    mutations = []
    for position, value in updates:
        ctx.output(value, f"updated_input_{position}")
        mutations.append((graph_outputs, position))
        graph_outputs += 1
    if ctx.symbolic_dims:
        ctx.builder.set_symbolic_inputs(ctx.symbolic_dims, ctx.symbol_values)
    return Translation(ctx.build(), input_positions, spec, len(outputs), none_outputs, forwarded, repeated, input_orders,
                       output_orders, viewed, padded_columns, mutations)


def _is_update(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is torch.ops.aten.copy_.default


def _why_not_update(node: torch.fx.Node) -> Optional[str]:
    """Why a copy_ is not an update tilefuse takes (None: it is): a copy into a graph input that
    nothing reads after it, as AOTAutograd writes an inference graph's input mutations."""
    destination = node.args[0]
    later = node.next
    while later.op != "output":
        if destination in later.all_input_nodes:
            return "copy_ into an input read after the copy"
        later = later.next
    if not isinstance(destination, torch.fx.Node) or destination.op != "placeholder" or \
            any(user.op != "output" for user in node.users):
        return "copy_ into something other than a graph input, or whose result is read in the graph"
    return None


def _update_in_place(ctx: Context, node: torch.fx.Node, env: Dict[torch.fx.Node, Any],
                     placeholders: Dict[torch.fx.Node, int], updates: List[Tuple[int, Value]]) -> Tuple[int, Value]:
    """An `aten.copy_(input, value)` (AOTAutograd keeps an inference graph's input mutations
    as these, at its end): the input's position and its new value, cast and broadcast to it."""
    why = _why_not_update(node)
    if why is not None:
        raise Unsupported(why)
    destination, source = node.args[0], node.args[1]
    position = placeholders[destination]
    if any(p == position for p, _ in updates):
        raise Unsupported("two copy_ into the same input")
    target = env[destination]
    if not isinstance(target, Value):
        raise Unsupported("copy_ into an input that is not a tensor")
    value = _load(env, source)
    if not isinstance(value, Value):
        value = ctx.scalar(float(value), ctx.dtype_of(target))
    return position, ctx.broadcast_to(ctx.cast(value, ctx.dtype_of(target)), ctx.shape_of(target))


# Rows of at least this many elements are worth padding (LM heads' vocabularies).
_MIN_PADDED_COLUMNS = 1024


def _padded_columns(ctx: Context, leaf: Any, value: Value) -> int:
    """The columns to pad output `leaf` to, or 0: a half-precision product x·wᵀ
    (an LM head: aten.mm of a transposed weight, through views that keep its columns) whose
    rows are long and not whole 16-byte units (GPT-2's 50257 words). The CUDA backend moves
    the zero columns into the product (passes/column_padding_into_products.h), whose logits
    the GEMM template then stores by TMA: 16-byte rows it could not store so (559.9 µs for
    GPT-2's head at 8x512 on an H200 against ~445 for an aligned vocabulary, 2026-11-30)."""
    dtype = ctx.dtype_of(value)
    columns = ctx.shape_of(value)[-1] if ctx.rank(value) else 0
    if dtype not in ("bf16", "f16") or columns < _MIN_PADDED_COLUMNS or (2 * columns) % 16 == 0:
        return 0
    node = leaf
    while isinstance(node, torch.fx.Node) and target_name(node) in ("aten.view.default", "aten._unsafe_view.default",
                                                                   "aten.reshape.default"):
        node = node.args[0]
    if not isinstance(node, torch.fx.Node) or target_name(node) != "aten.mm.default":
        return 0
    weight = node.args[1]
    if not isinstance(weight, torch.fx.Node) or not (target_name(weight) == "aten.t.default" or (
            target_name(weight) == "aten.permute.default" and list(weight.args[1]) == [1, 0])):
        return 0
    return (columns + 7) // 8 * 8


def _argument(ctx: Context, node: torch.fx.Node, arg: Any, weight: bool, input_positions: List[Tuple[int, ...]],
              index: int, input_orders: Dict[int, Tuple[int, ...]]) -> Any:
    if isinstance(arg, torch.Tensor):
        if weight:
            return _constant(ctx, arg)
        input_positions.append((index,))
        return _tensor_input(ctx, node.name, arg, len(input_positions) - 1, input_orders)
    if isinstance(arg, (list, tuple)) and any(isinstance(a, torch.Tensor) for a in arg):
        items = []
        for j, a in enumerate(arg):
            if isinstance(a, torch.Tensor):
                input_positions.append((index, j))
                items.append(_tensor_input(ctx, f"{node.name}_{j}", a, len(input_positions) - 1, input_orders))
            else:
                items.append(int(a) if isinstance(a, torch.SymInt) else a)
        return type(arg)(items)
    if isinstance(arg, torch.SymInt):
        return int(arg)
    return arg


def _tensor_input(ctx: Context, name: str, arg: torch.Tensor, number: int, input_orders: Dict[int, Tuple[int, ...]]) -> Value:
    """Graph input `number`: a parameter of the argument's shape, or where its layout has
    another order of dims (storage_order) of its memory order (Translation.inputs permutes the
    call's tensor so), its dims put back by a transpose the kernels fold into their indexing."""
    order = storage_order(arg)
    dims = list(range(arg.dim())) if order is None else list(order)
    _note_symbolic_dims(ctx, name, arg, dims)
    if order is None:
        return ctx.parameter(name, torch_dtype(arg.dtype), list(arg.shape))
    input_orders[number] = order
    stored = ctx.parameter(name, torch_dtype(arg.dtype), [arg.shape[d] for d in order])
    return ctx.transpose(stored, _inverse(order))


def _note_symbolic_dims(ctx: Context, name: str, arg: torch.Tensor, dims: List[int]) -> None:
    """The parameter's dims (`dims`: the argument's, in the parameter's order) that Dynamo traced
    as a symbol of their own (s0, not 2*s0 nor a constant), with the call's values."""
    value = ctx.node.meta.get("val") if ctx.node is not None else None
    if not isinstance(value, torch.Tensor) or value.dim() != arg.dim():
        return
    names = []
    for d in dims:
        size = value.shape[d]
        expr = size.node.expr if isinstance(size, torch.SymInt) else None
        names.append(str(expr) if expr is not None and getattr(expr, "is_Symbol", False) else "")
        if names[-1]:
            ctx.symbol_values[names[-1]] = int(arg.shape[d])
    if any(names):
        ctx.symbolic_dims[name] = names


def _constant(ctx: Context, tensor: torch.Tensor) -> Value:
    torch_dtype(tensor.dtype)  # refuses dtypes tilefuse has no tensors of
    data = tensor.detach().to("cpu").contiguous()
    if data.dtype == torch.bfloat16:
        data = data.view(torch.uint16)  # DLPack export of bf16: passed as its bits (the extension reads uint16 as bf16)
    return ctx.constant(data.numpy())


def attribute(gm: torch.fx.GraphModule, target: str) -> Any:
    """What a get_attr node reads: `target` dotted through submodules (None where a part is missing)."""
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def _fetch_attr(gm: torch.fx.GraphModule, target: str) -> torch.Tensor:
    value = attribute(gm, target)
    if not isinstance(value, torch.Tensor):
        raise Unsupported(f"get_attr {target} is a {type(value).__name__}, not a tensor")
    return value


def _load(env: Dict[torch.fx.Node, Any], arg: Any, ctx: Optional[Context] = None) -> Any:
    if isinstance(arg, torch.fx.Node):
        return env[arg]
    if isinstance(arg, (list, tuple)):
        return type(arg)(_load(env, a, ctx) for a in arg)
    if isinstance(arg, dict):
        return {k: _load(env, v, ctx) for k, v in arg.items()}
    if isinstance(arg, torch.SymInt):
        return int(arg)
    if isinstance(arg, torch.Tensor) and ctx is not None:  # a tensor written into the graph as an argument
        return _constant(ctx, arg)
    return arg


def _call(ctx: Context, node: torch.fx.Node, env: Dict[torch.fx.Node, Any]) -> Any:
    args = _load(env, node.args, ctx)
    kwargs = _load(env, node.kwargs, ctx)
    if node.target in _PYTHON_FUNCTIONS:
        if any(isinstance(a, Value) for a in args):
            if node.target is operator.getitem:
                return args[0][args[1]]
            raise Unsupported(f"Python's {node.target.__name__} on a tensor")
        result = node.target(*args)
        if node.target is operator.getitem and result is None:
            raise Unsupported(f"it uses result {args[1]} of {node.args[0].name}, which tilefuse does not compute")
        return result
    name = target_name(node)
    if name in _SYM_OPS:
        return _sym_op(ctx, name, args)
    handler = HANDLERS.get(name)
    if handler is None:
        raise Unsupported(f"tilefuse has no mapping for {name}")
    return handler(ctx, *args, **kwargs)


def _sym_op(ctx: Context, name: str, args: Sequence[Any]) -> int:
    shape = ctx.shape_of(args[0])
    if name == "aten.sym_size.int":
        return shape[args[1]]
    if name == "aten.sym_numel.default":
        count = 1
        for d in shape:
            count *= d
        return count
    if name == "aten.sym_storage_offset.default":
        return 0
    strides, stride = [], 1
    for d in reversed(shape):
        strides.insert(0, stride)
        stride *= d
    return strides[args[1]]


def _kernel_differs_from_trace(node: torch.fx.Node, mapped: str, traced: str) -> bool:
    """Where PyTorch's meta function traces another dtype than its kernel returns, and the
    mapping follows the kernel: the CPU flash attention's logsumexp, traced f32 for f64 inputs,
    is f64 from the kernel, and that kernel's backward takes f64 only."""
    if node.target is not operator.getitem or node.args[1] != 1 or not isinstance(node.args[0], torch.fx.Node):
        return False
    return (target_name(node.args[0]) == "aten._scaled_dot_product_flash_attention_for_cpu.default" and mapped == "f64"
            and traced == "f32")


def _check_result(ctx: Context, node: torch.fx.Node, result: Any) -> None:
    """Casts a result to the dtype PyTorch traced and checks its static shape."""
    traced = node.meta.get("val")
    if isinstance(result, Value) and isinstance(traced, torch.Tensor) and ctx.ok:
        expected = torch_dtype(traced.dtype)
        if ctx.dtype_of(result) != expected and not _kernel_differs_from_trace(node, ctx.dtype_of(result), expected):
            raise Unsupported(f"tilefuse's mapping gives {ctx.dtype_of(result)}, PyTorch {expected} (a tilefuse bug)")
        static = all(isinstance(d, int) for d in traced.shape)
        if static and ctx.shape_of(result) != list(traced.shape):
            raise Unsupported(f"tilefuse's mapping gives shape {ctx.shape_of(result)}, PyTorch {list(traced.shape)} "
                              "(a tilefuse bug)")

"""torch.compile(module, backend="tilefuse"): Dynamo's FX graphs through ONNX into tilefuse.

Each graph Dynamo captures becomes one callable. On a call with input shapes and dtypes it
has not seen, it exports the graph for exactly those inputs to ONNX (torch.onnx; weights
and buffers become constants, so tilefuse folds them), compiles it with tilefuse and caches
it; later calls with the same shapes reuse it. Where tilefuse cannot take a graph, the
callable runs the graph in PyTorch and logs why (logger "tilefuse", level WARNING), once
per graph and reason:

- the export to ONNX or tilefuse's compile fails (an op tilefuse does not support, ...);
- autograd is needed: grad mode is on and an input or weight requires grad (tilefuse runs
  inference graphs; call the module under torch.no_grad() or torch.inference_mode());
- the graph mutates its inputs, or returns something other than tensors.

Where tilefuse refuses an op the graph calls (its compile error names the ONNX op, e.g. Atan,
and the graph has calls of that name), the graph is split around those calls instead: they run
in PyTorch, and each stretch of the graph between them goes through tilefuse as a graph of its
own (with the same fallbacks). Other failures leave the whole graph to PyTorch.

Options (torch.compile(..., options={...})): backend ("auto", "cuda", "cpu", "reference"),
tune, fuse (as tilefuse.compile), exporter ("dynamo": torch.onnx.export(dynamo=True), the
default; "torchscript": the older exporter, ~30x faster to export, deprecated by PyTorch).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from collections import OrderedDict
from typing import Any, Callable, List, Optional, Sequence

import torch

from ._errors import Error
from ._model import compile_file

logger = logging.getLogger("tilefuse")

_DEFAULT_OPTIONS = {"backend": "auto", "tune": False, "fuse": True, "exporter": "dynamo"}
_CACHE_SIZE = 8  # compiled shapes kept per graph (least recently used dropped)
_TILEFUSE_DTYPES = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                    torch.int64: "i64", torch.int32: "i32", torch.int8: "i8", torch.uint8: "u8", torch.bool: "bool"}


def tilefuse_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Optional[dict] = None) -> Callable:
    """The Dynamo backend: returns a callable with the graph module's calling convention."""
    settings = dict(_DEFAULT_OPTIONS)
    unknown = set(options or {}) - set(settings)
    if unknown:
        raise ValueError(f"tilefuse backend: unknown option(s) {sorted(unknown)}; known: {sorted(settings)}")
    settings.update(options or {})
    if settings["exporter"] not in ("dynamo", "torchscript"):
        raise ValueError(f"tilefuse backend: exporter must be 'dynamo' or 'torchscript', not {settings['exporter']!r}")
    return TilefuseGraph(gm, example_inputs, settings)


class TilefuseGraph:
    """One Dynamo graph: tilefuse models per input signature, else the graph in PyTorch."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], settings: dict, may_split: bool = True):
        self.gm = gm
        self.settings = settings
        self.may_split = may_split  # a part of a split graph is not split again
        self.split: Optional[torch.fx.GraphModule] = None  # the graph split around refused ops
        self.compiled: "OrderedDict[tuple, Optional[_Specialization]]" = OrderedDict()
        self.logged: set = set()
        # Weights and buffers Dynamo lifted to inputs: exported as constants.
        self.constant_positions = [i for i, a in enumerate(example_inputs) if _is_weight(gm, i, a)]
        self.graph_reason = _refuse_graph(gm)

    def __call__(self, *args: Any) -> Any:
        reason = self.graph_reason or _autograd_reason(args)
        if reason:
            return self._fall_back(reason, args)
        if self.split is not None:
            return self.split(*args)
        key = self._signature(args)
        if key not in self.compiled:
            self.compiled[key] = self._specialize(args)
            if len(self.compiled) > _CACHE_SIZE:
                self.compiled.popitem(last=False)
        self.compiled.move_to_end(key)
        specialization = self.compiled[key]
        if specialization is None:
            return self.split(*args) if self.split is not None else self.gm(*args)
        try:
            return specialization.run(args)
        except Error as error:  # e.g. a kernel that fails at run time: PyTorch from now on
            self.compiled[key] = None
            return self._fall_back(f"tilefuse failed to run it: {error}", args)

    def _signature(self, args: Sequence[Any]) -> tuple:
        key = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                version = _version(a) if i in self.constant_positions else None
                key.append((tuple(a.shape), a.dtype, a.device.type, id(a) if version is not None else None, version))
            else:
                key.append((type(a).__name__, a))
        return tuple(key)

    def _specialize(self, args: Sequence[Any]) -> Optional["_Specialization"]:
        try:
            return _Specialization(self.gm, args, self.constant_positions, self.settings)
        except Exception as error:  # any failure to export or compile leaves the graph to PyTorch
            refused = _refused_calls(self.gm, error) if self.may_split else []
            if refused:
                self.split = _split_around(self.gm, refused, self.settings)
                self._log(f"{_describe_failure(error)}; its {len(refused)} call(s) of {_target_name(refused[0])} run in "
                          "PyTorch, the rest of the graph through tilefuse", part=True)
            else:
                self._log(_describe_failure(error))
            return None

    def _fall_back(self, reason: str, args: Sequence[Any]) -> Any:
        self._log(reason)
        return self.gm(*args)

    def _log(self, reason: str, part: bool = False) -> None:
        if reason not in self.logged:
            self.logged.add(reason)
            what = "part of a torch.compile graph" if part else "a torch.compile graph"
            logger.warning("tilefuse: running %s in PyTorch: %s", what, reason)


class _TilefusePart(torch.nn.Module):
    """A stretch of a split graph: through tilefuse (TilefuseGraph, created on the first call,
    when its inputs are known), not split again."""

    def __init__(self, gm: torch.fx.GraphModule, settings: dict):
        super().__init__()
        self.gm = gm
        self.settings = settings
        self.graph: Optional[TilefuseGraph] = None

    def forward(self, *args: Any) -> Any:
        if self.graph is None:
            self.graph = TilefuseGraph(self.gm, args, self.settings, may_split=False)
        return self.graph(*args)


def _refused_calls(gm: torch.fx.GraphModule, error: Exception) -> List[torch.fx.Node]:
    """The graph's calls of the op tilefuse's error names as unsupported ("unsupported op
    Atan" -> the calls whose target is named atan), or none."""
    message = str(error) if isinstance(error, Error) else ""
    marker = "unsupported op "
    if marker not in message:
        return []
    op = message.split(marker, 1)[1].split()[0].strip(".,:;'\"()").lower()
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method") and _target_name(n).lower().rstrip("_") == op]


def _split_around(gm: torch.fx.GraphModule, refused: List[torch.fx.Node], settings: dict) -> torch.fx.GraphModule:
    """The graph as a sequence of parts: each refused call alone (run by PyTorch), the stretches
    between them through tilefuse."""
    from torch.fx.passes.split_module import split_module

    refused_set = set(refused)
    part, parts = 0, {}  # a part number per node, increasing along the graph
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node in refused_set:
            part += 1
            parts[node] = part
            part += 1
        else:
            parts[node] = part
    split = split_module(gm, None, lambda node: parts[node], keep_original_order=True)
    refused_name = _target_name(refused[0])
    for name, child in list(split.named_children()):
        calls = [n for n in child.graph.nodes if n.op in ("call_function", "call_method")]
        if calls and not any(_target_name(n) == refused_name for n in calls):
            setattr(split, name, _TilefusePart(child, settings))
    return split


class _Specialization:
    """The graph exported and compiled for one input signature."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], constant_positions: List[int], settings: dict):
        self.input_positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in constant_positions]
        module = _BoundGraph(gm, args, self.input_positions, constant_positions).eval()
        inputs = tuple(args[i].detach() for i in self.input_positions)
        self.output_spec = _output_spec(gm)
        with tempfile.TemporaryDirectory(prefix="tilefuse-torch-") as folder:
            path = os.path.join(folder, "graph.onnx")
            _export(module, inputs, path, settings["exporter"])
            self.model = compile_file(path, "a torch.compile graph", settings["backend"], settings["tune"], settings["fuse"])
        self._check_signature(inputs)
        logger.info("tilefuse: compiled a torch.compile graph for %s: %d kernels on %s",
                    [tuple(t.shape) for t in inputs], len(self.model.kernels), self.model.backend)

    def _check_signature(self, inputs: Sequence[torch.Tensor]) -> None:
        given = [(_TILEFUSE_DTYPES.get(t.dtype, str(t.dtype)), tuple(t.shape)) for t in inputs]
        expected = [(spec.dtype, spec.shape) for spec in self.model.inputs]
        if given != expected:
            raise Error(f"the exported ONNX graph takes {expected}, the FX graph {given}")
        if len(self.model.outputs) != self.output_spec.num_leaves:
            raise Error(f"the exported ONNX graph has {len(self.model.outputs)} output(s), the FX graph "
                        f"{self.output_spec.num_leaves}")

    def run(self, args: Sequence[Any]) -> Any:
        outputs = self.model(*[args[i] for i in self.input_positions])
        return torch.utils._pytree.tree_unflatten(outputs, self.output_spec)


class _BoundGraph(torch.nn.Module):
    """The graph module as a function of its tensor inputs alone: weights held as buffers
    (the exporter makes them initializers), Dynamo's symbolic sizes bound to this call's."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], input_positions: List[int],
                 constant_positions: List[int]):
        super().__init__()
        self.gm = gm
        self.bound = {i: a for i, a in enumerate(args) if i not in input_positions and i not in constant_positions}
        self.input_positions = input_positions
        self.constant_names = {}
        for i in constant_positions:
            self.constant_names[i] = f"constant_{i}"
            self.register_buffer(self.constant_names[i], args[i].detach())
        self.count = len(args)

    def forward(self, *inputs: torch.Tensor) -> Any:
        args: List[Any] = [None] * self.count
        for i, value in self.bound.items():
            args[i] = int(value) if isinstance(value, torch.SymInt) else value
        for i, name in self.constant_names.items():
            args[i] = getattr(self, name)
        for i, tensor in zip(self.input_positions, inputs):
            args[i] = tensor
        return self.gm(*args)


def _export(module: torch.nn.Module, inputs: tuple, path: str, exporter: str) -> None:
    # The exporters print progress and warnings; they go to the debug log instead.
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, path, dynamo=(exporter == "dynamo"), verbose=False)
    if captured.getvalue():
        logger.debug("torch.onnx.export said:\n%s", captured.getvalue())


def _is_weight(gm: torch.fx.GraphModule, index: int, value: Any) -> bool:
    """Whether Dynamo lifted a module's parameter or buffer into this input."""
    if isinstance(value, torch.nn.Parameter):
        return True
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    target = str(placeholders[index].target) if index < len(placeholders) else ""
    return isinstance(value, torch.Tensor) and "_buffers_" in target


def _version(tensor: torch.Tensor) -> Optional[int]:
    try:
        return tensor._version  # changes when the weight is modified in place: recompile
    except RuntimeError:  # inference tensors have no version counter
        return 0


def _refuse_graph(gm: torch.fx.GraphModule) -> str:
    """Why the graph cannot go to tilefuse whatever its inputs, or ""."""
    for node in gm.graph.nodes:
        name = _target_name(node)
        in_place = (name.endswith("_") and not name.startswith("_")) or name == "setitem" or node.kwargs.get("inplace")
        if node.op in ("call_function", "call_method") and in_place and node.args and _is_input_view(node.args[0]):
            return f"it modifies an input in place ({name}), which an ONNX graph cannot express"
    try:
        _output_spec(gm)
    except Error as error:
        return str(error)
    return ""


def _target_name(node: torch.fx.Node) -> str:
    return node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")


_VIEW_OPS = {"view", "reshape", "transpose", "permute", "getitem", "select", "narrow", "unsqueeze", "squeeze",
             "expand", "t", "flatten", "unflatten", "as_strided", "view_as", "chunk", "split"}


def _is_input_view(value: Any) -> bool:
    """Whether `value` is a graph input or (transitively) a view of one."""
    while isinstance(value, torch.fx.Node):
        if value.op == "placeholder":
            return True
        if value.op not in ("call_function", "call_method") or _target_name(value) not in _VIEW_OPS or not value.args:
            return False
        value = value.args[0]
    return False


def _output_spec(gm: torch.fx.GraphModule) -> Any:
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    leaves, spec = torch.utils._pytree.tree_flatten(output.args[0])
    for leaf in leaves:
        value = leaf.meta.get("example_value", leaf.meta.get("val")) if isinstance(leaf, torch.fx.Node) else leaf
        if not isinstance(value, torch.Tensor):
            raise Error(f"it returns a {type(value).__name__}, not only tensors")
    return spec


def _autograd_reason(args: Sequence[Any]) -> str:
    if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return ("autograd is on and an input or weight requires grad; tilefuse compiles inference graphs "
                "(call the module under torch.no_grad() or torch.inference_mode())")
    return ""


def _describe_failure(error: Exception) -> str:
    if isinstance(error, Error):
        return f"tilefuse cannot compile it: {error}"
    first_line = next((line for line in str(error).splitlines() if line.strip()), "")
    return f"the ONNX export failed: {type(error).__name__}: {first_line}"


def register() -> None:
    """Registers the backend with Dynamo as "tilefuse" (the package's entry point does this
    when tilefuse is installed; importing tilefuse after torch does it otherwise)."""
    from torch._dynamo.backends import registry

    if "tilefuse" in registry._COMPILER_FNS or registry._BACKENDS.get("tilefuse") is not None:
        return  # registered, or found through the entry point (which registers it on first use)
    registry.register_backend(compiler_fn=tilefuse_backend, name="tilefuse")


register()

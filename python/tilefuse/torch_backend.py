"""torch.compile(module, backend="tilefuse"): Dynamo's graphs, through AOTAutograd, into tilefuse.

Dynamo captures a graph; AOTAutograd functionalizes it and decomposes it to core ATen (keeping
the ops tilefuse takes whole: softmax, layer norm, GELU, scaled dot-product attention) and
hands the forward graph to this backend. Each such graph becomes one callable. On a call with
input shapes and dtypes it has not seen, tilefuse.fx maps the graph's ATen ops onto tilefuse's
op table for exactly those inputs (symbolic sizes become the call's), compiles it and caches it;
later calls with the same shapes reuse it. Nothing goes through ONNX. Weights and buffers on the
GPU stay inputs the kernels read where they lie, except those whose values folding uses (a weight
cast or scaled, a convolution's, a batch norm's: tilefuse.fx.weights), which become constants;
on the CPU they become constants.

What tilefuse does not take is named once in the log (logger "tilefuse", level WARNING) and
run by PyTorch, never silently:

- ops with no mapping (tilefuse.fx.HANDLERS lists the mapped ones): the graph is split around
  their calls; they run in PyTorch and each stretch between them goes through tilefuse;
- a graph tilefuse's compile refuses (a use of an op it does not take, an unsupported dtype):
  the whole graph runs in PyTorch, with the reason;
- the backward graph of a module that trains goes through tilefuse too, split around the ops
  with no mapping (attention's backward, index_put) as a forward is; the joint graph is
  partitioned as TorchInductor's (min-cut: cheap pointwise ops recomputed in the backward).
  options={"backward": "pytorch"} runs it in PyTorch instead (the forward still through
  tilefuse), said once in the log.

f32 matmuls follow PyTorch's float32 matmul precision when a graph is compiled: TF32 (the GEMM
template's TF32 form, tilefuse.compile's precision="high") under
torch.set_float32_matmul_precision("high") or "medium", exact f32 otherwise. f32 convolutions on a
GPU follow torch.backends.cudnn.allow_tf32 as PyTorch's do (True by default: TF32).

Options (torch.compile(..., options={...})): backend ("auto", "cuda", "cpu", "reference"),
tune, fuse, strict (as tilefuse.compile), backward ("tilefuse", the default, or "pytorch"), weights
("auto", the default: on the GPU as above, on the CPU every weight a constant, which oneDNN packs
once; "fold": every weight a constant; "inputs": only those folding uses, on either), gemm (how the
GPU runs products, as the CLI's --gemm: "auto", the default, "template" or "library"), chunked_loss
(True, the default: a training cross-entropy of a linear's output runs as
tilefuse.fx.linear_cross_entropy, in chunks of rows, its logits never whole; False: as written),
attention_backward ("template", the default: PyTorch's attention backward ops of a backward graph
are nodes of tilefuse's graph, on the GPU run by tilefuse's attention backward template,
tilefuse.fx.attention_backward; "pytorch": on PyTorch's kernels, between the graph's parts), padded_logits (True, the default: on the GPU an inference
forward's x·wᵀ output whose rows are not 16-byte aligned, a language model's logits over 50257
words, comes back as TorchInductor returns it, a strided view of rows padded with zeros, which
the GEMM template stores by TMA; False: dense).
`tilefuse.torch_backend.explain()` says, per graph,
what was compiled (the fusion plans) and what runs in PyTorch, and why.
"""

from __future__ import annotations

import logging
import operator
import os
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch

from . import _tilefuse
from ._errors import Error
from ._model import InPlaceOutputs, _wrap

logger = logging.getLogger("tilefuse")

# backward: "tilefuse" by default since it ran GPT-2 small's training step (bf16, 8x512, H200,
# 2026-11-30) in 22.9 ms against 33.5 ms with the backward in PyTorch (eager: 25.3 ms).
_DEFAULT_OPTIONS = {"backend": "auto", "tune": False, "fuse": True, "strict": False, "backward": "tilefuse",
                    "weights": "auto", "gemm": "auto", "chunked_loss": True, "attention_backward": "template",
                    "padded_logits": True}
_CACHE_SIZE = 8  # compiled shapes kept per graph (least recently used dropped)
# A graph over Dynamo's symbolic sizes (dynamic=True: a decode step with transformers' growing
# cache, a new length every token) keeps more, as a SpecializingModel does: each kept size holds
# its intermediates and launches only (the weights are the call's inputs, the kernels shared
# through the kernel cache), so every length of a few hundred decode steps stays compiled while
# the intermediates' arenas fit; with 8, each generation planned and loaded every length again.
_DYNAMIC_CACHE_SIZE = 256
_DYNAMIC_CACHE_ARENA_BYTES = 4 << 30
_MISSING = object()  # a specialization not made yet (None: one that PyTorch runs)


def _matmul_precision() -> str:
    """f32 matmuls as PyTorch computes them now: TF32 where torch.set_float32_matmul_precision
    says "high" or "medium" (or torch.backends.cuda.matmul.allow_tf32 is set), else exact f32."""
    tf32 = torch.get_float32_matmul_precision() != "highest" or torch.backends.cuda.matmul.allow_tf32
    return "high" if tf32 else "highest"


def _precision_key() -> tuple:
    """What of PyTorch's f32 precision settings a compiled graph depends on: its matmuls'
    (_matmul_precision) and its convolutions' (torch.backends.cudnn.allow_tf32, tilefuse.fx.nn)."""
    return _matmul_precision(), torch.backends.cudnn.allow_tf32


def tilefuse_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: Optional[dict] = None) -> Callable:
    """The Dynamo backend: AOTAutograd with tilefuse as the forward (and inference) compiler."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    settings = dict(_DEFAULT_OPTIONS)
    unknown = set(options or {}) - set(settings)
    if unknown:
        raise ValueError(f"tilefuse backend: unknown option(s) {sorted(unknown)}; known: {sorted(settings)}")
    settings.update(options or {})
    if settings["backward"] not in ("pytorch", "tilefuse"):
        raise ValueError(f"tilefuse backend: backward must be 'pytorch' or 'tilefuse', not {settings['backward']!r}")
    if settings["gemm"] not in ("auto", "template", "library"):
        raise ValueError(f"tilefuse backend: gemm must be 'auto', 'template' or 'library', not {settings['gemm']!r}")
    if settings["attention_backward"] not in ("template", "pytorch"):
        raise ValueError(f"tilefuse backend: attention_backward must be 'template' or 'pytorch', not {settings['attention_backward']!r}")
    if not isinstance(settings["chunked_loss"], bool):
        raise ValueError(f"tilefuse backend: chunked_loss must be True or False, not {settings['chunked_loss']!r}")
    if not isinstance(settings["padded_logits"], bool):
        raise ValueError(f"tilefuse backend: padded_logits must be True or False, not {settings['padded_logits']!r}")
    if settings["weights"] not in ("auto", "fold", "inputs"):
        raise ValueError(f"tilefuse backend: weights must be 'auto', 'fold' or 'inputs', not {settings['weights']!r}")
    weights = {i for i, a in enumerate(example_inputs) if _is_weight(gm, i, a)}
    logged: Set[str] = set()
    from .fx.causal_masks import prove_causal_masks
    from .fx.linear_cross_entropy import fuse_linear_cross_entropy
    from .fx.whole_attention import keep_attention_whole

    prove_causal_masks(gm)  # transformers' traced models pass causal masks as masks
    if settings["chunked_loss"]:
        fuse_linear_cross_entropy(gm)  # before AOTAutograd: the loss's gradients come from its forward
    keep_attention_whole(gm)  # before AOTAutograd would write a GPU attention out as its math path

    backward_in_pytorch = settings["backward"] == "pytorch"
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in example_inputs)

    # A graph's outputs come back in eager's layouts, written so by its kernels
    # (translator.storage_order); the ops a split graph runs in PyTorch get eager's layouts
    # whatever their producers' (_PyTorchPart).
    def compiler(training: bool) -> Callable:
        def compile_forward(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence[Any]) -> Callable:
            # AOTAutograd passes Dynamo's arguments in Dynamo's order; anything else (effect
            # tokens, say) and no argument is taken for a weight.
            same_order = len(aten_inputs) == len(example_inputs)
            # Saved tensors' layouts are left to their readers only where tilefuse runs the
            # backward (its PyTorch parts lay out what an op needs laid out); a backward PyTorch
            # runs whole expects eager's.
            saved = _saved_positions(aten_gm) if training and not backward_in_pytorch else None
            row_major = _saved_for_attention_backward(aten_gm, saved) if saved else frozenset()
            if training and (backward_in_pytorch or settings["attention_backward"] == "pytorch"):
                # PyTorch's attention backward reads its forward's own logsumexp, seed and offset.
                from .fx.attention_backward import keep_in_pytorch

                keep_in_pytorch(aten_gm)
            graph = TilefuseGraph(aten_gm, weights - _mutated_inputs() if same_order else set(), settings,
                                  saved_outputs=saved or frozenset(), row_major_outputs=row_major,
                                  pad_outputs=settings["padded_logits"] and on_gpu and not training, guarded_inputs=same_order)
            if training:
                graph.saved_for_backward = _saved_for_backward(aten_gm)
            return graph
        return compile_forward

    def backward_compiler(aten_gm: torch.fx.GraphModule, aten_inputs: Sequence[Any]) -> Callable:
        if settings["backward"] == "tilefuse":  # no weights: the backward's inputs are saved activations and gradients
            _scale_donated_in_place(aten_gm)
            if settings["attention_backward"] == "pytorch":
                from .fx.attention_backward import keep_in_pytorch

                keep_in_pytorch(aten_gm)
            return TilefuseGraph(aten_gm, set(), settings)
        _log_once(logged, "backward", "tilefuse: the backward graph runs in PyTorch (tilefuse compiles forward graphs)")
        return make_boxed_func(aten_gm.forward)

    # Where tilefuse compiles the backward too, the joint graph is partitioned as TorchInductor
    # does (min-cut): the forward saves what is costly to recompute (products' outputs,
    # attention's logsumexp) and the backward recomputes the cheap pointwise ops, fused into its
    # kernels. The default partition saved GPT-2's tanh-GELU's intermediates: four more outputs
    # per layer, written by the product's epilogue element by element (its product took 344 µs
    # where one output takes 36, H200, 2026-11-30). A backward PyTorch runs keeps the default:
    # there each recomputed op would be a kernel of its own.
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    partition = {} if backward_in_pytorch else {"partition_fn": min_cut_rematerialization_partition}
    # An inference graph keeps its inputs' updates (copy_ into an input at its end, a static KV
    # cache's and its counter's): tilefuse writes each new value into its input in place where
    # that is safe, where AOTAutograd would copy every updated tensor after the call (GPT-2's
    # decode step: 36 copies, each a launch from Python).
    return aot_autograd(fw_compiler=compiler(training=True), inference_compiler=compiler(training=False),
                        bw_compiler=backward_compiler, keep_inference_input_mutations=True,
                        decompositions=_decompositions(keep_backward_ops=backward_in_pytorch), **partition)(gm, example_inputs)


def scale_in_place(x: torch.Tensor, factor: Any) -> torch.Tensor:
    """x *= factor, in x's memory, computed in f32 for half x (one multi-tensor kernel: an aten.mul_
    of a bf16 tensor by an f32 one took 1.37 ms for 1 GB on an H200, element by element with
    casts)."""
    torch._foreach_mul_([x], factor)
    return x


def _scale_donated_in_place(gm: torch.fx.GraphModule) -> int:
    """Where a saved tensor AOTAutograd donates to the backward (no one else holds it: PyTorch
    then refuses retain_graph) is read only by a product with a scalar of its own layout, the
    product is made in place (scale_in_place, run by PyTorch between the graph's parts): the
    chunked loss's gradients, computed by its forward and scaled here by the loss's gradient,
    are not copied (a second W-sized gradient: 1 GB at a 128K vocabulary). Returns how many."""
    context = torch._guards.TracingContext.try_get()
    donated = getattr(getattr(context, "fw_metadata", None), "bw_donated_idxs", None) or []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    changed = 0
    for index in donated:
        saved = placeholders[index] if index < len(placeholders) else None
        users = list(saved.users) if saved is not None else []
        if len(users) != 1 or users[0].target is not torch.ops.aten.mul.Tensor or users[0].args[0] is not saved:
            continue
        product, factor = users[0], users[0].args[1]
        value, result = saved.meta.get("val"), product.meta.get("val")
        factor_value = factor.meta.get("val") if isinstance(factor, torch.fx.Node) else factor
        scalar = isinstance(factor_value, (int, float)) or (isinstance(factor_value, torch.Tensor) and factor_value.dim() == 0)
        if scalar and isinstance(value, torch.Tensor) and isinstance(result, torch.Tensor) and \
                result.dtype == value.dtype and result.shape == value.shape and result.stride() == value.stride():
            product.target = scale_in_place
            changed += 1
    if changed:
        gm.recompile()
    return changed


def _saved_for_backward(gm: torch.fx.GraphModule) -> Optional[dict]:
    """The tensors a training forward's graph returns for its backward (AOTAutograd's partition
    chose them), their count and bytes as traced: what the step holds between its forward and
    its backward besides the weights. None where AOTAutograd does not say."""
    saved = _saved_positions(gm)
    if saved is None:
        return None
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    leaves = torch.utils._pytree.tree_leaves(output.args[0])
    values = [leaves[i].meta.get("val") if isinstance(leaves[i], torch.fx.Node) else None for i in sorted(saved)]
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    return {"tensors": len(tensors), "bytes": sum(int(v.numel()) * v.element_size() for v in tensors)}


def _saved_positions(gm: torch.fx.GraphModule) -> Optional[Set[int]]:
    """The leaves of a training forward's output its backward takes (AOTAutograd's saved
    tensors), or None where AOTAutograd does not say."""
    from torch._guards import TracingContext

    metadata = getattr(TracingContext.try_get(), "fw_metadata", None)
    try:
        saved = metadata.tensors_saved_for_backwards_slice
    except (AttributeError, AssertionError):
        return None
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return frozenset(range(len(torch.utils._pytree.tree_leaves(output.args[0])))[saved])


def _saved_for_attention_backward(gm: torch.fx.GraphModule, saved: Set[int]) -> Set[int]:
    """The saved leaves of a training forward's output that are a GPU attention call's operands
    or its output and logsumexp, and that the caller does not also get: written row-major, not in
    eager's layouts. The attention backward template reads them dense, [batch, heads, rows, d]
    (tilefuse's backward graph follows its arguments' strides); in eager's layouts (the heads
    split from the QKV product by views, cuDNN's output laid out as its query) the backward graph
    transposed five tensors a layer back for it (GPT-2's step: ~27 µs a layer, H200, 2026-12-03).
    Other saved tensors keep eager's layout, which is often a view of what the kernels write
    anyway (a linear's input saved transposed for its weight gradient)."""
    from .fx.attention_backward import ANY_LAYOUT

    attention: Set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in ANY_LAYOUT:
            attention.update(a for a in node.args[:3] if isinstance(a, torch.fx.Node))
            attention.update(u for u in node.users if u.target is operator.getitem and u.args[1] in (0, 1))
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    positions: Dict[torch.fx.Node, List[int]] = {}
    leaves = torch.utils._pytree.tree_leaves(output.args[0])
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.fx.Node):
            positions.setdefault(leaf, []).append(i)
    return frozenset(i for i in saved if leaves[i] in attention and all(p in saved for p in positions[leaves[i]]))


def _mutated_inputs() -> Set[int]:
    """The inputs the graph mutates (a buffer updated in forward: AOTAutograd returns its new
    value and copies it back after the call). Such an input is read at each call, never
    folded as a weight: folded, every call would recompile, and an inference tensor (no
    version counter) would keep its first value."""
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None)
    if metadata is None:
        return set()
    return {i for i, info in enumerate(metadata.input_info) if info.mutates_data or info.mutates_metadata}


def _decompositions(keep_backward_ops: bool = False) -> dict:
    """Core ATen's decompositions, less those of ops tilefuse takes whole. With
    keep_backward_ops, less those of the backward ops too (layer norm's, GELU's, softmax's, ...):
    a backward graph PyTorch runs then calls its fused kernels, not a dozen small ones each
    (GPT-2's training step ran 1.8x eager's time with them decomposed, H200, 2026-11-29)."""
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    if keep_backward_ops:
        table = {op: fn for op, fn in table.items() if "backward" not in str(op)}
    aten = torch.ops.aten
    for op in (aten.scaled_dot_product_attention.default, aten._scaled_dot_product_flash_attention_for_cpu.default):
        table.pop(op, None)
    return table


class TilefuseGraph:
    """One ATen graph: tilefuse models per input signature, the graph split around ops
    tilefuse has no mapping for, or the graph in PyTorch with a logged reason. A boxed
    callable, as AOTAutograd calls its compilers' results."""

    def __init__(self, gm: torch.fx.GraphModule, weights: Set[int], settings: dict, split_allowed: bool = True,
                 saved_outputs: Set[int] = frozenset(), row_major_outputs: Set[int] = frozenset(), pad_outputs: bool = False,
                 guarded_inputs: bool = False):
        """`saved_outputs`: a training forward's outputs (by leaf) its backward takes, not the
        caller; `row_major_outputs`: outputs written row-major, not in eager's layout (the parts
        of a split graph that only ops reading any layout read: _leave_layouts_to_readers);
        `pad_outputs`: an inference forward, whose unaligned logits may come back padded;
        `guarded_inputs`: a forward called with Dynamo's arguments, which its guards checked."""
        from .fx import folded_weights, target_name, unsupported_nodes, why_unsupported

        # On the instance: the wrappers AOTAutograd puts around a backward compiler's result
        # copy the callable's __dict__, not its class's attributes.
        self._boxed_call = True
        self.gm = gm
        self.weights = weights
        # The weights compiled in as constants (their identities and versions key the compiled
        # models); the others are inputs, read at each call.
        self.folded = folded_weights(gm, weights, settings["weights"])
        self.settings = settings
        self.compiled: "OrderedDict[tuple, Optional[_Specialization]]" = OrderedDict()
        # The plans of this graph's compiles at other sizes (Dynamo's symbolic sizes): a new
        # sequence length of the same structure compiles an earlier length's plan.
        self.binding_plans = _tilefuse.BindingPlans()
        self.split: Optional[torch.fx.GraphModule] = None
        self.weight_ids: Set[int] = set()  # this call's weights, for the parts of a split graph
        self.logged: Set[str] = set()
        self.in_pytorch: List[str] = []  # what runs in PyTorch and why, as logged (explain())
        self.part_of_split = not split_allowed
        self.saved_for_backward: Optional[dict] = None  # a training forward's (set by its compiler)
        self.saved_outputs = frozenset(saved_outputs)
        self.row_major_outputs = frozenset(row_major_outputs)
        # An inference forward's outputs, which only the caller reads, may come back as strided
        # views (translator.translate's pad_outputs); a split graph's parts stay dense.
        self.pad_outputs = pad_outputs and split_allowed
        # A forward whose inputs are Dynamo's, with static shapes: its guards already check each
        # input's shape, strides, dtype and device before the call reaches here, so a call's
        # signature is only the folded weights' identities and versions (which no guard checks).
        # The whole signature of GPT-2's 149 inputs was ~40% of its batch-1 host path.
        static_shapes = _static_placeholders(gm)
        self.static_inputs: Optional[Tuple[int, ...]] = tuple(sorted(self.folded)) if guarded_inputs and split_allowed and \
            static_shapes else None
        # Over Dynamo's symbolic sizes: a new size each decode step, so more of them are kept.
        self.kept_sizes = _CACHE_SIZE if static_shapes else _DYNAMIC_CACHE_SIZE
        if len(_GRAPHS) > 1024:  # a process that compiles many graphs: drop the dead references
            _GRAPHS[:] = [ref for ref in _GRAPHS if ref() is not None]
        _GRAPHS.append(weakref.ref(self))
        unsupported = unsupported_nodes(gm)
        if unsupported and split_allowed:
            self.split = _split_around(gm, unsupported, self)
            missing = [n for n in unsupported if target_name(n) not in _IN_PYTORCH_BY_DESIGN]
            if missing:
                reasons = [(target_name(n), why_unsupported(n)) for n in missing]
                unmapped = sorted({name for name, why in reasons if why == "no mapping"})
                refused = sorted({f"{name} ({why})" for name, why in reasons if why != "no mapping"})
                what = "; ".join(([f"tilefuse has no mapping for {', '.join(unmapped)}"] if unmapped else []) +
                                 ([f"tilefuse does not take {', '.join(refused)}"] if refused else []))
                self._note("split", f"tilefuse: running part of a torch.compile graph in PyTorch: {what} ({len(missing)} "
                           f"call(s)); the rest goes through tilefuse")
            # Not missing: said in explain(), not warned.
            for name in sorted({target_name(n) for n in unsupported} & set(_IN_PYTORCH_BY_DESIGN)):
                self.in_pytorch.append(_IN_PYTORCH_BY_DESIGN[name])

    def __call__(self, args: List[Any]) -> Any:
        args = list(args)
        if self.split is not None:
            self.weight_ids = {id(args[i]) for i in self.weights}
            outputs = self.split(*args)
            return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if self.static_inputs is not None:  # Dynamo's guards fixed the inputs' shapes and layouts
            key = (_tilefuse.identity_key(args, self.static_inputs), _precision_key())
        else:
            key = (_signature(args, self.folded), _precision_key())  # PyTorch's precision may change between calls
        # One lookup: a tuple's hash is not kept, and hashing GPT-2's 148 inputs' entries takes
        # about as long as a batch-1 forward on the GPU (~75 µs a hash on the development machine).
        specialization = self.compiled.get(key, _MISSING)
        if specialization is _MISSING:
            specialization = self.compiled[key] = self._specialize(args)
            self._drop_least_recently_used()
        elif len(self.compiled) > 1:
            self.compiled.move_to_end(key)
        if specialization is None:
            return _as_list(self.gm(*args))
        try:
            return specialization.run(args)
        except Error as error:  # e.g. a kernel that fails at run time: PyTorch from now on
            self.compiled[key] = None
            self._note(str(error), f"tilefuse: running a torch.compile graph in PyTorch: tilefuse failed to run it: {error}")
            return _as_list(self.gm(*args))

    def _drop_least_recently_used(self) -> None:
        """Drops the least recently used compiled shapes beyond what this graph keeps: 8, or for
        a graph over symbolic sizes 256 while their intermediates fit in 4 GiB."""
        arenas = lambda: sum(s.model.arena_bytes for s in self.compiled.values() if s is not None)  # noqa: E731
        while len(self.compiled) > self.kept_sizes or \
                (self.kept_sizes == _DYNAMIC_CACHE_SIZE and len(self.compiled) > 1 and arenas() > _DYNAMIC_CACHE_ARENA_BYTES):
            self.compiled.popitem(last=False)

    def _specialize(self, args: Sequence[Any]) -> Optional["_Specialization"]:
        from .fx import Unsupported

        key, folded = _reusable(self.gm, args, self.folded, self.settings, self.row_major_outputs, self.pad_outputs)
        cached = _MODELS.get(key)
        if cached is not None and all(ref() is t for ref, t in zip(cached[1], folded)):
            _MODELS.move_to_end(key)
            logger.info("tilefuse: reused a compiled torch.compile graph for %s", cached[0].input_shapes)
            return cached[0]
        try:
            specialization = _Specialization(self.gm, args, self.folded, self.settings, self.weights, self.row_major_outputs,
                                             self.pad_outputs, self.binding_plans)
            # A weight freed drops the entry at once: its compiled model holds copies of the
            # weights (on the GPU, device memory) that nothing could reuse any more.
            forget = lambda _ref, key=key: _MODELS.pop(key, None)  # noqa: E731
            _MODELS[key] = (specialization, [weakref.ref(t, forget) for t in folded])
            if len(_MODELS) > _MODELS_KEPT:
                _MODELS.popitem(last=False)
            return specialization
        except (Unsupported, Error) as error:
            self._note(str(error), f"tilefuse: running a torch.compile graph in PyTorch: tilefuse cannot compile it: {error}")
            return None

    def _note(self, key: str, message: str) -> None:
        if key not in self.logged:
            self.in_pytorch.append(message.removeprefix("tilefuse: "))
        _log_once(self.logged, key, message)

    def explain(self, device: str) -> dict:
        compiled = [{"inputs": s.input_shapes, "backend": s.model.backend, "kernels": len(s.model.kernels),
                     "kernel_modes": [k.mode for k in s.model.kernels], "compile_ms": s.model.compile_ms,
                     "memory": s.memory(),
                     "plan": s.model.explain(device)}
                    for s in self.compiled.values() if s is not None]
        calls = sum(1 for n in self.gm.graph.nodes if n.op == "call_function")
        return {"calls": calls, "part_of_split": self.part_of_split, "split": self.split is not None,
                "compiled": compiled, "in_pytorch": list(self.in_pytorch), "saved_for_backward": self.saved_for_backward}


_GRAPHS: List["weakref.ReferenceType[TilefuseGraph]"] = []

# Ops the backend itself puts in a graph for PyTorch to run, and why.
_IN_PYTORCH_BY_DESIGN = {
    "tilefuse.linear_cross_entropy.default": "the chunked linear + cross-entropy (tilefuse.fx.linear_cross_entropy) runs "
                                             "between the graph's parts, its row kernel compiled by tilefuse",
    "scale_in_place": "gradients the forward computed are scaled in place (_scale_donated_in_place)",
}


def _live_graphs() -> List["TilefuseGraph"]:
    """The graphs compiled in this process that are still alive, oldest first (dead references dropped)."""
    _GRAPHS[:] = [ref for ref in _GRAPHS if ref() is not None]
    return [g for g in (ref() for ref in _GRAPHS) if g is not None]


def finish_compiles() -> None:
    """Waits for the kernels of every graph compiled in this process that are still compiling in
    the background (their quick stand-ins run meanwhile: tilefuse.compile's background_compile);
    from the next call on, each graph runs its own kernels. Time steady-state calls after it."""
    for graph in _live_graphs():
        for s in graph.compiled.values():
            if s is not None:
                s.model.finish_compiles()


def explain(device: str = "h100-sxm") -> List[dict]:
    """What tilefuse made of the graphs torch.compile handed it in this process (those still
    alive, oldest first). Per graph: its ATen calls, whether it was split around ops tilefuse
    does not take (its parts are listed as graphs of their own, `part_of_split`), each compiled
    input signature (shapes, backend, kernel count, each kernel's mode (on the GPU: generated, gemm
    template, gemm for cuBLASLt, ...), compile time, its memory (the intermediates' arena it holds
    and the bytes of a call's outputs) and the fusion plan as CompiledModel.explain(device) gives
    it), what runs in PyTorch and why, and for a training forward what it saves for the backward
    (tensors and bytes; None otherwise). `memory_summary()` adds them up for a training step."""
    return [graph.explain(device) for graph in _live_graphs()]


def memory_summary() -> dict:
    """What tilefuse's graphs in this process (those alive) hold and write, in bytes: the
    intermediates' arenas (held by the compiled models between calls), the largest arena (one
    graph runs at a time), what training forwards save for their backwards (alive from the
    forward to the backward: the step's activation memory), and a call's outputs summed over
    the graphs. A training step's peak in tilefuse's part is about the saved bytes plus the
    largest arena and its graph's outputs; PyTorch's own tensors (weights, gradients, the
    optimizer's state) come on top."""
    graphs = _live_graphs()
    memories = [s.memory() for g in graphs for s in g.compiled.values() if s is not None]  # not the plans explain() makes
    arenas = [m["intermediate_bytes"] for m in memories]
    return {"graphs": len(graphs), "arena_bytes": sum(arenas), "largest_arena_bytes": max(arenas, default=0),
            "saved_for_backward_bytes": sum(g.saved_for_backward["bytes"] for g in graphs if g.saved_for_backward),
            "output_bytes": sum(m["output_bytes"] for m in memories)}


class _Specialization:
    """The graph translated and compiled for one input signature."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any], weights: Set[int], settings: dict,
                 all_weights: Set[int] = frozenset(), row_major_outputs: Set[int] = frozenset(), pad_outputs: bool = False,
                 binding_plans: Optional["_tilefuse.BindingPlans"] = None):
        """`weights`: the positions compiled in as constants; `all_weights`: every weight's;
        `binding_plans`: the graph's plans at other sizes, reused where its sizes are symbolic."""
        from .fx import translate

        start = time.perf_counter()
        translation = translate(gm, args, weights, row_major_outputs, pad_outputs)
        translated = time.perf_counter()
        # Dynamo's symbolic sizes: the kernels take them at launch, so another call's sizes reuse them.
        self.symbols = dict(translation.graph.symbols)
        self.inputs_of = translation.inputs
        self.outputs_of = translation.outputs
        inputs = self.inputs_of(args, draw=False)  # the call's own draws come at its run
        device = next((a.get_device() for a in inputs if a.is_cuda), 0)
        graph = _tilefuse.compile_graph(translation.graph, settings["backend"], settings["tune"], settings["fuse"],
                                        device, settings["strict"], "", _matmul_precision(), gemm=settings["gemm"],
                                        plans=binding_plans if self.symbols else None)
        self.model = _wrap(graph, "a torch.compile graph")
        self.input_shapes = [tuple(t.shape) for t in inputs]
        # The call's own inputs, for the log (weights read as inputs are many, and counted).
        weight_inputs = [p for p in translation.input_positions if p[0] in all_weights]
        own = [tuple(args[p[0]].shape) for p in translation.input_positions if p[0] not in all_weights and len(p) == 1]
        self.output_spec = translation.output_spec
        # Inputs updated in place: on the GPU each new value is given its argument's memory, and
        # the runtime writes it there (a KV cache at a decode step's position) or, where a kernel
        # reads the argument after that, into its own buffer and copies it there after the run,
        # with its other small copies in one launch. Elsewhere they come back as outputs of
        # their own, copied into the arguments after the run.
        self.mutations = translation.mutations
        numbers = {p[0]: n for n, p in enumerate(translation.input_positions) if len(p) == 1}
        self.input_numbers = numbers  # an argument's position among the graph's inputs
        self.in_place = [(output, position) for output, position in self.mutations
                         if position in numbers and numbers[position] not in translation.input_orders and
                         self.model.backend == "cuda"]
        self.into: Optional[InPlaceOutputs] = None  # those whose arguments are dense (run)
        stages = ", ".join(f"{name} {ms:.0f}" for name, ms in self.model.compile_stages_ms)
        symbols = ", ".join(f"{name}={value}" for name, value in sorted(self.symbols.items()))
        self.jit_compiles = self.model.jit_compiles  # kernels compiled, not found in the kernel cache
        logger.info("tilefuse: compiled a torch.compile graph for %s%s: %d kernels on %s, %d compiled (translated in %.0f ms, "
                    "compiled in %.0f ms: %s)%s", own or self.input_shapes,
                    f" and {len(weight_inputs)} weights read as inputs" if weight_inputs else "",
                    len(self.model.kernels), self.model.backend, self.jit_compiles, 1e3 * (translated - start),
                    1e3 * (time.perf_counter() - translated), stages,
                    f"; Dynamo's symbolic sizes {symbols}" if symbols else "")

    def memory(self) -> dict:
        """The intermediates' arena the compiled model holds and the bytes of a call's outputs."""
        return {"intermediate_bytes": self.model.arena_bytes, "output_bytes": self.model.output_bytes}

    def run(self, args: Sequence[Any]) -> list:
        # The call's signature matched this specialization's, so its inputs have the compiled
        # graph's shapes, dtypes, device and layouts (CompiledModel.call_checked skips those checks).
        if not self.mutations:
            return self.outputs_of(self.model.call_checked(self.inputs_of(args), layouts_fixed=True), args)
        if self.into is None:  # the layouts are the signature's: dense at every call, or at none
            dense = [(output, self.input_numbers[position]) for output, position in self.in_place if args[position].is_contiguous()]
            self.into = InPlaceOutputs(dense, len(self.input_shapes), len(self.model.outputs))
        tensors = self.model.call_checked(self.inputs_of(args), self.into, layouts_fixed=True)
        copied = [(args[position], tensors[output]) for output, position in self.mutations if tensors[output] is not args[position]]
        if copied:  # one multi-tensor copy, not a launch per input
            torch._foreach_copy_([to for to, _ in copied], [value for _, value in copied])
        return self.outputs_of(tensors, args)


def _eager_output_strides(gm: torch.fx.GraphModule) -> List[Optional[tuple]]:
    """Per output of the FX graph (each leaf of an op's tuple result), the layout to give it
    where eager PyTorch's (its meta value) orders its dims otherwise than tilefuse's row-major
    outputs (_ordered_strides); else None."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    traced = torch.fx.node.map_arg(output.args[0], lambda n: n.meta.get("val"))  # an op's tuple result: its leaves
    return [_ordered_strides(v) for v in torch.utils._pytree.tree_leaves(traced)]


def eager_strides(node: Any) -> Optional[tuple]:
    """The dense strides in the order of dims PyTorch traced for `node` (_ordered_strides)."""
    return _ordered_strides(node.meta.get("val") if isinstance(node, torch.fx.Node) else None)


def _ordered_strides(value: Any) -> Optional[tuple]:
    """Dense strides that order `value`'s dims as its own strides do, where that order is not
    the row-major one (translator.storage_order); else None. A permuted dense layout gets its own
    strides; a strided view (a slice of a fused QKV product's output, say) the dense layout of
    its order: cuDNN's attention backward returns its gradients in its inputs' layouts, and the
    backward's views of them expect that order."""
    from .fx import storage_order

    order = storage_order(value)
    if order is None:
        return None
    strides, expected = [1] * value.dim(), 1
    for d in reversed(order):
        strides[d] = expected
        expected *= value.shape[d]
    return tuple(strides)


def laid_out_as(value: Any, stride: Optional[tuple]) -> Any:
    """`value` laid out with `stride`: what the ops after it saw in eager PyTorch. Some read the
    layout, not only the values: cuDNN's attention backward, given a dense grad_output where
    eager's had the output's strides, returned a wrong dQ (GPT-2 small, bf16, H200, 2026-11-29)."""
    if stride is None or not isinstance(value, torch.Tensor) or value.numel() <= 1:
        return value
    if value.stride() == stride or all(value.stride(d) == stride[d] for d in range(value.dim()) if value.shape[d] != 1):
        return value
    laid_out = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
    laid_out.copy_(value)
    return laid_out


class _PyTorchPart(torch.nn.Module):
    """An op of a split graph that PyTorch runs, given its inputs and giving its outputs laid
    out in the order of dims PyTorch traced (tilefuse's parts give row-major ones). Some
    ops read the layout, not only the values (cuDNN's attention backward, given a dense
    grad_output where eager's had the output's strides, returned a wrong dQ: GPT-2 small, bf16,
    H200, 2026-11-29); some set their outputs' layout from their inputs' (cuDNN's attention
    output, whose later .view in a backward PyTorch runs failed on a dense one)."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__()
        self.gm = gm
        # Only the positions whose traced layout is not row-major are looked at per call; none
        # where the part's ops read any layout.
        from .fx.attention_backward import ANY_LAYOUT

        calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
        self.any_layout = bool(calls) and all(n.target in ANY_LAYOUT for n in calls)
        self.input_strides = [] if self.any_layout else [
            (i, s) for i, s in enumerate(eager_strides(n) for n in gm.graph.nodes if n.op == "placeholder") if s is not None]
        self.output_strides = _eager_output_strides(gm)
        self.restrided_outputs = [(i, s) for i, s in enumerate(self.output_strides) if s is not None]
        returned = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
        # Returned as a tuple of single tensors (the caller's getitem i is leaf i), or else as
        # one value (a tensor, or an op's tuple the next part takes whole).
        self.flat_outputs = isinstance(returned, (tuple, list)) and len(self.output_strides) == len(returned)

    def leave_outputs(self, indices: Set[int]) -> None:
        """Outputs (by their leaf's index) given as the ops give them, not laid out as traced."""
        self.restrided_outputs = [(i, s) for i, s in self.restrided_outputs if i not in indices]

    def forward(self, *args: Any) -> Any:
        if self.input_strides:
            args = list(args)
            for i, stride in self.input_strides:
                if i < len(args):
                    args[i] = laid_out_as(args[i], stride)
        outputs, spec = torch.utils._pytree.tree_flatten(self.gm(*args))
        if len(outputs) != len(self.output_strides):  # not as traced: left as PyTorch gave them
            return torch.utils._pytree.tree_unflatten(outputs, spec)
        for i, stride in self.restrided_outputs:
            outputs[i] = laid_out_as(outputs[i], stride)
        return torch.utils._pytree.tree_unflatten(outputs, spec)


class _TilefusePart(torch.nn.Module):
    """A stretch of a split graph: through tilefuse (a TilefuseGraph of its own, not split
    again), its weights those of the whole graph's call."""

    def __init__(self, gm: torch.fx.GraphModule, whole: TilefuseGraph):
        super().__init__()
        self.gm = gm
        self.whole = whole
        self.graph: Optional[TilefuseGraph] = None
        output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
        # The structure the part returns (a value or a tuple), read once: flattened per call it
        # took 3.6 ms of GPT-2's training step on the host (H200 machine, 2026-11-30). A flat
        # tuple (the usual part) is rebuilt directly, not through pytree (1.6 ms a step more).
        self.output_spec = torch.utils._pytree.tree_flatten(output.args[0])[1]
        spec = self.output_spec
        children = spec.children() if hasattr(spec, "children") else spec.children_specs
        self.flat_tuple = spec.type is tuple and all(c.is_leaf() for c in children)
        self.row_major_outputs: Set[int] = frozenset()  # set by _leave_layouts_to_readers

    def forward(self, *args: Any) -> Any:
        weights = {i for i, a in enumerate(args) if id(a) in self.whole.weight_ids}
        if self.graph is None or self.graph.weights != weights:
            self.graph = TilefuseGraph(self.gm, weights, self.whole.settings, split_allowed=False,
                                       row_major_outputs=self.row_major_outputs)
        outputs = self.graph(list(args))
        if self.flat_tuple:
            return tuple(outputs)
        return torch.utils._pytree.tree_unflatten(outputs, self.output_spec)


def _split_around(gm: torch.fx.GraphModule, unsupported: List[torch.fx.Node], whole: TilefuseGraph) -> torch.fx.GraphModule:
    """The graph as a sequence of parts: each unsupported call alone (run by PyTorch), the
    stretches between them through tilefuse."""
    from torch.fx.passes.split_module import split_module

    from .fx import unsupported_nodes

    refused = set(unsupported)
    part, parts = 0, {}  # a part number per node, increasing along the graph
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node in refused:
            part += 1
            parts[node] = part
            part += 1
        else:
            parts[node] = part
    split = split_module(gm, None, lambda node: parts[node], keep_original_order=True)
    for name, child in list(split.named_children()):
        if not unsupported_nodes(child) and _has_tensor_work(child):
            setattr(split, name, _TilefusePart(child, whole))
        elif unsupported_nodes(child):
            setattr(split, name, _PyTorchPart(child))
    _leave_layouts_to_readers(split, whole.saved_outputs if whole is not None else frozenset())
    return split


def _leave_layouts_to_readers(split: torch.fx.GraphModule, saved_outputs: Set[int]) -> None:
    """Layouts between a split graph's parts where their readers take any layout, so that no copy
    makes eager's (GPT-2's training step copied 5 tensors a layer into and out of the attention
    template's layouts, H200, 2026-11-30):
    - a PyTorch part of ops that read any layout (attention_backward.ANY_LAYOUT) gives the
      outputs only tilefuse parts read as its ops give them: tilefuse reads any layout (a part's
      translation follows its inputs' strides; what it returns it writes itself);
    - a tilefuse part writes row-major the outputs only such PyTorch parts read (or the graph
      returns as saved for its backward, `saved_outputs`, where the backward's ops read them).
    Outputs PyTorch's other ops read (a view may need eager's strides) or the caller gets keep
    eager's layout."""
    modules = dict(split.named_children())
    output = next(n for n in reversed(split.graph.nodes) if n.op == "output")
    returned_at: Dict[torch.fx.Node, List[int]] = {}
    for i, leaf in enumerate(torch.utils._pytree.tree_leaves(output.args[0])):
        returned_at.setdefault(leaf, []).append(i)

    def part(node: torch.fx.Node) -> Any:
        return modules.get(node.target) if node.op == "call_module" else None

    def read_by(users: List[torch.fx.Node], kind: type, saved_too: bool) -> bool:
        if not users:
            return False
        return all(isinstance(part(u), kind) and (kind is not _PyTorchPart or part(u).any_layout)
                   or (saved_too and u is output) for u in users)

    def outputs(node: torch.fx.Node, flat: bool, single: bool) -> List[Tuple[int, torch.fx.Node]]:
        """(leaf index, the node that is its value in the split graph) per output of a part."""
        if single:
            return [(0, node)]
        if flat and all(u.op == "call_function" and u.target is operator.getitem and isinstance(u.args[1], int)
                        for u in node.users):
            return [(u.args[1], u) for u in node.users]
        return []

    for node in split.graph.nodes:
        this = part(node)
        if isinstance(this, _PyTorchPart) and this.any_layout:
            if not this.flat_outputs:  # one value: every leaf goes where the value goes
                if read_by(list(node.users), _TilefusePart, False):
                    this.leave_outputs(set(range(len(this.output_strides))))
            else:
                this.leave_outputs({i for i, value in outputs(node, True, False) if read_by(list(value.users), _TilefusePart, False)})
        elif isinstance(this, _TilefusePart):
            this.row_major_outputs = frozenset(
                i for i, value in outputs(node, this.flat_tuple, this.output_spec.is_leaf())
                if read_by(list(value.users), _PyTorchPart, True) and any(isinstance(part(u), _PyTorchPart) for u in value.users)
                and all(p in saved_outputs for p in returned_at.get(value, [])))


def _has_tensor_work(gm: torch.fx.GraphModule) -> bool:
    """Whether a part computes tensors (not only getitems, views or size arithmetic). A part of
    views runs in PyTorch, where they cost nothing; through tilefuse each output would be a copy
    (the chunked loss's gradient, aliased to be saved for the backward: 1 GB at a 128K vocabulary)."""
    import operator

    from .fx.translator import VIEW_OPS, target_name

    return any(n.op == "call_function" and n.target is not operator.getitem and target_name(n) not in VIEW_OPS and
               isinstance(n.meta.get("val"), torch.Tensor) for n in gm.graph.nodes)


def _static_placeholders(gm: torch.fx.GraphModule) -> bool:
    """Whether every input of `gm` is a tensor of static shape and strides (Dynamo then guards
    each one's sizes and strides). A number among the inputs (a symbolic size, a float Dynamo
    did not specialize) is read at each call, so such a graph keeps the full signature."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or any(isinstance(d, torch.SymInt) for d in (*value.shape, *value.stride())):
            return False
    return True


def _signature(args: Sequence[Any], weights: Set[int]) -> tuple:
    def entry(a: Any, weight: bool) -> Any:
        if isinstance(a, torch.Tensor):  # an input's layout: read in memory order (translator.storage_order)
            if weight:
                return (a.shape, a.dtype, a.device, id(a), _version(a))
            return (a.shape, a.dtype, a.device, None if a.is_contiguous() else _layout_order(a))
        if isinstance(a, (list, tuple)):  # a split graph's part receives an op's tuple
            return tuple(entry(x, False) for x in a)
        return (type(a).__name__, a)

    return tuple(entry(a, i in weights) for i, a in enumerate(args))


# translator.storage_order by a layout's shape and strides: each call's signature asks it of every
# input laid out otherwise than row-major (GPT-2's training step: ~530 inputs a step, ~2.8 ms of
# its host time under cProfile on the H200 machine, 2026-11-30).
_ORDERS: Dict[tuple, Optional[tuple]] = {}


def _layout_order(a: torch.Tensor) -> Optional[tuple]:
    from .fx import storage_order

    key = (a.shape, a.stride())
    order = _ORDERS.get(key, _ORDERS)
    if order is _ORDERS:
        if len(_ORDERS) > 4096:
            _ORDERS.clear()
        order = _ORDERS[key] = storage_order(a)
    return order


# Compiled graphs by what they were compiled from (the graph's code, the call's signature with
# its weights' identities, the options), so that a second torch.compile of a model in this
# process (after torch._dynamo.reset(), say) reuses them instead of compiling again. An entry
# holds weak references to the weights it folded: it is used only while they are the same
# tensors (their version is in the signature), never for other tensors at reused addresses.
_MODELS: "OrderedDict[tuple, Tuple[_Specialization, List[weakref.ReferenceType]]]" = OrderedDict()
_MODELS_KEPT = 32


def _reusable(gm: torch.fx.GraphModule, args: Sequence[Any], weights: Set[int], settings: dict,
              row_major_outputs: Set[int] = frozenset(), pad_outputs: bool = False):
    """The cache key of this compile and the tensors it folds (weights and the graph's own)."""
    from .fx import attribute

    folded = [args[i] for i in sorted(weights) if isinstance(args[i], torch.Tensor)]
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(value := attribute(gm, str(node.target)), torch.Tensor):
            folded.append(value)
    # (The TILEFUSE_ switches too: under TILEFUSE_CACHE_UPDATE_IN_ATTENTION=0 a second compile
    # got the first one's model, the fold in it: the switch's GPU test, 2026-12-06.)
    switches = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("TILEFUSE_")))
    key = (gm.code, _signature(args, weights), tuple(sorted(settings.items())), _precision_key(), switches,
           tuple((id(t), _version(t)) for t in folded), tuple(sorted(row_major_outputs)), pad_outputs)
    return key, folded


def _as_list(outputs: Any) -> list:
    return list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]


def _is_weight(gm: torch.fx.GraphModule, index: int, value: Any) -> bool:
    """Whether Dynamo lifted a module's parameter or buffer into this input."""
    if isinstance(value, torch.Tensor) and value.is_inference():
        return False  # no version counter: a change in place could not be seen, so read it at each call
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


def _log_once(logged: Set[str], key: str, message: str) -> None:
    """Logs a warning the first time `key` is seen in `logged` (one set per graph)."""
    if key not in logged:
        logged.add(key)
        logger.warning("%s", message)


def register() -> None:
    """Registers the backend with Dynamo as "tilefuse" (the package's entry point does this
    when tilefuse is installed; importing tilefuse after torch does it otherwise)."""
    from torch._dynamo.backends import registry

    if "tilefuse" in registry._COMPILER_FNS or registry._BACKENDS.get("tilefuse") is not None:
        return  # registered, or found through the entry point (which registers it on first use)
    registry.register_backend(compiler_fn=tilefuse_backend, name="tilefuse")


register()

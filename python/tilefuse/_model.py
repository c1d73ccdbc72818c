"""tilefuse.compile and CompiledModel: a model compiled once, called on arrays or tensors."""

from __future__ import annotations

import json
import logging
import operator
import os
import sys
import warnings as _warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _tilefuse
from ._errors import Error

logger = logging.getLogger("tilefuse")

# The element types tilefuse takes, by NumPy name (bfloat16 is ml_dtypes' type).
_NUMPY_DTYPES = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"}
# The dtypes an array passes as it is (the common case, checked first: a call's overhead counts
# against small models).
_PLAIN_NUMPY_DTYPES = frozenset(np.dtype(n) for n in ("float64", "float32", "float16", "int64", "int32", "int8", "uint8", "bool"))
_TORCH_DTYPES = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"}


# tilefuse's dtype names as torch's.
_TORCH_BY_TILEFUSE = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
                      "i32": "int32", "i8": "int8", "u8": "uint8", "bool": "bool"}


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: its ONNX name, tilefuse dtype name (f32, bf16, ...) and shape."""

    name: str
    dtype: str
    shape: Tuple[int, ...]


@dataclass(frozen=True)
class Kernel:
    """One compiled kernel, as `tilefuse run --json` lists it.

    ``generated`` is false where the group runs on the reference kernels (the CPU) or on
    the host (the GPU); ``why_not`` says why. ``mode`` is the GPU's way of running it
    (generated, gemm template, attention template, gemm, host); empty on the CPU.
    ``strategy`` is the GPU's template or loop and its configuration, as `tilefuse run` prints it.
    """

    name: str
    kind: str
    generated: bool
    why_not: str
    mode: str
    strategy: str
    num_nodes: int


def compile(model: Any, backend: str = "auto", tune: bool = False, fuse: bool = True, device: int = 0,
            strict: bool = False, precision: str = "highest",
            dims: Optional[Dict[str, int]] = None, background_compile: bool = True) -> "CompiledModel":
    """Compiles an ONNX model with tilefuse.

    ``model`` is a path to an ``.onnx`` or ``.onnxtxt`` file or an ONNX backend-test
    folder, an ``onnx.ModelProto``, or its serialized bytes (external data of an in-memory
    proto is not found: save such a model and pass its path). ``backend`` is ``auto`` (CUDA
    when a GPU is usable, else the CPU), ``cuda``, ``cpu`` or ``reference`` (the f64
    interpreter), as `tilefuse run --backend`; ``tune`` measures kernel configurations first
    (cached); ``fuse=False`` runs every op as its own kernel.

    ``device`` is the GPU to run on, by CUDA's numbering (as `tilefuse run --device`). 0, the
    default, is accepted with every backend: GPU 0 where there is one, nothing to the CPU
    backends, so ``device=0`` with ``backend="cpu"`` compiles for the CPU. Another ordinal asks
    for that GPU: it must exist, under ``auto`` too (no silent fall back to the CPU), and
    ``cpu`` and ``reference`` refuse it. Raises :class:`Error` with the message the CLI prints.

    A group runs on the reference interpreter only where no generated kernel exists for one of
    its ops: each such group is a ``RuntimeWarning`` naming the group, the op and why (also in
    ``CompiledModel.warnings``). ``strict=True`` makes it an :class:`Error` instead (as
    `tilefuse run --strict`), and so is ``auto`` falling back to the interpreter.

    ``precision`` is f32 matmuls' on the GPU, as `tilefuse run --precision` and PyTorch's
    float32 matmul precision: ``highest`` (f32's accuracy, the default: the GEMM template's
    3xTF32 form, each operand split into two TF32 parts and three products summed on the tensor
    cores, its epilogue fused; cuBLASLt's f32 where the template does not apply) or ``high``
    (TF32 tensor cores, through the GEMM template with its epilogue fused where it applies).

    ``dims`` gives the model's symbolic input dims (ONNX ``dim_param``) their values, e.g.
    ``{"batch": 8, "seq": 512}``, as `tilefuse run --shape`. A model file with symbolic dims
    compiled without ``dims`` returns a :class:`SpecializingModel`: each call's input shapes
    fix the dims, and each new set of values is compiled once (then kept): the file is read once
    and its weights shared by every binding, kernels that take their sizes at launch come from
    the kernel cache, and a binding whose graph has an earlier one's structure compiles its plan
    (each is still imported and passed again). A dim given as a range, ``(min, max)`` or
    ``(min, typical, max)`` as `--shape seq=1..512..2048`, makes a :class:`SpecializingModel` too:
    calls outside the range are refused, and where every dim is given the model is compiled at
    the typical values (max where not given) before ``compile`` returns, its plan serving the
    other bindings.

    ``background_compile`` (on the GPU): a template kernel whose best form takes seconds of
    NVRTC and is not in the kernel cache runs a stand-in that compiles in a fraction of a
    second (a ping-pong GEMM for the overlapped epilogue, the serial loop for attention)
    while the best form compiles on other threads; a call swaps it in once it is ready, and the
    kernel cache keeps it for the next process. ``finish_compiles()`` waits for it;
    ``benchmark()`` and ``profile()`` do so themselves. The two forms round differently (the
    overlapped epilogue reads the product rounded to its half-precision type), so a call before
    and a call after the swap may differ in the last bit. ``False``: every kernel is compiled
    before ``compile`` returns.
    """
    dims = dict(dims or {})
    ranges = {name: _dim_range(name, value) for name, value in dims.items() if isinstance(value, (tuple, list))}
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if (ranges or not dims) and os.path.exists(path):
            file = _tilefuse.open_model(path)  # read and parsed once, whatever compiles it
            options = dict(backend=backend, tune=tune, fuse=fuse, device=device, strict=strict, precision=precision,
                           background_compile=background_compile)
            if file.symbolic_dims:
                return SpecializingModel(file, options, {n: v for n, v in dims.items() if n not in ranges}, ranges)
            if ranges:
                raise Error(f"{path}: dims {sorted(ranges)} given as ranges, but the model has no symbolic dims")
            return _wrap(_tilefuse.compile_file(file, backend, tune, fuse, device, strict, precision, dims,
                                                background_compile=background_compile), path)
        return _wrap(_tilefuse.compile(path, backend, tune, fuse, device, strict, precision, dims,
                                       background_compile=background_compile), path)
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto, without importing onnx
        model = model.SerializeToString()
    if ranges:
        raise Error("dims given as ranges need the model as a path (a SpecializingModel reads its file)")
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _wrap(_tilefuse.compile_bytes(bytes(model), backend, tune, fuse, device, strict, precision, dims,
                                             background_compile=background_compile), "<ModelProto>")
    raise Error(f"model is a {type(model).__name__}: tilefuse.compile takes a path, an onnx.ModelProto or its bytes")


def compile_file(path: str, source: str, backend: str, tune: bool, fuse: bool, device: int = 0,
                 strict: bool = False) -> "CompiledModel":
    """compile() of a file, which the model's messages and repr call `source`."""
    return _wrap(_tilefuse.compile(path, backend, tune, fuse, device, strict), source)


def _dim_range(name: str, value: Sequence[int]) -> Tuple[int, int, int]:
    """(min, typical, max) of a dim given as (min, max) or (min, typical, max); typical defaults to max."""
    if len(value) not in (2, 3) or not all(isinstance(v, int) and v >= 0 for v in value):
        raise Error(f"dims: '{name}' is {tuple(value)!r}, not (min, max) or (min, typical, max) of non-negative ints")
    low, typical, high = value[0], value[1] if len(value) == 3 else value[-1], value[-1]
    if not low <= typical <= high:
        raise Error(f"dims: '{name}' is {tuple(value)!r}, not a range: min <= typical <= max")
    return low, typical, high


class SpecializingModel:
    """A model file with symbolic input dims, compiled for the shapes it is called with.

    Each call's input shapes give the symbolic dims their values (a dim named twice must agree);
    the model compiled for those values is made on the first such call and kept (at most
    ``max_compiled``, least recently used dropped), so calls with shapes seen before pay only
    the run. ``compiled`` maps each kept set of values to its :class:`CompiledModel`. The file
    is read once, when this object is made: every compile shares the weights its first one
    decoded (a later change to the file is not seen).
    """

    # A binding shares the file's weights with the others (host and GPU), so keeping one costs its
    # intermediates and kernels only: enough for every past length of a few hundred decode steps,
    # while their intermediates' arenas (sized by each binding's shapes) fit in max_arena_bytes.
    max_compiled = 256
    max_arena_bytes = 4 << 30

    def __init__(self, file: "_tilefuse.ModelFile", options: Dict[str, Any], fixed: Optional[Dict[str, int]] = None,
                 ranges: Optional[Dict[str, Tuple[int, int, int]]] = None):
        self.source = path = file.path
        self.fixed, self.ranges = dict(fixed or {}), dict(ranges or {})  # dims given: values, (min, typical, max)
        self.symbolic_dims = [(name, position, dim, input_name) for input_name, position, dim, name in file.symbolic_dims]
        self._file = file  # the weights decoded once, shared by every compiled binding
        self._options = options
        self.compiles = 0  # the bindings compiled so far (a binding dropped and seen again counts again)
        self.compiled: "OrderedDict[Tuple[Tuple[str, int], ...], CompiledModel]" = OrderedDict()
        unnamed = [f"input '{i}' dim {d}" for n, _, d, i in self.symbolic_dims if not n]
        if unnamed:
            raise Error(f"{path}: {', '.join(unnamed)} symbolic without a name: compile it with dims= for the others "
                        "or give the model named dims")
        names = {n for n, _, _, _ in self.symbolic_dims}
        unknown = sorted((set(self.fixed) | set(self.ranges)) - names)
        if unknown:
            raise Error(f"{path}: dims {unknown} given, but the model's symbolic dims are {sorted(names)}")
        if names <= set(self.fixed) | set(self.ranges):
            # Every dim known: compiled now at the typical values, whose plan the other bindings
            # of its structure compile (TensorRT's optimisation profile, planned at "opt").
            self.specialize({**self.fixed, **{n: r[1] for n, r in self.ranges.items()}})

    def dims_of(self, inputs: Sequence[Any]) -> Dict[str, int]:
        """The symbolic dims' values the inputs' shapes give."""
        values: Dict[str, int] = {}
        for name, position, dim, input_name in self.symbolic_dims:
            if position >= len(inputs):
                raise Error(f"{self.source}: {len(inputs)} inputs given; input '{input_name}' (number {position + 1}) "
                            f"fixes the symbolic dim '{name}'")
            shape = tuple(inputs[position].shape)
            if dim >= len(shape):
                raise Error(f"{self.source}: input '{input_name}' has shape {shape}, no dim {dim} for '{name}'")
            if values.setdefault(name, int(shape[dim])) != shape[dim]:
                raise Error(f"{self.source}: symbolic dim '{name}' is {values[name]} by an earlier input and "
                            f"{shape[dim]} by input '{input_name}' dim {dim}")
        for name, value in values.items():
            if name in self.fixed and value != self.fixed[name]:
                raise Error(f"{self.source}: symbolic dim '{name}' is {value} in the inputs given, but {self.fixed[name]} "
                            "by dims=")
            low, _, high = self.ranges.get(name, (value, value, value))
            if not low <= value <= high:
                raise Error(f"{self.source}: symbolic dim '{name}' is {value} in the inputs given, outside its range "
                            f"{low}..{high}")
        return values

    def specialize(self, dims: Dict[str, int]) -> "CompiledModel":
        """The model compiled for these values of the symbolic dims (compiled now unless kept)."""
        key = tuple(sorted(dims.items()))
        model = self.compiled.get(key)
        if model is None:
            o = self._options
            model = _wrap(_tilefuse.compile_file(self._file, o["backend"], o["tune"], o["fuse"], o["device"], o["strict"],
                                                 o["precision"], dict(dims), background_compile=o["background_compile"]),
                          self.source)
            self.compiles += 1
            self.compiled[key] = model
            while len(self.compiled) > 1 and (len(self.compiled) > self.max_compiled or
                                              sum(m.arena_bytes for m in self.compiled.values()) > self.max_arena_bytes):
                self.compiled.popitem(last=False)  # the least recently used
        else:
            self.compiled.move_to_end(key)
        return model

    def __call__(self, *inputs: Any) -> List[Any]:
        return self.specialize(self.dims_of(inputs))(*inputs)

    def __repr__(self) -> str:
        names = sorted({n for n, _, _, _ in self.symbolic_dims})
        return f"SpecializingModel({self.source!r}, symbolic dims {names}, {len(self.compiled)} compiled)"


def _wrap(graph: "_tilefuse.CompiledModel", source: str) -> "CompiledModel":
    """The compiled graph as a CompiledModel, which its messages and repr call `source`."""
    compiled = CompiledModel(graph, source)
    if compiled.backend_note:
        logger.info("%s: %s", source, compiled.backend_note)
    for warning in compiled.warnings:
        _warnings.warn(f"{source}: {warning}", RuntimeWarning, stacklevel=3)
    return compiled


class CompiledModel:
    """A compiled model. Call it with one array or tensor per graph input, in order."""

    def __init__(self, graph: "_tilefuse.CompiledGraph", source: str):
        self._graph = graph
        self.source = source
        self._bf16_outputs = [i for i, (_, dtype, _) in enumerate(graph.outputs) if dtype == "bf16"]
        # For runs on device memory, fixed per model (the call checks against these, not the specs).
        self._device_runs = graph.device_runs
        self._device_inputs = [(name, dtype, tuple(shape)) for name, dtype, shape in graph.inputs]
        self._device_outputs = [(dtype, tuple(shape)) for _, dtype, shape in graph.outputs]
        self._torch_types = None  # tilefuse dtype name -> torch.dtype, on the first torch call
        self._inputs_checked = False  # call_checked: a call's inputs passed the GPU path's full check
        self._held_pointers: Optional[_HeldPointers] = None  # call_checked's, with fixed layouts

    @property
    def backend(self) -> str:
        """Where it runs: cuda, cpu or reference."""
        return self._graph.backend

    @property
    def backend_note(self) -> str:
        """Why ``auto`` fell back from the GPU (or the CPU); empty when it did not."""
        return self._graph.backend_note

    @property
    def warnings(self) -> List[str]:
        """Each group that runs on the reference interpreter (no generated kernel for an op):
        the group, its ops and why. Empty when every group has a kernel."""
        return list(self._graph.warnings)

    @property
    def device(self) -> int:
        """The GPU ordinal the model was compiled for (``compile(device=...)``)."""
        return self._graph.device

    @property
    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec(n, d, tuple(s)) for n, d, s in self._graph.inputs]

    @property
    def outputs(self) -> List[TensorSpec]:
        return [TensorSpec(n, d, tuple(s)) for n, d, s in self._graph.outputs]

    @property
    def arena_bytes(self) -> int:
        """Bytes of device (or host) memory the compiled model holds for its intermediates, all
        of them in one arena placed by liveness (no two values live at once share bytes)."""
        return self._graph.arena_bytes

    @property
    def output_bytes(self) -> int:
        """Bytes a call's outputs take (allocated per call, by the caller's framework on the GPU)."""
        return self._graph.output_bytes

    @property
    def compile_ms(self) -> float:
        """Milliseconds the compile took, graph passes to the loaded kernels."""
        return self._graph.compile_ms

    @property
    def compile_stages_ms(self) -> List[Tuple[str, float]]:
        """Where the compile's time went: (stage, milliseconds) in order (graph passes, plan and
        lower, build: the host compiler or NVRTC, load)."""
        return [tuple(stage) for stage in self._graph.compile_stages_ms]

    @property
    def jit_compiles(self) -> int:
        """Kernels NVRTC or the host compiler built for this model (the others came from the cache)."""
        return self._graph.jit_compiles

    @property
    def jit_cache_hits(self) -> int:
        """Kernels found in the kernel cache instead of compiled."""
        return self._graph.jit_cache_hits

    def finish_compiles(self) -> None:
        """Waits for the kernels still compiling in the background (``compile(background_compile=)``);
        they run from the next call on and ``kernels`` describes them."""
        self._graph.finish_compiles()

    @property
    def device_run_counts(self) -> dict:
        """How runs on CUDA tensors (queued on PyTorch's stream) went so far: "replays" (a CUDA
        graph captured on the same pointers, one launch; a capture's first launch too), "one_by_one" (new pointers: the kernels
        launched one by one; captured when the pointers come again), "through_buffers" (a
        pointer not 256-byte aligned: inputs and outputs copied through the model's own
        buffers), "captures", and "output_copies" (outputs that are inputs, repeats or constants,
        copied after the run). All 0 off the GPU."""
        return dict(self._graph.device_run_counts)

    @property
    def pending_compiles(self) -> int:
        """Kernels running their quick stand-ins until their own compile ends (0: none)."""
        return self._graph.pending_compiles

    def profile(self, *inputs: Any) -> List[Tuple[str, float]]:
        """Runs once with every kernel timed on its own (device events on the GPU, after a
        synchronization per kernel: slower than a call, for finding the slow kernel) and returns
        (kernel name, microseconds) in run order. Inputs as for a call, copied to the host."""
        torch = sys.modules.get("torch")
        if torch is not None and any(isinstance(x, torch.Tensor) for x in inputs):
            arrays = [_as_torch_input(torch, i, x) for i, x in enumerate(inputs)]
        else:
            arrays = [_as_numpy_input(i, x) for i, x in enumerate(inputs)]
        return [(name, duration) for name, _, duration in self._graph.profile(arrays)]

    @property
    def kernels(self) -> List[Kernel]:
        """The compiled kernels (none on the reference backend)."""
        return [Kernel(**k) for k in self._graph.kernels]

    def explain(self, device: str = "h100-sxm") -> dict:
        """The fusion plan as `tilefuse explain --json --device DEVICE` prints it (parsed).

        The plan is the cost model's for ``device`` (h100-sxm, h200 or cpu), as the CLI's
        default; with ``fuse=False`` it is `--no-fusion`'s.
        """
        return json.loads(self._graph.explain_json(device))

    def __call__(self, *inputs: Any) -> list:
        """Runs the model. NumPy arrays in, NumPy arrays out; torch tensors in, torch tensors out.

        Inputs are copied into tilefuse's buffers; outputs are returned without a copy. CUDA
        tensors on the model's device, given to a model that runs on the GPU as one CUDA graph, stay on
        the device: the run is queued on PyTorch's current stream (the graph replayed on the
        tensors and on output tensors allocated by PyTorch, in place) and returns before it
        finishes, like a PyTorch op; CPU tensors among them are uploaded first. Otherwise CUDA
        tensors are copied to the host and the outputs back to the first CUDA input's device.
        """
        torch = sys.modules.get("torch")
        if self._device_runs and torch is not None:
            pointers = self._dense_device_pointers(torch, inputs)
            if pointers is not None:  # the fast path: one pass over the inputs, one launch
                return self._launch_on_device(torch, pointers)
        if torch is not None and any(isinstance(x, torch.Tensor) for x in inputs):
            return self._call_torch(torch, inputs)
        arrays = [_as_numpy_input(i, x) for i, x in enumerate(inputs)]
        outputs = self._graph.run(arrays, False, "the call")
        for i in self._bf16_outputs:
            outputs[i] = _as_bfloat16(outputs[i], self._graph.outputs[i][0])
        return outputs

    def call_checked(self, inputs: Sequence[Any], into: Optional["InPlaceOutputs"] = None, layouts_fixed: bool = False) -> list:
        """As calling the model, for a caller whose every call has the first call's input shapes,
        dtypes and devices (the torch backend's call signature guards that). Once a call's
        inputs have passed the GPU path's full check, later calls' are checked for density only
        before the launch (the full pass over every input's type, dtype, shape and device took
        ~2 ms of GPT-2's training step on the host, H200 machine, 2026-11-30).

        ``into``: outputs to write into inputs' own tensors (InPlaceOutputs: each such input
        dense, of the output's dtype and shape: an input updated in place), on the launch path;
        where ``output_may_overwrite_input`` does not hold, the runtime copies the output there
        after the run. A call on any other path returns fresh tensors for them instead, so a
        caller copies where the returned tensor is not the input it named.

        ``layouts_fixed``: the caller also guarantees each input's strides are the first call's
        (torch_backend's keys and Dynamo's guards fix them), so an input at the pointer it had
        in the last call is dense as it was then and its pointer need not be read again."""
        if not self._inputs_checked:
            torch = sys.modules.get("torch")
            self._inputs_checked = (self._device_runs and torch is not None and
                                    self._dense_device_pointers(torch, inputs) is not None)
            return self(*inputs)
        torch = sys.modules["torch"]
        if layouts_fixed:
            if self._held_pointers is None:
                self._held_pointers = _HeldPointers(torch)
            pointers = self._held_pointers.read(inputs)
            if pointers is not None:
                return self._launch_on_device(torch, pointers, into, inputs)
        pointers = []
        for x in inputs:
            if not x.is_contiguous():
                return self(*inputs)  # copied dense there
            pointers.append(x.data_ptr())
        if layouts_fixed:
            self._held_pointers.note(pointers)
        return self._launch_on_device(torch, pointers, into, inputs)

    def output_may_overwrite_input(self, output: int, input: int) -> bool:
        """Whether a run on the GPU may write output `output` straight into input `input`'s
        memory (positions among the graph's outputs and inputs): no kernel reads that input
        after the output's kernel overwrites it."""
        return self._graph.output_may_overwrite_input(output, input)

    def run_into(self, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        """Runs on the GPU with each output written into the given tensor (dense CUDA tensors of
        the outputs' dtypes and shapes on the model's device), queued on PyTorch's current
        stream. An output may be one of the inputs' own tensors (an update in place): where a
        kernel reads that input after the output is written (``output_may_overwrite_input``
        false), the run writes its own buffer and copies it there after
        (tilefuse.fx.linear_cross_entropy checks its row kernel's strategy so that its gradient
        is written over the logits directly, without that copy)."""
        torch = sys.modules.get("torch")
        if not self._device_runs or torch is None:
            raise Error(f"run_into: for models that run on the GPU, given torch tensors; this one runs on {self.backend}")
        pointers = self._dense_device_pointers(torch, inputs)
        if pointers is None:
            raise Error("run_into: the inputs must be dense CUDA tensors of the graph inputs' dtypes and shapes, on the model's device")
        if len(outputs) != len(self._device_outputs):
            raise Error(f"run_into: {len(outputs)} output tensors for the graph's {len(self._device_outputs)} outputs")
        for (dtype, shape), out in zip(self._device_outputs, outputs):
            if out.dtype is not self._torch_types.get(dtype) or tuple(out.shape) != shape or not out.is_cuda or \
                    out.get_device() != self._graph.device or not out.is_contiguous():
                raise Error(f"run_into: an output tensor of {out.dtype}{list(out.shape)} where the graph writes "
                            f"{dtype}[{','.join(map(str, shape))}] (dense, on the model's device)")
        self._graph.run_device(pointers, [o.data_ptr() for o in outputs], self._current_stream())

    def _call_torch(self, torch: Any, inputs: Sequence[Any]) -> list:
        if self._runs_on_device(torch, inputs):
            return self._call_on_device(torch, inputs)
        device = next((x.device for x in inputs if isinstance(x, torch.Tensor) and x.device.type != "cpu"), None)
        tensors = [_as_torch_input(torch, i, x) for i, x in enumerate(inputs)]
        outputs = self._graph.run(tensors, True, "the call")
        return outputs if device is None else [o.to(device) for o in outputs]

    def _runs_on_device(self, torch: Any, inputs: Sequence[Any]) -> bool:
        # tilefuse's GPU runtime uses its device's primary context (PyTorch's too). Inputs on the
        # CPU beside ones on the model's GPU are uploaded (_call_on_device): a static KV cache's
        # per-layer counters start as CPU scalars, and sending the prompt's call down the host
        # path for them copied every weight to the host and back (GPT-2 small, ~56 ms a
        # generation, H200, 2026-12-05).
        device = self._graph.device
        on_device = False
        for x in inputs:
            if not isinstance(x, torch.Tensor) or (x.is_cuda and x.get_device() != device):
                return False
            on_device = on_device or x.is_cuda
        return self._device_runs and on_device

    def _prepare_torch(self, torch: Any) -> None:
        if self._torch_types is not None:
            return
        self._torch_types = {k: getattr(torch, v) for k, v in _TORCH_BY_TILEFUSE.items()}
        index = self._graph.device
        self._cuda_device = torch.device("cuda", index)
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # PyTorch's own fast path
        self._current_stream = (lambda: raw(index)) if raw else (lambda: torch.cuda.current_stream(index).cuda_stream)
        self._device_input_types = [(self._torch_types.get(dtype), shape) for _, dtype, shape in self._device_inputs]
        # Outputs allocated as TorchInductor's generated code allocates its buffers: PyTorch's
        # C++ entry without torch.empty's argument parsing (GPT-2's training step allocates 459
        # outputs; torch.empty took ~3.8 ms of its host time on the H200 machine, 2026-11-30).
        fast = getattr(getattr(getattr(torch._C, "_dynamo", None), "guards", None), "_empty_strided_cuda", None)
        layouts = [(shape, _dense_strides(shape), self._torch_types[dtype]) for dtype, shape in self._device_outputs]
        def empty_outputs(only: Optional[List[int]] = None) -> list:
            """Every output's tensor, or those of the outputs `only` lists."""
            chosen = layouts if only is None else [layouts[i] for i in only]
            if fast is not None and torch.cuda.current_device() == index:  # it allocates on the current device
                return [fast(shape, strides, dtype) for shape, strides, dtype in chosen]
            return [torch.empty(shape, dtype=dtype, device=self._cuda_device) for shape, _, dtype in chosen]

        self._empty_outputs = empty_outputs

    def _dense_device_pointers(self, torch: Any, inputs: Sequence[Any]) -> Optional[List[int]]:
        """The inputs' device pointers when every one is a dense CUDA tensor on the model's device of the
        graph's dtype and shape (the common call, checked in one pass), else None (the general
        path then converts or reports)."""
        self._prepare_torch(torch)
        if len(inputs) != len(self._device_input_types):
            return None
        tensor = torch.Tensor
        device = self._graph.device
        pointers = []
        for (dtype, shape), x in zip(self._device_input_types, inputs):
            if not isinstance(x, tensor) or not x.is_cuda or x.dtype is not dtype or x.shape != shape or \
                    x.get_device() != device or not x.is_contiguous():
                return None
            pointers.append(x.data_ptr())
        return pointers

    def _launch_on_device(self, torch: Any, pointers: List[int], into: Optional["InPlaceOutputs"] = None,
                          inputs: Sequence[Any] = ()) -> list:
        if into is None:
            outputs = self._empty_outputs()
            self._graph.run_device(pointers, [o.data_ptr() for o in outputs], self._current_stream())
            return outputs
        fresh = self._empty_outputs(only=into.fresh)
        outputs = into.gather(inputs, fresh)
        self._graph.run_device(pointers, into.gather(pointers, [o.data_ptr() for o in fresh]), self._current_stream())
        return outputs

    def _call_on_device(self, torch: Any, inputs: Sequence[Any]) -> list:
        self._prepare_torch(torch)
        types = self._torch_types
        if len(inputs) != len(self._device_inputs):
            raise Error(f"the call has {len(inputs)} inputs; the graph takes {len(self._device_inputs)}")
        pointers = []
        # Dense copies of strided inputs, held until the run is queued: freed before, a copy's
        # block went to the next input's copy (PyTorch's allocator reuses a freed block at once
        # on the same stream), so two same-sized strided inputs both read the second one (a
        # GPT-2 backward graph's two saved keys: wrong gradients). Freed after, stream order
        # keeps them until the run has read them.
        copies = []
        for (name, dtype, shape), x in zip(self._device_inputs, inputs):
            if x.dtype is not types.get(dtype) or x.shape != shape:
                raise Error(f"input '{name}' expects {dtype}[{','.join(map(str, shape))}], "
                            f"got {str(x.dtype).removeprefix('torch.')}[{','.join(map(str, x.shape))}]")
            if not x.is_cuda or not x.is_contiguous():
                x = x.to(self._cuda_device).contiguous()
                copies.append(x)
            pointers.append(x.data_ptr())
        outputs = self._launch_on_device(torch, pointers)
        del copies
        return outputs

    def __repr__(self) -> str:
        return f"<tilefuse.CompiledModel {self.source} on {self.backend}, {len(self._graph.kernels)} kernels>"


class InPlaceOutputs:
    """Outputs a caller has written into inputs' own tensors (updates in place, a KV cache's
    layers), fixed per caller: output o into input i for each (o, i) of `pairs`, the others
    allocated at each call (`fresh`). A call's output tensors and pointers are each gathered in
    one C call (an itemgetter over the inputs followed by the fresh outputs), where a dict of
    the given tensors, a lookup and a data_ptr() per output took ~10 us of a GPT-2 decode step's
    host time (50 outputs, 48 of them its cache's; development machine)."""

    def __init__(self, pairs: Sequence[Tuple[int, int]], inputs: int, outputs: int):
        into = dict(pairs)
        self.fresh = [o for o in range(outputs) if o not in into]
        fresh_at = {o: inputs + k for k, o in enumerate(self.fresh)}
        order = [into[o] if o in into else fresh_at[o] for o in range(outputs)]
        take = operator.itemgetter(*order) if order else (lambda _: ())
        # (itemgetter of one position returns the item, not a tuple)
        self._take = take if len(order) != 1 else (lambda values: (take(values),))

    def gather(self, inputs: Sequence[Any], fresh: List[Any]) -> list:
        """Per output in order: its input's entry of `inputs` or its entry of `fresh`."""
        return list(self._take((inputs if isinstance(inputs, list) else list(inputs)) + fresh))


class _HeldPointers:
    """A caller's input pointers from call to call, where the inputs' layouts are fixed (each a
    dense tensor while at the pointer it had). Reading 220 tensors' pointers one by one in
    Python was ~90 us of a GPT-2 decode step's host time (H200 machine, 2026-12-05), though
    only its token's and position's change from step to step: here the inputs whose pointers
    stayed put are checked in one C++ pass (PyTorch's own, as CUDA graph trees check their
    static inputs) and only the others are read. Which are which is learnt: an input whose
    pointer changed is read one by one until it stays put over a window of kSettle calls (a
    new KV cache each generation)."""

    kSettle = 16

    def __init__(self, torch: Any):
        self._equal = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)
        self._pointers: Optional[List[int]] = None  # the last call's
        self._steady: List[int] = []  # inputs checked in one pass
        self._moving: List[int] = []  # inputs read one by one
        self._since: List[int] = []  # the moving inputs' pointers kSettle calls ago
        self._calls = 0

    def read(self, inputs: Sequence[Any]) -> Optional[List[int]]:
        """The call's pointers, where every steady input is where it was and every moving one
        dense; else None (the caller reads them all and notes them)."""
        pointers = self._pointers
        if pointers is None or not self._equal(inputs, pointers, self._steady):
            return None
        for i in self._moving:
            x = inputs[i]
            if not x.is_contiguous():
                return None
            pointers[i] = x.data_ptr()
        self._calls += 1
        if self._calls % self.kSettle == 0 and self._moving:  # those that stayed put become steady
            settled = {i for i, p in zip(self._moving, self._since) if pointers[i] == p}
            if settled:
                self._steady = sorted(self._steady + list(settled))
                self._moving = [i for i in self._moving if i not in settled]
            self._since = [pointers[i] for i in self._moving]
        return pointers

    def note(self, pointers: List[int]) -> None:
        """A call's pointers, read one by one: those that changed since the last call move."""
        if self._equal is None:
            return
        if self._pointers is not None:
            moved = {i for i, (a, b) in enumerate(zip(self._pointers, pointers)) if a != b} | set(self._moving)
            self._moving = sorted(moved)
            self._steady = [i for i in range(len(pointers)) if i not in moved]
        else:
            self._steady = list(range(len(pointers)))
        self._since = [pointers[i] for i in self._moving]
        self._pointers = list(pointers)


def _dense_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    strides, stride = [], 1
    for d in reversed(shape):
        strides.insert(0, stride)
        stride *= max(d, 1)
    return tuple(strides)


def _as_numpy_input(index: int, value: Any) -> np.ndarray:
    if type(value) is np.ndarray and value.dtype in _PLAIN_NUMPY_DTYPES and value.flags.c_contiguous:
        return value
    if not isinstance(value, (np.ndarray, np.generic)):
        raise Error(f"input {index} is a {type(value).__name__}: pass NumPy arrays, or torch tensors")
    array = np.ascontiguousarray(value)
    if array.dtype.name not in _NUMPY_DTYPES:
        raise Error(f"input {index} has dtype {array.dtype.name}: tilefuse takes {', '.join(sorted(_NUMPY_DTYPES))}")
    # The extension reads uint16 as bfloat16 bits (NumPy has no bfloat16; ml_dtypes does).
    return array.view(np.uint16) if array.dtype.name == "bfloat16" else array


def _as_bfloat16(bits: np.ndarray, name: str) -> np.ndarray:
    try:
        import ml_dtypes
    except ImportError:
        raise Error(f"output '{name}' is bf16, which NumPy holds only with the ml_dtypes package "
                    "(pip install ml_dtypes); or call the model with torch tensors") from None
    return bits.view(ml_dtypes.bfloat16)


def _as_torch_input(torch: Any, index: int, value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        raise Error(f"input {index} is a {type(value).__name__}: pass torch tensors only, or NumPy arrays only")
    name = str(value.dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise Error(f"input {index} has dtype {value.dtype}: tilefuse takes {', '.join(sorted(_TORCH_DTYPES))}")
    # Host copies for CUDA tensors (see __call__); autograd does not flow through tilefuse.
    return value.detach().to("cpu").contiguous()

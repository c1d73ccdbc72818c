"""tilefuse.bench: a compiled model timed, and onnxruntime beside it in the same process.

A CPU user's comparison is tilefuse against onnxruntime on the same model, inputs, threads and
load; timed in one process, one after the other, neither pays for the other's start-up and both
see the same machine. (On the GPU, bench/model_peers.py times onnxruntime's CUDA provider.)
"""

import os
import statistics
import time
from typing import Any, Dict, Optional, Sequence

import numpy as np

from ._errors import Error
from ._model import compile as _compile

_NUMPY_BY_TILEFUSE = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                      "i8": np.int8, "u8": np.uint8, "bool": np.bool_}


def bench(model: Any, backend: str = "cpu", peers: Sequence[str] = (), warmup: int = 3, repeats: int = 30, seed: int = 0,
          threads: Optional[int] = None) -> Dict[str, Any]:
    """Times ``model`` compiled by tilefuse and, for each name in ``peers``, the same model in
    that peer, on the same seeded random inputs, in this process.

    ``model`` is what :func:`tilefuse.compile` takes. Each is run ``warmup`` times untimed,
    then ``repeats`` times, each run timed alone; the result gives the medians in ms:
    ``{"tilefuse_ms", "backend", "load_before", "threads", "onnxruntime_ms", "onnxruntime_vs_tilefuse"}``
    (the last: onnxruntime's time over tilefuse's, above 1 when tilefuse is faster). ``load_before``
    is the 1-minute load average when timing began: a busy machine slows both.

    The one peer is ``"onnxruntime"`` (CPUExecutionProvider, ``threads`` intra-op threads,
    default this machine's cores, all graph optimisations), for models compiled for the CPU.
    Integer inputs are small non-negative values (valid indices for small gathers); bf16 inputs
    are refused for the peer (NumPy has no bf16 type).
    """
    if repeats < 1 or warmup < 0:
        raise Error(f"bench: repeats must be at least 1 and warmup at least 0 (got {repeats}, {warmup})")
    unknown = [p for p in peers if p != "onnxruntime"]
    if unknown:
        raise Error(f"bench: unknown peer {unknown[0]!r}; the peer timed here is 'onnxruntime'")
    threads = threads or os.cpu_count() or 1
    compiled = _compile(model, backend=backend)
    if peers and compiled.backend != "cpu":
        raise Error(f"bench: onnxruntime is timed here against the CPU backend, and this model runs on {compiled.backend} "
                    "(bench/model_peers.py times onnxruntime's CUDA provider beside `tilefuse bench --backend cuda`)")
    inputs = _random_inputs(compiled.inputs, seed)
    result: Dict[str, Any] = {"backend": compiled.backend, "threads": threads, "load_before": os.getloadavg()[0],
                              "tilefuse_ms": _median_ms(lambda: compiled(*inputs), warmup, repeats)}
    if "onnxruntime" in peers:
        session = _onnxruntime_session(model, threads)
        feeds = {i.name: x for i, x in zip(session.get_inputs(), inputs)}
        result["onnxruntime_ms"] = _median_ms(lambda: session.run(None, feeds), warmup, repeats)
        result["onnxruntime_vs_tilefuse"] = result["onnxruntime_ms"] / result["tilefuse_ms"]
    return result


def _median_ms(run, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _random_inputs(specs, seed: int) -> list:
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in specs:
        dtype = _NUMPY_BY_TILEFUSE.get(spec.dtype)
        if dtype is None:
            raise Error(f"bench: input '{spec.name}' is {spec.dtype}, which NumPy (and so the peers) cannot hold")
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(spec.shape).astype(dtype))
        elif dtype is np.bool_:
            arrays.append(rng.integers(0, 2, spec.shape).astype(np.bool_))
        else:
            arrays.append(rng.integers(0, 2, spec.shape).astype(dtype))
    return arrays


def _onnxruntime_session(model: Any, threads: int):
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise Error("bench: the peer 'onnxruntime' is not installed (pip install onnxruntime)") from e
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(_onnx_bytes_or_path(model), options, providers=["CPUExecutionProvider"])


def _onnx_bytes_or_path(model: Any):
    """What onnxruntime loads: an .onnx path, a backend-test folder's model, a ModelProto's
    bytes, or an .onnxtxt file parsed by onnx (its # comment lines dropped)."""
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model)
    path = os.fspath(model)
    if os.path.isdir(path):
        return os.path.join(path, "model.onnx")
    if path.endswith(".onnxtxt"):
        import onnx.parser
        with open(path) as f:
            text = "\n".join(line for line in f.read().splitlines() if not line.lstrip().startswith("#"))
        return onnx.parser.parse_model(text).SerializeToString()
    return path

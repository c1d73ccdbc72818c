"""The extension's GraphBuilder (what tilefuse.fx builds through), compile_graph, the compile's
stage timings, per-kernel profiles and the CUDA build of a built graph."""

import numpy as np
import pytest

import tilefuse
from tilefuse import _tilefuse
from tilefuse._model import _wrap


def layer_graph(rows=8, width=16):
    """y = gelu(x @ w + b) with w and b constants, as the torch frontend builds a linear layer."""
    rng = np.random.default_rng(3)
    b = _tilefuse.GraphBuilder()
    x = b.parameter("x", "f32", [rows, width])
    w = b.constant(rng.standard_normal((width, 32)).astype(np.float32))
    bias = b.constant(rng.standard_normal(32).astype(np.float32))
    y = b.gelu(b.pointwise("add", [b.matmul(x, w), bias]), False)
    b.output(y, "y")
    return b, rng


def test_a_built_graph_compiles_and_computes_what_numpy_computes():
    b, rng = layer_graph()
    assert b.shape(b.parameter("unused", "f32", [2])) == [2] and b.ok
    model = _wrap(_tilefuse.compile_graph(b.build(), "cpu", False, True, 0), "a built graph")
    x = rng.standard_normal((8, 16)).astype(np.float32)
    # The same weights again, from the seeded generator (drawn before x).
    rng = np.random.default_rng(3)
    w, bias = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    z = x.astype(np.float64) @ w + bias
    from math import erf, sqrt
    expected = z * 0.5 * (1 + np.vectorize(erf)(z / sqrt(2)))
    (y,) = model(x, np.zeros(2, np.float32))
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_the_builder_s_first_error_names_where_it_happened():
    b = _tilefuse.GraphBuilder()
    x = b.parameter("x", "f32", [4, 5])
    b.set_location("FX node 'mm' (aten.mm.default)", "mm")
    b.matmul(x, x)  # 5 columns against 4 rows
    assert not b.ok and "FX node 'mm'" in b.error
    b.pointwise("neg", [x])  # ignored after the first error
    with pytest.raises(tilefuse.Error, match="FX node 'mm'"):
        b.build()
    with pytest.raises(tilefuse.Error, match="no pointwise op 'frobnicate'"):
        bad = _tilefuse.GraphBuilder()
        bad.pointwise("frobnicate", [bad.parameter("x", "f32", [1])])
        bad.build()


def test_compile_stages_and_a_profile_say_where_the_time_goes(tmp_path, monkeypatch):
    # An empty cache folder: a graph compiled before (an earlier run of this test) would come
    # from the compiled-model cache, its passes not run.
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    b, rng = layer_graph()
    model = _wrap(_tilefuse.compile_graph(b.build(), "cpu", False, True, 0), "a built graph")
    stages = model.compile_stages_ms
    names = [name for name, _ in stages]
    passes = [n for n in names if n.startswith("graph passes: ")]  # each pass, then the time between them
    assert {"graph passes: infer", "graph passes: fold-constants", "graph passes: cse", "graph passes: verify"} <= set(passes)
    assert names == passes + ["plan", "lower", "build", "load"], names
    assert all(ms >= 0 for _, ms in stages) and sum(ms for _, ms in stages) <= model.compile_ms + 1e-6
    profile = model.profile(rng.standard_normal((8, 16)).astype(np.float32))
    assert [name for name, _ in profile] == [k.name for k in model.kernels]
    assert all(us > 0 for _, us in profile)


def test_a_built_graph_s_cuda_kernels_compile_through_nvrtc_without_a_gpu():
    b, _ = layer_graph(rows=256, width=64)
    try:
        kernels = _tilefuse.build_graph_for_cuda_arch(b.build(), "sm_90a")
    except tilefuse.Error as error:
        if "NVRTC" in str(error) or "nvrtc" in str(error):
            pytest.skip(f"no NVRTC here: {error}")
        raise
    assert kernels and all(k["spill_bytes"] == 0 for k in kernels), kernels
    assert any(k["kind"] == "gemm" for k in kernels), kernels

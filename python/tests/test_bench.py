"""tilefuse.bench: a compiled model's median time, and onnxruntime's beside it in the same
process (issue 49: the comparison a CPU user makes, in one call). Times are not asserted
against anything (performance lives in the benchmarks), only that each is measured and the
ratio is the two medians' quotient."""

import math

import pytest

import tilefuse
from conftest import REPO

EXAMPLE = REPO / "examples" / "mlp_block.onnxtxt"


def test_times_the_compiled_model_and_says_under_what_load():
    r = tilefuse.bench(str(EXAMPLE), repeats=5, warmup=1)
    assert r["backend"] == "cpu"
    assert r["tilefuse_ms"] > 0 and math.isfinite(r["tilefuse_ms"])
    assert r["load_before"] >= 0
    assert r["threads"] >= 1
    assert "onnxruntime_ms" not in r


def test_wrong_requests_are_errors_naming_the_cause():
    with pytest.raises(tilefuse.Error, match="unknown peer 'tvm'"):
        tilefuse.bench(str(EXAMPLE), peers=["tvm"])
    with pytest.raises(tilefuse.Error, match="repeats must be at least 1"):
        tilefuse.bench(str(EXAMPLE), repeats=0)


@pytest.mark.parametrize("model", [EXAMPLE, REPO / "tests" / "models" / "bert_tiny"], ids=["onnxtxt", "backend-test folder"])
def test_times_onnxruntime_in_the_same_process(model):
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: the peer cannot be timed")
    r = tilefuse.bench(str(model), peers=["onnxruntime"], repeats=5, warmup=1, threads=2)
    assert r["onnxruntime_ms"] > 0 and r["tilefuse_ms"] > 0
    assert r["onnxruntime_vs_tilefuse"] == pytest.approx(r["onnxruntime_ms"] / r["tilefuse_ms"])
    assert r["threads"] == 2

"""bench/zoo.py on the CPU (its smoke-test mode): a row measured in its own process through both of
tilefuse's ways in (torch.compile's FX graph and the ONNX export), each matching eager, the row kept
in the JSON and the table rewritten from it alone."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs it into build/venv)")
pytest.importorskip("torchvision", reason="torchvision is not installed in this Python")
pytest.importorskip("onnx", reason="onnx is not installed in this Python")

from conftest import REPO  # noqa: E402

ZOO = str(REPO / "bench" / "zoo.py")


def zoo(*args):
    done = subprocess.run([sys.executable, ZOO, *args], env=dict(os.environ, HF_HUB_OFFLINE="1"),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_row_through_both_paths_matches_eager_and_the_table_is_rebuilt_from_the_json(tmp_path):
    rows, table = tmp_path / "zoo.json", tmp_path / "zoo.md"
    zoo("--device", "cpu", "--models", "resnet18", "--dtypes", "f32", "--shapes", "1", "--paths", "fx,onnx",
        "--peers", "", "--repeats", "1", "--json", str(rows), "--markdown", str(table))
    [row] = json.loads(rows.read_text())
    assert (row["model"], row["dtype"], row["shape"]) == ("resnet18", "f32", "1x3x224x224")
    for path in ("fx", "onnx"):
        result = row[path]
        assert "failed" not in result, result
        assert result["error_to_eager"] < 1e-4  # f32 on the CPU: eager's result to f32 rounding
        assert result["us"] > 0
        assert sum(result["kernel_modes"].values()) > 0
        assert "reference" not in result["kernel_modes"]  # every group a generated kernel
    first = table.read_text()
    assert "| resnet18 | f32 | 1x3x224x224 |" in first
    table.unlink()
    zoo("--json", str(rows), "--markdown", str(table), "--table-only")
    assert table.read_text() == first


def test_unknown_names_are_refused_before_measuring():
    done = subprocess.run([sys.executable, ZOO, "--models", "resnet19"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "unknown model 'resnet19'" in done.stderr

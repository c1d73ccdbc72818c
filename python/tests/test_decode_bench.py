"""bench/decode.py on the CPU (its smoke-test mode): each mode in its own process writes its row,
the tokens are compared with eager's static cache, and --skip-guards times the compiled modes
under PyTorch's skip_guard_eval_unsafe stance (and only those) without a compile while timed."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs it into build/venv)")
pytest.importorskip("transformers", reason="transformers is not installed in this Python")

from conftest import REPO  # noqa: E402


def test_skip_guards_times_the_compiled_modes_under_the_stance(tmp_path):
    out = tmp_path / "decode.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "decode.py"), "--device", "cpu", "--model", "gpt2-tiny",
                           "--modes", "eager-static,tilefuse", "--prompt", "8", "--new", "8", "--repeats", "1",
                           "--skip-guards", "--json", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["mode"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"eager-static", "tilefuse"}
    assert rows["eager-static"]["guards_skipped"] is False  # eager has no guards to skip
    assert rows["tilefuse"]["guards_skipped"] is True
    assert rows["tilefuse"]["graphs_compiled_while_timed"] == 0  # the stance raises where one would be needed
    assert rows["tilefuse"]["tokens_before_divergence"] == 8  # f32 on the CPU: eager's tokens
    assert rows["tilefuse"]["first_step_logits_error"] < 1e-4
    assert "guards skipped" in done.stdout

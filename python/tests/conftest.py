"""Shared pieces of the Python package's tests: where the repository and the `tilefuse` CLI
are, and running the CLI on the same inputs to compare with what Python returns.

The CLI is $TILEFUSE_CLI, else the one beside the package in a build tree
(BUILD/python/tilefuse -> BUILD/tilefuse); tests that compare with it skip, saying so,
when there is none (a pip-installed package).
"""

import logging
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tilefuse

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.onnxtxt"))


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a GPU and its driver (skipped with a message elsewhere)")


def _find_cli():
    if os.environ.get("TILEFUSE_CLI"):
        return pathlib.Path(os.environ["TILEFUSE_CLI"]).resolve()
    beside = pathlib.Path(tilefuse.__file__).resolve().parents[2] / "tilefuse"
    return beside if beside.is_file() else None


@pytest.fixture(scope="session")
def cli():
    path = _find_cli()
    if path is None or not path.is_file():
        pytest.skip("no tilefuse CLI to compare with (set TILEFUSE_CLI=BUILD/tilefuse)")
    return Cli(path)


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches reset before and after a torch.compile test (the torch test modules use it
    for every test: pytestmark)."""
    import torch
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def logs(caplog):
    """The "tilefuse" logger's records from INFO up."""
    caplog.set_level(logging.INFO, logger="tilefuse")
    return caplog


class Cli:
    def __init__(self, path):
        self.path = path

    def run(self, *args):
        return subprocess.run([str(self.path), *map(str, args)], capture_output=True, text=True, timeout=600)

    def error_message(self, *args):
        """What the CLI prints after "error: " (and that it exits 2)."""
        result = self.run(*args)
        assert result.returncode == 2, result.stdout + result.stderr
        start = result.stderr.find("error: ")  # the message may span lines
        assert start >= 0, result.stderr
        return result.stderr[start + len("error: "):].rstrip("\n")

    def check_outputs(self, model, inputs, outputs, folder, *flags):
        """Runs `tilefuse run MODEL --inputs FOLDER --check --rtol 0 --atol 0` with `outputs`
        as the expected ones: exit 0 only if the CLI computes exactly the same values."""
        write_tensors(folder, inputs, outputs)
        return self.run("run", model, "--inputs", folder, "--check", "--rtol", "0", "--atol", "0", *flags)


def write_tensors(folder, inputs, outputs):
    from onnx import numpy_helper

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, arrays in (("input", inputs), ("output", outputs)):
        for i, array in enumerate(arrays):
            proto = numpy_helper.from_array(np.asarray(array), name=f"{prefix}_{i}")
            (folder / f"{prefix}_{i}.pb").write_bytes(proto.SerializeToString())


_NUMPY_TYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i8": np.int8, "u8": np.uint8, "bool": np.bool_}


def random_inputs(model, seed=0):
    """One random array per input of a compiled model (floats in [-1, 1), integers in [0, 8))."""
    rng = np.random.default_rng(seed)
    arrays = []
    for spec in model.inputs:
        dtype = _NUMPY_TYPES[spec.dtype]
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.uniform(-1, 1, spec.shape).astype(dtype))
        else:
            arrays.append(rng.integers(0, 8, spec.shape).astype(dtype))
    return arrays


def load_data_set(folder):
    """The inputs of a backend-test folder's test_data_set_0, as NumPy arrays."""
    from onnx import TensorProto, numpy_helper

    arrays = []
    paths = (pathlib.Path(folder) / "test_data_set_0").glob("input_*.pb")
    for path in sorted(paths, key=lambda p: int(p.stem.split("_")[1])):
        proto = TensorProto()
        proto.ParseFromString(path.read_bytes())
        arrays.append(numpy_helper.to_array(proto))
    return arrays


def zoo_model(name):
    """A model of the zoo (tests/models/export_models.py) in eval mode, with the inputs its
    export uses: (module, inputs). Skips where transformers is missing."""
    import sys

    import torch

    pytest.importorskip("transformers", reason="the zoo's transformer models come from transformers")
    sys.path.insert(0, str(REPO / "tests" / "models"))
    try:
        import export_models
    finally:
        sys.path.pop(0)
    module = export_models.module_factory(name)().eval()
    inputs = next((ins for zoo_name, _, ins, _ in export_models.zoo() if zoo_name == name), None)
    if inputs is None:  # as export_models.main() exports them
        decoder = name in ("gpt2_2layer", "llama_2layer")
        inputs = (torch.randint(0, 128, (1, 16)),) if decoder else (torch.randn(2, 16, 64),)
    return module, inputs

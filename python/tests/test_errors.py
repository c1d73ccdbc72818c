"""tilefuse.Error carries the message the CLI prints after "error: "."""

import numpy as np
import pytest

import tilefuse
from conftest import REPO, random_inputs, write_tensors

SOFTMAX = REPO / "examples" / "softmax_manual.onnxtxt"


def python_error(call, *args, **kwargs):
    with pytest.raises(tilefuse.Error) as raised:
        call(*args, **kwargs)
    return raised.value


@pytest.mark.parametrize("kind", ["missing", "not onnx", "malformed text", "unsupported op"])
def test_model_errors_are_the_cli_s(kind, cli, tmp_path):
    path = {
        "missing": tmp_path / "missing.onnx",
        "not onnx": tmp_path / "garbage.onnx",
        "malformed text": tmp_path / "broken.onnxtxt",
        "unsupported op": tmp_path / "det.onnxtxt",
    }[kind]
    if kind == "not onnx":
        path.write_bytes(b"\x08\x07this is not a protobuf\xff\xff")
    elif kind == "malformed text":
        path.write_text("<ir_version: 8, opset_import: [\"\" : 17]>\nbroken (float[2] x) => (float[2] y) {\n  y = Relu(x\n}")
    elif kind == "unsupported op":
        path.write_text("<ir_version: 8, opset_import: [\"\" : 17]>\ndet (float[2,2] x) => (float y) {\n  y = Det (x)\n}")
    error = python_error(tilefuse.compile, path)
    assert str(error) == cli.error_message("run", path)
    expected_code = {"missing": "not found", "unsupported op": "unsupported"}.get(kind, "invalid argument")
    assert error.code == expected_code
    assert str(error).startswith(expected_code + ": ")


@pytest.mark.parametrize("wrong", ["shape", "dtype", "count"])
def test_input_errors_are_the_cli_s(wrong, cli, tmp_path):
    model = tilefuse.compile(SOFTMAX)
    (x,) = random_inputs(model)
    given = {"shape": [x[:3]], "dtype": [x.astype(np.float64)], "count": [x, x]}[wrong]
    error = python_error(model, *given)
    # The CLI names the folder the inputs came from where Python says "the call".
    folder = tmp_path / "inputs"
    write_tensors(folder, given, [])
    expected = cli.error_message("run", SOFTMAX, "--inputs", folder).replace(f"'{folder}'", "the call")
    assert str(error) == expected
    assert error.code == "invalid argument"


def test_explain_device_error_is_the_cli_s(cli):
    error = python_error(tilefuse.compile(SOFTMAX).explain, device="a100")
    assert str(error) == cli.error_message("explain", SOFTMAX, "--device", "a100")


def test_errors_the_cli_cannot_meet():
    model = tilefuse.compile(SOFTMAX)
    (x,) = random_inputs(model)
    assert "complex64" in str(python_error(model, x.astype(np.complex64)))
    assert "uint16" in str(python_error(model, x.astype(np.uint16)))  # never read as bfloat16 bits
    assert "list" in str(python_error(model, x.tolist()))
    assert "not one of auto, cuda, cpu, reference" in str(python_error(tilefuse.compile, SOFTMAX, backend="tpu"))
    assert "takes a path" in str(python_error(tilefuse.compile, 42))


def test_the_model_still_runs_after_an_error():
    model = tilefuse.compile(SOFTMAX)
    (x,) = random_inputs(model)
    python_error(model, x[:1])
    np.testing.assert_allclose(model(x)[0].sum(axis=-1), 1, rtol=1e-5)


# device=: 0 (the default) is accepted with every backend, the CPU ones included; another
# ordinal asks for that GPU, which must exist (under auto too) and which cpu refuses.
def test_device_zero_with_the_cpu_backend_compiles_for_the_cpu():
    model = tilefuse.compile(SOFTMAX, backend="cpu", device=0)
    assert model.backend == "cpu" and model.device == 0


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_a_gpu_ordinal_with_a_host_backend_is_the_cli_s_error(backend, cli):
    error = python_error(tilefuse.compile, SOFTMAX, backend=backend, device=1)
    assert error.code == "invalid argument"
    assert "device 1 names a GPU" in str(error)
    assert str(error) == cli.error_message("run", SOFTMAX, "--backend", backend, "--device", "1")


@pytest.mark.parametrize("backend", ["auto", "cuda"])
def test_a_gpu_ordinal_the_machine_lacks_is_the_cli_s_error(backend, cli):
    error = python_error(tilefuse.compile, SOFTMAX, backend=backend, device=4096)
    assert error.code == "not found"
    assert str(error).startswith("not found: there is no GPU 4096: this machine has ")
    assert str(error) == cli.error_message("run", SOFTMAX, "--backend", backend, "--device", "4096")


def test_a_serialized_model_takes_the_device_too():
    error = python_error(tilefuse.compile, b"not a model", backend="cpu", device=2)
    assert "device 2 names a GPU" in str(error)  # the options are checked before the bytes are read

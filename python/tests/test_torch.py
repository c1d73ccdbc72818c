"""CompiledModel called with torch CPU tensors: torch in, torch out, the NumPy path's values."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")

import tilefuse  # noqa: E402  (after torch: registers the torch.compile backend)
from conftest import REPO, random_inputs  # noqa: E402

MLP = REPO / "examples" / "mlp_block.onnxtxt"


def test_torch_in_torch_out_with_the_numpy_path_s_values():
    model = tilefuse.compile(MLP)
    arrays = random_inputs(model, seed=4)
    expected = model(*arrays)
    outputs = model(*[torch.from_numpy(a) for a in arrays])
    assert all(isinstance(o, torch.Tensor) and o.device.type == "cpu" for o in outputs)
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got.numpy(), want)


def test_tensors_that_need_grad_or_are_not_contiguous():
    model = tilefuse.compile(REPO / "examples" / "softmax_manual.onnxtxt")
    (x,) = random_inputs(model, seed=6)
    expected = model(x)[0]
    transposed = torch.from_numpy(np.ascontiguousarray(x.T)).t()
    assert not transposed.is_contiguous()
    np.testing.assert_array_equal(model(transposed)[0].numpy(), expected)
    needs_grad = torch.from_numpy(x).requires_grad_()
    (output,) = model(needs_grad)
    assert not output.requires_grad  # tilefuse is not differentiable; the values are the same
    np.testing.assert_array_equal(output.numpy(), expected)


def test_call_checked_takes_the_device_path_only_after_a_full_check_and_for_dense_inputs(monkeypatch):
    # The GPU's fast path (launch on the inputs' pointers) stubbed on a CPU model: the first call
    # goes the whole way and runs the full check; later calls launch directly when every input is
    # dense, and go the whole way again (which copies them dense) when one is not.
    model = tilefuse.compile(REPO / "examples" / "softmax_manual.onnxtxt", backend="cpu")
    (x,) = random_inputs(model, seed=7)
    dense = torch.from_numpy(x)
    expected = model(dense)[0]
    launched, checked = [], []
    monkeypatch.setattr(model, "_device_runs", True)
    monkeypatch.setattr(model, "_dense_device_pointers", lambda torch, inputs: checked.append(len(inputs)) or [0])
    monkeypatch.setattr(model, "_launch_on_device", lambda torch, pointers, into=None, inputs=(): launched.append(pointers) or ["launched"])
    whole = type(model).__call__
    monkeypatch.setattr(type(model), "__call__", lambda self, *inputs: ["whole"] if self is model else whole(self, *inputs))
    assert model.call_checked([dense]) == ["whole"] and checked == [1] and not launched
    assert model.call_checked([dense]) == ["launched"] and launched == [[dense.data_ptr()]] and checked == [1]
    transposed = torch.from_numpy(np.ascontiguousarray(x.T)).t()
    assert model.call_checked([transposed]) == ["whole"] and len(launched) == 1
    monkeypatch.undo()
    fresh = tilefuse.compile(REPO / "examples" / "softmax_manual.onnxtxt", backend="cpu")
    assert [t.numpy().tolist() for t in fresh.call_checked([dense])] == [expected.numpy().tolist()]  # the CPU: as a call


def test_call_checked_with_fixed_layouts_reads_again_only_the_pointers_that_changed(monkeypatch):
    # A decode step's weights keep their pointers and its token's change: after the second call
    # only the changed inputs are read one by one; a steady input given at a new pointer is
    # caught by the one-pass check and read again, and later read one by one.
    model = tilefuse.compile(REPO / "examples" / "matmul_add_add.onnxtxt", backend="cpu")
    a, b, c, d = (torch.from_numpy(x) for x in random_inputs(model, seed=3))
    launched = []
    monkeypatch.setattr(model, "_device_runs", True)
    monkeypatch.setattr(model, "_dense_device_pointers", lambda torch, inputs: [0] * len(inputs))
    monkeypatch.setattr(model, "_launch_on_device", lambda torch, pointers, into=None, inputs=(): launched.append(list(pointers)) or ["ran"])
    monkeypatch.setattr(type(model), "__call__", lambda self, *inputs: ["whole"])
    read = []

    class Counted(torch.Tensor):  # counts data_ptr() calls in Python
        def data_ptr(self):
            read.append(self.shape)
            return super().data_ptr()

    def counted(x):
        return x.as_subclass(Counted)

    def call(*inputs, fixed=True):
        read.clear()
        return model.call_checked(list(inputs), layouts_fixed=fixed)

    ptrs = lambda *xs: [x.data_ptr() for x in xs]  # noqa: E731
    assert call(a, b, c, d) == ["whole"]  # the full check
    assert call(a, b, c, d) == ["ran"] and launched[-1] == ptrs(a, b, c, d)
    a2 = a.clone()
    assert call(a2, b, c, d) == ["ran"] and launched[-1] == ptrs(a2, b, c, d)  # the steady check failed: all read
    a3 = a.clone()
    expected = ptrs(a3, b, c, d)
    assert call(counted(a3), counted(b), counted(c), counted(d)) == ["ran"] and launched[-1] == expected
    assert read == [a.shape]  # a changed before: read; b, c and d checked in one C++ pass
    for _ in range(2 * type(model._held_pointers).kSettle):  # a stays put: it becomes steady
        call(a3, b, c, d)
    assert call(counted(a3), b, c, d) == ["ran"] and launched[-1] == expected and read == []
    c2 = c.clone()
    assert call(a, b, c2, d) == ["ran"] and launched[-1] == ptrs(a, b, c2, d)
    assert call(a, b, c, d, fixed=False) == ["ran"] and launched[-1] == ptrs(a, b, c, d)
    transposed = torch.from_numpy(np.ascontiguousarray(a.numpy().T)).t()
    assert call(transposed, b, c, d) == ["whole"]  # a changing input: checked for density


def test_outputs_written_into_inputs_come_back_as_those_inputs_and_go_to_the_run_at_their_pointers(monkeypatch):
    # A decode step's cache layers updated in place: the runtime is given each such output at
    # its input's pointer and the call returns the input itself; the other outputs are
    # allocated, in the graph's order among them. The GPU's launch stubbed on a CPU model.
    model = tilefuse.compile(REPO / "examples" / "matmul_add_add.onnxtxt", backend="cpu")
    inputs = [torch.from_numpy(x) for x in random_inputs(model, seed=4)]
    runs = []

    class Graph:  # the runtime's run_device, recorded
        backend, kernels = "cuda", []

        def run_device(self, pointers, outputs, stream):
            runs.append((list(pointers), list(outputs)))

    monkeypatch.setattr(model, "_graph", Graph())
    monkeypatch.setattr(model, "_current_stream", lambda: 0, raising=False)
    allocated = []
    monkeypatch.setattr(model, "_empty_outputs", lambda only=None: [allocated.append(torch.empty(3)) or allocated[-1] for _ in only],
                        raising=False)
    pointers = [x.data_ptr() for x in inputs]
    # Three outputs: 0 and 2 into inputs 3 and 1, output 1 fresh.
    into = tilefuse._model.InPlaceOutputs([(2, 1), (0, 3)], len(inputs), 3)
    assert into.fresh == [1]
    outputs = model._launch_on_device(torch, pointers, into, inputs)
    assert outputs[0] is inputs[3] and outputs[2] is inputs[1] and outputs[1] is allocated[0]
    assert runs == [(pointers, [inputs[3].data_ptr(), allocated[0].data_ptr(), inputs[1].data_ptr()])]
    # One output, in place; and none in place.
    assert tilefuse._model.InPlaceOutputs([(0, 2)], len(inputs), 1).gather(inputs, []) == [inputs[2]]
    fresh = [torch.empty(1), torch.empty(2)]
    assert tilefuse._model.InPlaceOutputs([], len(inputs), 2).gather(inputs, fresh) == fresh


def test_bfloat16(tmp_path):
    path = tmp_path / "bf16.onnxtxt"
    path.write_text('<ir_version: 8, opset_import: ["" : 17]>\n'
                    "bf16 (bfloat16[4,8] x, bfloat16[4,8] y) => (bfloat16[4,8] z) {\n  z = Mul (x, y)\n}")
    model = tilefuse.compile(path)
    x, y = torch.randn(4, 8).bfloat16(), torch.randn(4, 8).bfloat16()
    (z,) = model(x, y)
    assert z.dtype == torch.bfloat16
    torch.testing.assert_close(z, (x.float() * y.float()).bfloat16(), rtol=0, atol=0)
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="NumPy's bfloat16 comes from ml_dtypes")
    (z_numpy,) = model(x.float().numpy().astype(ml_dtypes.bfloat16), y.float().numpy().astype(ml_dtypes.bfloat16))
    assert z_numpy.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(z_numpy.astype(np.float32), z.float().numpy())


def test_numpy_and_torch_do_not_mix():
    model = tilefuse.compile(REPO / "examples" / "matmul_add_add.onnxtxt")
    arrays = random_inputs(model)
    mixed = [torch.from_numpy(arrays[0])] + arrays[1:]
    with pytest.raises(tilefuse.Error, match="torch tensors only"):
        model(*mixed)


def test_unsupported_torch_dtype():
    model = tilefuse.compile(REPO / "examples" / "softmax_manual.onnxtxt")
    (x,) = random_inputs(model)
    with pytest.raises(tilefuse.Error, match="complex64"):
        model(torch.from_numpy(x.astype(np.complex64)))

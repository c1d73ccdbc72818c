"""tilefuse.compile and CompiledModel on NumPy arrays, held to the CLI's own results."""

import json

import numpy as np
import pytest

import tilefuse
from conftest import EXAMPLES, REPO, load_data_set, random_inputs

MLP_BLOCK = REPO / "tests" / "models" / "mlp_block"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_compute_what_the_cli_computes(example, cli, tmp_path):
    model = tilefuse.compile(example)
    inputs = random_inputs(model, seed=1)
    outputs = model(*inputs)
    assert [o.shape for o in outputs] == [spec.shape for spec in model.outputs]
    result = cli.check_outputs(example, inputs, outputs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_cli_comparison_sees_a_one_ulp_difference(cli, tmp_path):
    # The check above would pass vacuously if the CLI ignored the expected outputs.
    example = REPO / "examples" / "softmax_manual.onnxtxt"
    model = tilefuse.compile(example)
    inputs = random_inputs(model, seed=1)
    outputs = model(*inputs)
    outputs[0].flat[7] = np.nextafter(outputs[0].flat[7], np.float32(2))
    result = cli.check_outputs(example, inputs, outputs, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr


def test_precision_is_checked_and_leaves_cpu_models_as_they_are():
    example = REPO / "examples" / "mlp_block.onnxtxt"
    with pytest.raises(tilefuse.Error, match="precision 'tf16' is not one of highest, high"):
        tilefuse.compile(example, backend="cpu", precision="tf16")
    exact, high = (tilefuse.compile(example, backend="cpu", precision=p) for p in ("highest", "high"))
    inputs = random_inputs(exact, seed=2)
    for a, b in zip(exact(*inputs), high(*inputs)):
        np.testing.assert_array_equal(a, b)  # TF32 is a GPU's: the CPU computes f32 either way


def test_background_compile_is_a_gpu_matter_and_leaves_cpu_models_as_they_are():
    # Stand-ins run while slow CUDA kernels compile; the CPU compiles every kernel up front.
    example = REPO / "examples" / "mlp_block.onnxtxt"
    background, upfront = (tilefuse.compile(example, backend="cpu", background_compile=b) for b in (True, False))
    assert background.pending_compiles == 0 and upfront.pending_compiles == 0
    background.finish_compiles()  # nothing to wait for
    inputs = random_inputs(upfront, seed=4)
    for a, b in zip(background(*inputs), upfront(*inputs)):
        np.testing.assert_array_equal(a, b)


def test_run_into_is_for_gpu_models_and_says_so():
    # CompiledModel.run_into writes outputs into given device tensors; a CPU model refuses it
    # with the reason, writing nothing.
    torch = pytest.importorskip("torch", reason="torch is not installed in this Python")
    model = tilefuse.compile(REPO / "examples" / "mlp_block.onnxtxt", backend="cpu")
    inputs = [torch.from_numpy(x) for x in random_inputs(model, seed=5)]
    outputs = [torch.full(tuple(spec.shape), 7.0) for spec in model.outputs]
    with pytest.raises(tilefuse.Error, match="run_into: for models that run on the GPU, given torch tensors; this one runs on cpu"):
        model.run_into(inputs, outputs)
    assert all(bool((o == 7.0).all()) for o in outputs)


def test_a_real_model_folder_computes_what_the_cli_computes(cli, tmp_path):
    model = tilefuse.compile(MLP_BLOCK)
    inputs = load_data_set(MLP_BLOCK)
    outputs = model(*inputs)
    result = cli.check_outputs(MLP_BLOCK, inputs, outputs, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_unfused_and_fused_agree_with_the_cli(cli, tmp_path):
    example = REPO / "examples" / "layernorm_manual.onnxtxt"
    model = tilefuse.compile(example, fuse=False)
    assert len(model.kernels) > len(tilefuse.compile(example).kernels)
    inputs = random_inputs(model, seed=2)
    result = cli.check_outputs(example, inputs, model(*inputs), tmp_path, "--no-fusion")
    assert result.returncode == 0, result.stdout + result.stderr


def test_model_proto_and_bytes_give_the_path_s_outputs():
    onnx = pytest.importorskip("onnx")
    proto = onnx.load(str(MLP_BLOCK / "model.onnx"))
    inputs = load_data_set(MLP_BLOCK)
    expected = tilefuse.compile(MLP_BLOCK)(*inputs)
    for model in (proto, proto.SerializeToString()):
        compiled = tilefuse.compile(model)
        assert compiled.source == "<ModelProto>"
        for got, want in zip(compiled(*inputs), expected):
            np.testing.assert_array_equal(got, want)


def test_explain_is_the_cli_s_json(cli):
    for example in EXAMPLES[:4]:
        expected = json.loads(cli.run("explain", example, "--json").stdout)
        assert tilefuse.compile(example).explain() == expected
    example = REPO / "examples" / "mlp_block.onnxtxt"
    unfused = json.loads(cli.run("explain", example, "--json", "--no-fusion", "--device", "h200").stdout)
    assert tilefuse.compile(example, fuse=False).explain(device="h200") == unfused
    assert unfused != tilefuse.compile(example).explain(device="h200")


def test_kernels_are_the_ones_the_cli_runs(cli):
    example = REPO / "examples" / "mlp_block.onnxtxt"
    report = json.loads(cli.run("run", example, "--json").stdout)
    model = tilefuse.compile(example)
    assert model.backend == report["backend"]
    assert [(k.name, k.kind, k.generated) for k in model.kernels] == [
        (k["name"], k["kind"], k["generated"]) for k in report["kernels"]]
    assert any(k.kind == "gemm" for k in model.kernels)


def test_reference_backend_runs_the_interpreter():
    example = REPO / "examples" / "gelu_manual.onnxtxt"
    reference = tilefuse.compile(example, backend="reference")
    assert reference.backend == "reference" and reference.kernels == []
    cpu = tilefuse.compile(example, backend="cpu")
    inputs = random_inputs(cpu, seed=3)
    np.testing.assert_allclose(cpu(*inputs)[0], reference(*inputs)[0], rtol=1e-5, atol=1e-6)


def test_strict_safe_softmax_attention_runs_as_one_kernel_with_fully_masked_rows_zero():
    # torch.onnx's dynamo exporter guards SDPA with where(isnan(p), 0, p): the first 100 rows
    # see no key and come out 0. strict=True: no group may run on the reference interpreter.
    path = REPO / "tests" / "attention" / "attention_safe_softmax_f32.onnxtxt"
    model = tilefuse.compile(path, backend="cpu", strict=True)
    assert model.warnings == []
    assert [(k.kind, k.generated) for k in model.kernels] == [("attention", True)]
    reference = tilefuse.compile(path, backend="reference")
    inputs = random_inputs(model, seed=5)
    out, expected = model(*inputs)[0], reference(*inputs)[0]
    assert np.all(out[:, :, :100] == 0) and np.all(expected[:, :, :100] == 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_auto_without_a_gpu_says_why_it_runs_on_the_cpu():
    model = tilefuse.compile(REPO / "examples" / "rmsnorm.onnxtxt")
    if model.backend == "cuda":
        pytest.skip("this machine has a GPU")
    assert model.backend == "cpu"
    assert model.backend_note.startswith("cuda backend unavailable, ran on the cpu: ")


def test_dtypes_and_layouts(tmp_path):
    path = tmp_path / "mixed.onnxtxt"
    path.write_text("""<ir_version: 8, opset_import: ["" : 17]>
mixed (float16[2,3] h, int64[2,3] i, bool[2,3] b) => (float16[2,3] sum, int64[2,3] twice, bool[2,3] negated) {
  hi = Cast <to = 10> (i)
  sum = Add (h, hi)
  twice = Add (i, i)
  negated = Not (b)
}""")
    model = tilefuse.compile(path)
    h = np.arange(6, dtype=np.float16).reshape(3, 2).T  # not contiguous
    i = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.array([[True, False, True], [False, False, True]])
    total, twice, negated = model(h, i, b)
    assert (total.dtype, twice.dtype, negated.dtype) == (np.float16, np.int64, np.bool_)
    np.testing.assert_array_equal(total, h + i.astype(np.float16))
    np.testing.assert_array_equal(twice, 2 * i)
    np.testing.assert_array_equal(negated, ~b)


def test_outputs_own_their_memory():
    model = tilefuse.compile(REPO / "examples" / "softmax_manual.onnxtxt")
    inputs = random_inputs(model)
    first = model(*inputs)[0]
    copy = first.copy()
    model(*random_inputs(model, seed=5))  # a second run must not write into the first's outputs
    del model
    np.testing.assert_array_equal(first, copy)


def test_inputs_are_read_in_place_and_an_output_never_aliases_them(tmp_path):
    # Inputs are not copied into tilefuse (a small model's call would be mostly copies); an
    # output that is an input passed through is a copy, and the caller's arrays are left as they were.
    path = tmp_path / "through.onnxtxt"
    path.write_text("""<ir_version: 8, opset_import: ["" : 17]>
through (float[4,8] x, float[4,8] y) => (float[4,8] x, float[4,8] sum) {
  sum = Add (x, y)
}""")
    model = tilefuse.compile(path, backend="cpu")
    x, y = (np.random.default_rng(seed).standard_normal((4, 8)).astype(np.float32) for seed in (1, 2))
    x_before, y_before = x.copy(), y.copy()
    passed, total = model(x, y)
    np.testing.assert_array_equal(total, x + y)
    np.testing.assert_array_equal(passed, x)
    assert not np.shares_memory(passed, x)
    x[:] = 7  # the caller changes its array: the returned one keeps the run's values
    np.testing.assert_array_equal(passed, x_before)
    np.testing.assert_array_equal(y, y_before)
    # a view of a bigger array (a strided one is copied to contiguous first) gives the same
    wide = np.concatenate([x_before, y_before], axis=1)
    np.testing.assert_array_equal(model(wide[:, :8], wide[:, 8:])[1], x_before + y_before)


SYMBOLIC_MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x, float[batch, seq, 8] r) => (float[batch, seq, 8] y)
{
  s = Add (x, r)
  y = Relu (s)
}
"""


def test_symbolic_dims_are_given_by_name_or_taken_from_each_calls_inputs(tmp_path):
    path = tmp_path / "symbolic.onnxtxt"
    path.write_text(SYMBOLIC_MODEL)
    fixed = tilefuse.compile(path, backend="cpu", dims={"batch": 2, "seq": 3})
    assert [spec.shape for spec in fixed.inputs] == [(2, 3, 8), (2, 3, 8)]
    with pytest.raises(tilefuse.Error, match="symbolic dim 1 \\('seq'\\): give its value"):
        tilefuse.compile(path, backend="cpu", dims={"batch": 2})

    model = tilefuse.compile(path, backend="cpu")
    assert isinstance(model, tilefuse.SpecializingModel)
    rng = np.random.default_rng(0)
    for shape in [(2, 3, 8), (4, 1, 8), (2, 3, 8)]:
        x, r = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
        np.testing.assert_array_equal(model(x, r)[0], np.maximum(x + r, 0))
    assert sorted(model.compiled) == [(("batch", 2), ("seq", 3)), (("batch", 4), ("seq", 1))]  # the repeat compiled nothing
    assert model.compiles == 2
    with pytest.raises(tilefuse.Error, match="symbolic dim 'seq' is 3 by an earlier input and 4 by input 'r' dim 1"):
        model(np.zeros((2, 3, 8), np.float32), np.zeros((2, 4, 8), np.float32))


def test_dims_given_as_ranges_compile_at_the_typical_values_and_refuse_calls_outside(tmp_path):
    path = tmp_path / "symbolic.onnxtxt"
    path.write_text(SYMBOLIC_MODEL)
    model = tilefuse.compile(path, backend="cpu", dims={"batch": 2, "seq": (1, 6, 64)})
    assert isinstance(model, tilefuse.SpecializingModel)
    assert list(model.compiled) == [(("batch", 2), ("seq", 6))] and model.compiles == 1  # compiled at the typical value
    rng = np.random.default_rng(2)
    x, r = (rng.standard_normal((2, 40, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(model(x, r)[0], np.maximum(x + r, 0))
    plan_reused = [stage for stage, _ in model.compiled[(("batch", 2), ("seq", 40))].compile_stages_ms
                   if stage.startswith("plan of an earlier binding")]
    assert plan_reused or any(stage.startswith("compiled-model cache") for stage, _ in
                              model.compiled[(("batch", 2), ("seq", 40))].compile_stages_ms)
    with pytest.raises(tilefuse.Error, match="symbolic dim 'seq' is 65 in the inputs given, outside its range 1..64"):
        model(np.zeros((2, 65, 8), np.float32), np.zeros((2, 65, 8), np.float32))
    with pytest.raises(tilefuse.Error, match="symbolic dim 'batch' is 3 in the inputs given, but 2 by dims="):
        model(np.zeros((3, 5, 8), np.float32), np.zeros((3, 5, 8), np.float32))
    # (min, max): typical is max; malformed ranges and unknown names are refused.
    assert list(tilefuse.compile(path, backend="cpu", dims={"batch": (1, 4), "seq": 3}).compiled) == [(("batch", 4), ("seq", 3))]
    with pytest.raises(tilefuse.Error, match="not a range: min <= typical <= max"):
        tilefuse.compile(path, backend="cpu", dims={"seq": (9, 2)})
    with pytest.raises(tilefuse.Error, match="not \\(min, max\\) or \\(min, typical, max\\)"):
        tilefuse.compile(path, backend="cpu", dims={"seq": (1, 2, 3, 4)})
    with pytest.raises(tilefuse.Error, match="dims \\['width'\\] given, but the model's symbolic dims are"):
        tilefuse.compile(path, backend="cpu", dims={"width": (1, 2)})


def test_a_specializing_model_reads_its_file_once(tmp_path):
    # A decode loop compiles a binding per new past length: the weights are decoded on the first
    # compile and shared after it, the file never read again (GPT-2 small: ~2 s a compile before).
    path = tmp_path / "weighted.onnxtxt"
    path.write_text(SYMBOLIC_MODEL.replace("s = Add (x, r)", "w = Constant <value = float[8] {1, 2, 3, 4, 5, 6, 7, 8}> ()\n"
                                           "  t = Add (x, r)\n  s = Mul (t, w)"))
    model = tilefuse.compile(path, backend="cpu")
    rng = np.random.default_rng(1)
    w = np.arange(1, 9, dtype=np.float32)
    x, r = (rng.standard_normal((2, 3, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(model(x, r)[0], np.maximum((x + r) * w, 0), rtol=1e-6)
    assert [stage for stage, _ in model.compiled[(("batch", 2), ("seq", 3))].compile_stages_ms][0] == "import"
    path.unlink()
    x, r = (rng.standard_normal((1, 5, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(model(x, r)[0], np.maximum((x + r) * w, 0), rtol=1e-6)
    assert len(model.compiled) == 2
    # Bindings are kept while their intermediates fit: past the budget the least recent go (this
    # model has no intermediates: a budget below nothing keeps the newest only).
    model.max_arena_bytes = -1
    model(*(np.zeros((3, 4, 8), np.float32) for _ in range(2)))
    assert list(model.compiled) == [(("batch", 3), ("seq", 4))] and model.compiles == 3

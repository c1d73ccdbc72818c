"""The CUDA backend from Python (marked `cuda`; each test skips, saying why, without a GPU).

`pytest -m cuda python/tests` runs only these. CUDA tensors on device 0 given to a model that
runs as one CUDA graph stay on the device (run on PyTorch's current stream); others go through
host copies.
"""

import logging

import numpy as np
import pytest

import tilefuse
from conftest import EXAMPLES, REPO, random_inputs

pytestmark = pytest.mark.cuda


def compile_for_cuda(path, **options):
    try:
        return tilefuse.compile(path, backend="cuda", **options)
    except tilefuse.Error as error:
        if error.code == "not found":  # no driver, no GPU or no NVRTC
            pytest.skip(f"no usable GPU: {error}")
        raise


def residual_linear(torch):
    """A linear layer of 512 features with a residual: one GEMM group with its epilogue."""

    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(512, 512)

        def forward(self, x):
            return self.linear(x) + x

    return Residual()


def cuda_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed in this Python")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_on_the_gpu_match_the_cpu(example):
    gpu = compile_for_cuda(example)
    assert gpu.backend == "cuda" and gpu.kernels
    cpu = tilefuse.compile(example, backend="cpu")
    inputs = random_inputs(cpu, seed=7)
    for got, want in zip(gpu(*inputs), cpu(*inputs)):
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_cuda_tensors_come_back_on_their_device():
    torch = cuda_torch()
    example = REPO / "examples" / "mlp_block.onnxtxt"
    model = compile_for_cuda(example)
    arrays = random_inputs(model, seed=8)
    expected = model(*arrays)
    outputs = model(*[torch.from_numpy(a).cuda() for a in arrays])
    for got, want in zip(outputs, expected):
        assert got.device.type == "cuda" and got.dtype == torch.float32
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_torch_compile_of_a_cuda_module(caplog):
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    caplog.set_level(logging.INFO, logger="tilefuse")
    torch._dynamo.reset()
    block = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.LayerNorm(128)).cuda().eval()
    x = torch.randn(16, 64, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(block, backend="tilefuse")(x), block(x), rtol=1e-4, atol=1e-4)
    assert "compiled a torch.compile graph" in caplog.text and "on cuda" in caplog.text, caplog.text
    assert "in PyTorch" not in caplog.text, caplog.text


def test_dynamic_shapes_compile_no_kernel_after_the_first(caplog):
    # torch.compile(dynamic=True): each new sequence length is a new specialization of the
    # graph, but its kernels print the sizes over Dynamo's symbols, so the second and third
    # find every kernel in the cache (a norm, GELU and a residual: loop kernels over batch · seq).
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    caplog.set_level(logging.INFO, logger="tilefuse")
    torch._dynamo.reset()
    block = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.GELU(), torch.nn.LayerNorm(256)).cuda().eval()
    compiled = torch.compile(block, backend="tilefuse", dynamic=True)
    with torch.no_grad():
        for seq in (100, 317, 1024):
            x = torch.randn(4, seq, 256, device="cuda")
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-4, atol=1e-4)
    graph = tilefuse.torch_backend._live_graphs()[-1]
    made = [s for s in graph.compiled.values() if s is not None]
    assert len(made) == 3, caplog.text
    assert all(s.symbols for s in made), caplog.text
    assert [s.jit_compiles for s in made[1:]] == [0, 0], caplog.text


def test_device_run_on_a_side_stream_matches_the_host_run():
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    assert model._graph.device_runs, "a generated-kernel model is captured as one CUDA graph"
    arrays = random_inputs(model, seed=9)
    expected = model(*arrays)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        inputs = [torch.from_numpy(a).cuda() for a in arrays]
        outputs = model(*inputs)
    stream.synchronize()
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_device_runs_on_the_same_pointers_replay_a_captured_graph():
    # New pointers: the kernels one by one; seen again: captured, then replayed (one launch).
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    arrays = random_inputs(model, seed=4)
    expected = model(*arrays)
    inputs = [torch.from_numpy(a).cuda() for a in arrays]
    outputs = [torch.empty_like(torch.from_numpy(e)).cuda() for e in expected]
    before = model.device_run_counts  # a compile may share its runtime with an earlier test's
    for _ in range(4):
        model._graph.run_device([x.data_ptr() for x in inputs], [o.data_ptr() for o in outputs],
                                torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    counts = {k: v - before[k] for k, v in model.device_run_counts.items()}
    # The first run is one by one, or (pointers an earlier run of this model had) captured.
    assert counts["one_by_one"] + counts["replays"] == 4 and counts["captures"] == 1 and counts["replays"] >= 3, counts
    assert counts["through_buffers"] == 0, counts
    for got, want in zip(outputs, expected):
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_fresh_small_tensors_every_call_are_staged_and_the_graph_replays():
    # A decode step's token ids and logits are new tensors every call: after their pointers
    # changed twice, they are copied in and out of the model's own buffers (one launch each
    # way) so that the graph captured on the other pointers replays. Every call's outputs must
    # be its own inputs' results.
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    before = model.device_run_counts
    for call in range(8):
        arrays = random_inputs(model, seed=20 + call)
        expected = model(*arrays)
        inputs = [torch.from_numpy(a).cuda() for a in arrays]
        keep = [torch.empty(1, device="cuda") for _ in range(call % 3)]  # shifts the allocator's next blocks
        outputs = model(*inputs)
        for got, want in zip(outputs, expected):
            np.testing.assert_array_equal(got.cpu().numpy(), want)
        del keep
    counts = {k: v - before[k] for k, v in model.device_run_counts.items()}
    assert counts["staged_copies"] > 0 and counts["replays"] >= 4, counts
    assert counts["through_buffers"] == 0, counts


def test_inputs_new_once_a_generation_are_read_where_they_lie_not_staged():
    # A decode loop's shape: x and the output are new every call (staged after two calls in a
    # row), scale and bias new once a "generation" of 6 calls, as a static KV cache is. These
    # stay unstaged (read in place, the captured graph updated once a generation): a call
    # stages two copies at most, and each generation replays.
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    before = model.device_run_counts
    calls = 0
    for generation in range(4):
        arrays = random_inputs(model, seed=40 + generation)
        _, scale, bias = [torch.from_numpy(a).cuda() for a in arrays]
        for step in range(6):
            x = torch.from_numpy(random_inputs(model, seed=100 * generation + step)[0]).cuda()
            keep = [torch.empty(256, device="cuda") for _ in range(step % 2)]  # x and y's pointers move
            expected = model(x.cpu().numpy(), arrays[1], arrays[2])[0]
            y = torch.empty_like(x)
            model._graph.run_device([x.data_ptr(), scale.data_ptr(), bias.data_ptr()], [y.data_ptr()],
                                    torch.cuda.current_stream().cuda_stream)
            np.testing.assert_array_equal(y.cpu().numpy(), expected)
            calls += 1
            del keep
    counts = {k: v - before[k] for k, v in model.device_run_counts.items()}
    assert 0 < counts["staged_copies"] <= 2 * calls, counts
    assert counts["replays"] >= 4 * 3, counts
    assert counts["through_buffers"] == 0, counts


def test_an_output_given_an_input_it_may_not_overwrite_is_copied_there_after_the_run():
    # Layer normalization into its own input's memory: each row is read whole before any of it
    # is written, in the same kernel, so the run may not write there directly; it writes its
    # own buffer and copies the result into the input after (a counter a kernel launched with
    # its increment reads). Run often enough to be captured and replayed.
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    assert not model.output_may_overwrite_input(0, 0)
    arrays = random_inputs(model, seed=12)
    expected = model(*arrays)[0]
    before = model.device_run_counts
    for _ in range(4):
        x, scale, bias = [torch.from_numpy(a).cuda() for a in arrays]
        model._graph.run_device([x.data_ptr(), scale.data_ptr(), bias.data_ptr()], [x.data_ptr()],
                                torch.cuda.current_stream().cuda_stream)
        np.testing.assert_array_equal(x.cpu().numpy(), expected)
    counts = {k: v - before[k] for k, v in model.device_run_counts.items()}
    assert counts["output_copies"] == 4 and counts["through_buffers"] == 0, counts


def test_cpu_tensors_beside_cuda_ones_are_uploaded_not_sent_through_the_host():
    # A static KV cache's counters start as CPU scalars beside CUDA tensors: the call runs on
    # the device (the CPU tensors uploaded), its outputs on the GPU, not a host round trip.
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    arrays = random_inputs(model, seed=31)
    expected = model(*arrays)
    inputs = [torch.from_numpy(a) for a in arrays]
    inputs[0] = inputs[0].cuda()
    before = model.device_run_counts
    outputs = model(*inputs)
    counts = {k: v - before[k] for k, v in model.device_run_counts.items()}
    assert counts["one_by_one"] + counts["replays"] == 1, counts
    for got, want in zip(outputs, expected):
        assert got.is_cuda
        np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_device_run_with_a_wrong_shape_is_an_error():
    torch = cuda_torch()
    model = compile_for_cuda(REPO / "examples" / "layernorm_manual.onnxtxt")
    wrong = [torch.zeros([s + 1 for s in spec.shape], dtype=torch.float32, device="cuda") for spec in model.inputs]
    with pytest.raises(tilefuse.Error, match="expects"):
        model(*wrong)


def test_strided_cuda_inputs_of_one_size_each_read_their_own_values(tmp_path):
    # Each strided input is copied dense before the run; the copies must live until the run is
    # queued (freed earlier, the second copy took the first one's block: both inputs read b).
    torch = cuda_torch()
    path = tmp_path / "sub.onnxtxt"
    path.write_text('<\n  ir_version: 8,\n  opset_import: ["" : 17]\n>\n'
                    "g (float[64,48] a, float[64,48] b) => (float[64,48] y)\n{\n  y = Sub (a, b)\n}\n")
    model = compile_for_cuda(path)
    a = torch.randn(48, 64, device="cuda").t()
    b = torch.randn(48, 64, device="cuda").t()
    assert not a.is_contiguous() and not b.is_contiguous()
    for _ in range(3):
        (y,) = model(a, b)
        torch.testing.assert_close(y, a - b, rtol=0, atol=0)


def test_backward_graphs_on_the_gpu_give_eager_s_gradients(caplog):
    # Two attention layers save two same-sized strided keys for the backward (the inputs the
    # freed dense copies mixed up): every gradient against eager's.
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    class Attention(torch.nn.Module):
        def __init__(self, d=64, heads=2):
            super().__init__()
            self.heads, self.qkv, self.out = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.norm = torch.nn.LayerNorm(d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm(x)).split(d, dim=2)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            scores = (q @ k.transpose(-1, -2)) / (d // self.heads) ** 0.5
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            y = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
            return x + self.out(y.transpose(1, 2).reshape(b, t, d))

    caplog.set_level(logging.INFO, logger="tilefuse")
    torch._dynamo.reset()
    torch.manual_seed(3)
    model = torch.nn.Sequential(Attention(), Attention()).cuda()
    twin = torch.nn.Sequential(Attention(), Attention()).cuda()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(2, 32, 64, device="cuda")
    compiled = torch.compile(model, backend="tilefuse", options={"backward": "tilefuse"})
    out, expected = compiled(x), twin(x)
    projection = torch.randn_like(out)
    (out * projection).sum().backward()
    (expected * projection).sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4 * q.grad.abs().max().item(), msg=name)
    assert "backward graph runs in PyTorch" not in caplog.text, caplog.text
    assert caplog.text.count("compiled a torch.compile graph") >= 2, "the forward and the backward:\n" + caplog.text


def test_f32_linear_layers_run_as_template_kernels_tf32_or_3xtf32(tmp_path):
    # A linear layer with its weight as an initializer, as exports carry it: the product and its
    # residual are one GEMM template kernel, TF32 under precision="high", its output held to
    # TF32's rounding (10 mantissa bits, K = 768 sums), and 3xTF32 under "highest", held to f32's.
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    weight = (rng.standard_normal((768, 1024)) / np.sqrt(768)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "r"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2048, 768]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [2048, 1024])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2048, 1024])], [numpy_helper.from_array(weight, "W")])
    path = tmp_path / "linear.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    x = rng.standard_normal((2048, 768)).astype(np.float32)
    r = rng.standard_normal((2048, 1024)).astype(np.float32)
    expected = x.astype(np.float64) @ weight.astype(np.float64) + r
    for precision, tolerance, form in (("high", 5e-3, " TF32"), ("highest", 1e-5, " 3xTF32")):
        model = compile_for_cuda(path, precision=precision)
        gemms = [k for k in model.kernels if k.kind == "gemm"]
        assert [k.mode for k in gemms] == ["gemm template"] and form in gemms[0].strategy, model.kernels
        got = model(x, r)[0]
        error = np.linalg.norm(got - expected) / np.linalg.norm(expected)
        assert error < tolerance, (precision, error)


def test_a_slow_kernel_runs_its_stand_in_until_its_background_compile_ends(tmp_path, monkeypatch):
    # An empty kernel cache: the GEMM's overlapped epilogue (seconds of NVRTC) compiles in the
    # background while its ping-pong stand-in answers the first calls; finish_compiles swaps it
    # in. Both agree with the CPU backend to f16's rounding.
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "gemm.onnxtxt"
    path.write_text("""<ir_version: 8, opset_import: ["" : 17]>
g (float16[2048,256] x, float16[256,4096] w, float16[4096] b) => (float16[2048,4096] y)
{
  p = MatMul (x, w)
  s = Add (p, b)
  y = Relu (s)
}
""")
    model = compile_for_cuda(path)
    gemm = lambda: [k.strategy for k in model.kernels if k.mode == "gemm template"]
    assert model.pending_compiles == 1, gemm()
    assert "ping-pong" in gemm()[0]
    inputs = random_inputs(model, seed=9)
    first = model(*inputs)[0].astype(np.float32)  # at once: the own form takes seconds to compile
    assert "ping-pong" in gemm()[0], "the stand-in ran"
    want = tilefuse.compile(path, backend="cpu")(*inputs)[0].astype(np.float32)
    model.finish_compiles()
    assert model.pending_compiles == 0
    assert "epilogue overlapping" in gemm()[0], gemm()
    second = model(*inputs)[0].astype(np.float32)
    scale = float(np.abs(want).max())
    for got in (first, second):
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * scale)


def test_torch_compile_follows_pytorchs_tf32_setting(caplog):
    # A linear layer's product and residual run as one GEMM template kernel: TF32 under
    # torch.set_float32_matmul_precision("high"), matching PyTorch's own TF32 result; 3xTF32
    # under "highest", within f32's error (which TF32's rounding misses).
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    torch.manual_seed(0)
    block = residual_linear(torch).cuda().eval()
    x = torch.randn(4096, 512, device="cuda")
    before = torch.get_float32_matmul_precision()
    try:
        for precision, mode, tolerance in (("high", "gemm template", 5e-3), ("highest", "gemm template", 1e-5)):
            torch.set_float32_matmul_precision(precision)
            torch._dynamo.reset()
            with torch.no_grad():
                got = torch.compile(block, backend="tilefuse")(x)
                want = block.double()(x.double()).float()
                block.float()
            error = ((got - want).norm() / want.norm()).item()
            assert error < tolerance, (precision, error)
            # The graph just compiled (explain() lists every graph still alive in the process: an
            # earlier compile's, not yet collected, held the other mode's kernels).
            modes = [m for c in tilefuse.torch_backend.explain()[-1]["compiled"] for m in c["kernel_modes"]]
            assert mode in modes and (mode == "gemm") == ("gemm template" not in modes), (precision, modes)
    finally:
        torch.set_float32_matmul_precision(before)


def test_torch_compile_gemm_option_picks_how_products_run():
    # options={"gemm": ...} as the CLI's --gemm: a bf16 linear layer with a residual runs as the
    # GEMM template or as cuBLASLt plus an epilogue kernel, both matching eager.
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    torch.manual_seed(0)
    block = residual_linear(torch).cuda().to(torch.bfloat16).eval()
    x = torch.randn(4096, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        want = block(x).float()
        for gemm, mode in (("template", "gemm template"), ("library", "gemm")):
            torch._dynamo.reset()
            got = torch.compile(block, backend="tilefuse", options={"gemm": gemm})(x).float()
            assert ((got - want).abs().max() / want.abs().max()).item() < 2e-2, gemm
            # The graph just compiled (explain() lists every graph still alive in the process: an
            # earlier compile's, not yet collected, held the other mode's kernels).
            modes = [m for c in tilefuse.torch_backend.explain()[-1]["compiled"] for m in c["kernel_modes"]]
            assert mode in modes and (mode == "gemm") == ("gemm template" not in modes), (gemm, modes)


def test_an_lm_head_over_an_unaligned_vocabulary_writes_padded_logits_by_tma():
    # GPT-2's head over 50257 words (here 1029): the logits come back as a strided view of rows
    # padded to 16-byte units (translator._padded_columns), as TorchInductor returns them, from
    # one GEMM template kernel that reads the weight as it lies (no padded copy of it).
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    torch.manual_seed(0)
    head = torch.nn.Linear(256, 1029, bias=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(2, 300, 256, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(head, backend="tilefuse")(x)
        want = x.double() @ head.weight.double().t()
    assert got.shape == (2, 300, 1029) and got.stride() == (300 * 1032, 1032, 1), got.stride()
    assert ((got.double() - want).abs().max() / want.abs().max()).item() < 2e-2
    modes = [m for c in tilefuse.torch_backend.explain()[-1]["compiled"] for m in c["kernel_modes"]]
    assert modes == ["gemm template"], modes


def test_a_bert_style_attention_runs_whole_on_the_attention_template():
    # bf16 attention with an f32 additive mask (transformers' BERT): PyTorch's tracing would
    # write it out as f32 math; kept whole (tilefuse.fx.whole_attention) it is one template kernel.
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)
    import torch.nn.functional as F

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 12, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mask = torch.zeros(2, 1, 128, 128, device="cuda")
    mask[0, :, :, 100:] = float("-inf")
    attention = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(attention, backend="tilefuse")(q, k, v, mask).float()
        want = attention(q.float(), k.float(), v.float(), mask)
    assert ((got - want).abs().max() / want.abs().max()).item() < 2e-2
    # The newest graph only: earlier tests' graphs may still be alive.
    modes = [m for c in tilefuse.torch_backend.explain()[-1]["compiled"] for m in c["kernel_modes"]]
    assert modes == ["attention template"], modes


def test_the_chunked_loss_writes_its_gradient_over_the_logits_and_matches_eager():
    # tilefuse.fx.linear_cross_entropy on the GPU: the row kernel's strategy lets it write the
    # logits' gradient over them (one chunk-sized buffer); the loss and the gradients of h and W
    # against f32 autograd through F.linear and F.cross_entropy, over ragged chunks.
    torch = cuda_torch()
    from tilefuse.fx import linear_cross_entropy as lce
    import torch.nn.functional as F

    torch.manual_seed(0)
    h = torch.randn(700, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(5003, 256, device="cuda") / 16).bfloat16().requires_grad_()
    target = torch.randint(0, 5003, (700,), device="cuda")
    target[::9] = -100
    loss = lce.linear_cross_entropy(h, weight, target, chunk_rows=256)
    grads = torch.autograd.grad(loss, (h, weight))
    h32, w32 = h.detach().float().requires_grad_(), weight.detach().float().requires_grad_()
    want = F.cross_entropy(F.linear(h32, w32), target)
    want_grads = torch.autograd.grad(want, (h32, w32))
    assert abs(loss.item() - want.item()) < 1e-2 * abs(want.item())
    for got, expected in zip(grads, want_grads):
        assert torch.isfinite(got).all()
        assert ((got.float() - expected).abs().max() / expected.abs().max()).item() < 3e-2
    in_place = [entry[1] for key, entry in lce._loss_kernel(-100).compiled.items() if key[2].type == "cuda"]
    assert in_place and all(in_place), "the row kernel's gradient was not written over the logits"


@pytest.mark.parametrize("kv_heads", [12, 4], ids=["mha", "gqa"])
def test_a_training_steps_attention_backward_runs_on_the_template(kv_heads):
    # A causal self-attention's training step through torch.compile: PyTorch's attention backward
    # op (cuDNN's or FlashAttention's) becomes nodes of the backward graph, which the attention
    # backward template runs (the graph not split); the forward's call, whose logsumexp the backward
    # reads, runs on the forward template, which writes it (that graph not split either); the
    # output and the gradients of Q, K and V against f32 autograd.
    torch = cuda_torch()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)
    import torch.nn.functional as F

    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != 12)

    torch.manual_seed(0)
    q = torch.randn(2, 12, 300, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, kv_heads, 300, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.randn(2, 12, 300, 64, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    out = torch.compile(attention, backend="tilefuse")(q, k, v)
    got = torch.autograd.grad(out, (q, k, v), dout)
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    want_out = attention(*ref)
    assert ((out.float() - want_out).abs().max() / want_out.abs().max()).item() < 2e-2
    want = torch.autograd.grad(want_out, ref, dout.float())
    for g, w in zip(got, want):
        assert torch.isfinite(g).all()
        assert ((g.float() - w).abs().max() / w.abs().max()).item() < 3e-2
    forward, backward = tilefuse.torch_backend.explain()[-2:]  # compiled last, both whole: no part in PyTorch
    assert not forward["split"] and not forward["in_pytorch"], forward["in_pytorch"]
    assert any(mode == "attention template" for c in forward["compiled"] for mode in c["kernel_modes"]), forward
    assert not backward["split"] and not backward["in_pytorch"], backward["in_pytorch"]
    assert any(mode == "attention backward template" for c in backward["compiled"] for mode in c["kernel_modes"]), backward


def _cache_update_then_decode_attention(position_value, fused_qkv, position_constant=False):
    """A decode step's attention over K/V caches updated at `position` (index_copy_ as traced: the
    key index compared with the position at the caches' shape), the updated caches returned; f16,
    4 heads, 64 keys of 64 dims. `fused_qkv`: q and the new rows are views of one [1, 1, 768]
    product output (GPT-2's c_attn split into heads), else parameters of their own;
    `position_constant`: the position a constant of the graph (as Dynamo specializes one), not an
    input. The built graph, and its inputs (the position given)."""
    from tilefuse import _tilefuse
    cache, row = [1, 4, 64, 64], [1, 4, 1, 64]
    b = _tilefuse.GraphBuilder()
    k_cache, v_cache = b.parameter("k_cache", "f16", cache), b.parameter("v_cache", "f16", cache)
    if fused_qkv:
        qkv = b.parameter("qkv", "f16", [1, 1, 768])
        q, k_row, v_row = [b.transpose(b.reshape(part, [1, 1, 4, 64]), [0, 2, 1, 3]) for part in b.split(qkv, 2, [256, 256, 256])]
    else:
        k_row, v_row = b.parameter("k_row", "f16", row), b.parameter("v_row", "f16", row)
    position_array = np.array([position_value], dtype=np.int64)
    position = b.constant(position_array) if position_constant else b.parameter("position", "i64", [1])
    if not fused_qkv:
        q = b.parameter("q", "f16", row)
    hit = b.pointwise("equal", [b.iota(cache, 2, "i64"), b.broadcast_to(b.reshape(position, [1, 1, 1, 1]), cache)])
    k = b.pointwise("where", [hit, b.broadcast_to(k_row, cache), k_cache])
    v = b.pointwise("where", [hit, b.broadcast_to(v_row, cache), v_cache])
    scores = b.pointwise("mul", [b.matmul(q, b.transpose(k, [0, 1, 3, 2])), b.broadcast_to(b.scalar(0.125, "f16"), [1, 4, 1, 64])])
    b.output(b.matmul(b.softmax(scores, -1), v), "out")
    b.output(k, "k_updated")
    b.output(v, "v_updated")
    rng = np.random.default_rng(7)
    shapes = [cache, cache, [1, 1, 768]] if fused_qkv else [cache, cache, row, row]
    arrays = [rng.standard_normal(shape).astype(np.float16) for shape in shapes]
    if not position_constant:
        arrays.append(position_array)
    if not fused_qkv:
        arrays.append(rng.standard_normal(row).astype(np.float16))
    return b.build(), arrays


@pytest.mark.parametrize("fused_qkv", [False, True])
@pytest.mark.parametrize("fold", ["1", "0"])
def test_a_cache_update_folded_into_the_decode_attention_matches_the_reference(fold, fused_qkv, monkeypatch):
    # TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1: the decode attention writes the new rows into the
    # caches itself (the update's kernel gone). Against the reference interpreter: the output,
    # and both caches (the position's row replaced, every other row as it was), fresh outputs
    # each run and again through the captured graph.
    from tilefuse import _tilefuse
    from tilefuse._model import _wrap
    monkeypatch.setenv("TILEFUSE_CACHE_UPDATE_IN_ATTENTION", fold)
    graph, arrays = _cache_update_then_decode_attention(37, fused_qkv)
    expected = _wrap(_tilefuse.compile_graph(graph, "reference", False, True, 0), "the fold's graph")(*arrays)
    try:
        model = _wrap(_tilefuse.compile_graph(_cache_update_then_decode_attention(37, fused_qkv)[0], "cuda", False, True, 0), "the fold's graph")
    except tilefuse.Error as error:
        if error.code == "not found":
            pytest.skip(f"no usable GPU: {error}")
        raise
    attention = [k for k in model.kernels if k.mode == "attention template"]
    assert len(attention) == 1 and ("new key and value written" in attention[0].strategy) == (fold == "1"), model.kernels
    for _ in range(3):
        got = model(*arrays)
        np.testing.assert_allclose(np.asarray(got[0], np.float32), np.asarray(expected[0], np.float32), rtol=2e-2, atol=2e-3)
        for cache in (1, 2):
            np.testing.assert_array_equal(np.asarray(got[cache]), np.asarray(expected[cache]), err_msg=f"output {cache}")


def test_the_cache_update_folds_where_the_position_is_read_at_run_time(monkeypatch):
    # Lowered for sm_90a (NVRTC, no GPU). The folded attention reads the position from memory at
    # every run; a position the graph holds as a constant (as where Dynamo specializes a step's
    # cache_position) is compared as one, which the fold's matcher does not take: the update
    # keeps its kernel there.
    from tilefuse import _tilefuse
    monkeypatch.setenv("TILEFUSE_CACHE_UPDATE_IN_ATTENTION", "1")
    for constant in (False, True):
        graph, _ = _cache_update_then_decode_attention(37, fused_qkv=True, position_constant=constant)
        try:
            kernels = _tilefuse.build_graph_for_cuda_arch(graph, "sm_90a")
        except tilefuse.Error as error:
            pytest.skip(f"no NVRTC: {error}")
        attention = [k for k in kernels if k["mode"] == "attention template"]
        assert len(attention) == 1, kernels
        assert ("new key and value written" in attention[0]["strategy"]) == (not constant), kernels
        assert len(kernels) == (2 if constant else 1), [k["name"] for k in kernels]

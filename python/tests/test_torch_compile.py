"""torch.compile(module, backend="tilefuse"): matches eager, recompiles per shape, splits the graph
around ops with no mapping, and falls back to PyTorch with a logged reason where tilefuse cannot
take the graph."""

import importlib.metadata
import logging

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")

import tilefuse.torch_backend  # noqa: E402  (registers the backend; pip-installed, its entry point does)
from conftest import zoo_model  # noqa: E402

COMPILED = "compiled a torch.compile graph"
FELL_BACK = "running a torch.compile graph in PyTorch"


# Dynamo reset around each test, and the "tilefuse" logger captured: conftest.py.
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def messages(logs, text, level=None):
    return [r.getMessage() for r in logs.records
            if r.name == "tilefuse" and text in r.getMessage() and (level is None or r.levelno == level)]


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x):
        return self.norm(torch.nn.functional.gelu(self.linear(x))) + x.sum(-1, keepdim=True)


def test_a_small_module_matches_eager_and_recompiles_per_shape(logs):
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse")
    with torch.no_grad():
        for rows in (4, 9, 11, 9, 11):
            x = torch.randn(rows, 32)
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    # Dynamo's static graph for 4 rows, then its dynamic graph, which the backend specializes
    # for 9 and 11 rows; the second calls with 9 and 11 rows find them in the backend's cache.
    assert len(messages(logs, COMPILED)) == 3, logs.text
    assert not messages(logs, FELL_BACK), logs.text
    # Nothing compiles in the background on the CPU; waiting for it changes nothing.
    tilefuse.torch_backend.finish_compiles()
    with torch.no_grad():
        x = torch.randn(9, 32)
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    assert len(messages(logs, COMPILED)) == 3, logs.text
    # The static graph's calls are keyed on its folded weights only (Dynamo's guards checked
    # their shapes); the dynamic graph's on each call's shapes.
    static, dynamic = tilefuse.torch_backend._live_graphs()[-2:]
    assert static.static_inputs is not None and dynamic.static_inputs is None


def test_dynamos_symbolic_sizes_reach_the_graph(logs):
    # dynamic=True: the input's dims are Dynamo's symbols, which the translated graph keeps
    # (Graph::symbolic_inputs) with each call's values; the CUDA backend's kernels take them at
    # launch (tests on a GPU: test_cuda.py).
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", dynamic=True)
    with torch.no_grad():
        for rows in (4, 9):
            x = torch.randn(2, rows, 32)
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    compiles = messages(logs, COMPILED)
    assert len(compiles) == 2, logs.text
    assert all("Dynamo's symbolic sizes" in m for m in compiles), logs.text
    graph = tilefuse.torch_backend._live_graphs()[-1]
    symbols = [sorted(s.symbols.values()) for s in graph.compiled.values() if s is not None]
    assert symbols == [[2, 4], [2, 9]], symbols
    # Without dynamic=True Dynamo's first graph is static: no symbols.
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(block, backend="tilefuse")(torch.randn(2, 4, 32))
    assert "Dynamo's symbolic sizes" not in messages(logs, COMPILED)[-1], logs.text


def test_a_new_size_of_a_dynamic_graph_compiles_the_plan_of_an_earlier_size(logs, tmp_path, monkeypatch):
    # The same structure at other sizes: planned once, the plan verified and compiled at the
    # next sizes (api/binding_plans.h). A cache of its own: the compiled-model cache of an
    # earlier run would answer first.
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", dynamic=True)
    with torch.no_grad():
        for rows in (4, 9, 13):
            x = torch.randn(2, rows, 32)
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    graph = tilefuse.torch_backend._live_graphs()[-1]
    reused = [any(stage.startswith("plan of an earlier binding") for stage, _ in s.model.compile_stages_ms)
              for s in graph.compiled.values() if s is not None]
    assert reused == [False, True, True], reused


def test_a_dynamic_graph_keeps_every_size_of_a_decode_loop(logs):
    # A graph over Dynamo's symbolic sizes keeps more compiled sizes than a static one's 8: a
    # second pass over 12 lengths (a decode loop's second generation) compiles none of them.
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", dynamic=True)
    lengths = range(3, 15)
    with torch.no_grad():
        for _ in range(2):
            for rows in lengths:
                x = torch.randn(2, rows, 32)
                torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    assert len(messages(logs, COMPILED)) == len(lengths), logs.text
    graph = tilefuse.torch_backend._live_graphs()[-1]
    assert graph.static_inputs is None and len(graph.compiled) == len(lengths)


def test_a_change_of_pytorchs_float32_matmul_precision_compiles_again(logs):
    # TF32 or exact f32 is decided at compile time (tilefuse.compile's precision=): a graph
    # compiled under "highest" is not reused under "high". (On the CPU both compute f32, so
    # the results match eager's at f32's tolerance; on a GPU "high" would be TF32's.)
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", options={"backend": "cpu"})
    x = torch.randn(4, 32)
    before = torch.get_float32_matmul_precision()
    try:
        with torch.no_grad():
            for precision in ("highest", "high", "highest"):
                torch.set_float32_matmul_precision(precision)
                torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    finally:
        torch.set_float32_matmul_precision(before)
    assert len(messages(logs, COMPILED)) == 2, logs.text  # the third call finds "highest"'s


def test_backend_options(logs):
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", options={"backend": "reference", "fuse": False})
    x = torch.randn(3, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    assert any("on reference" in m for m in messages(logs, COMPILED)), logs.text
    assert not messages(logs, FELL_BACK), logs.text
    with pytest.raises(Exception, match="unknown option"):
        torch.compile(block, backend="tilefuse", options={"exporter": "dynamo"})(x)


SPLIT = "running part of a torch.compile graph in PyTorch"


def test_an_op_tilefuse_does_not_map_runs_in_pytorch_and_the_rest_in_tilefuse(logs):
    def lgamma_twice(x):
        return torch.lgamma(x) * 2 + 1

    x = torch.randn(5, 7)
    result = torch.compile(lgamma_twice, backend="tilefuse")(x)
    torch.testing.assert_close(result, lgamma_twice(x), rtol=1e-6, atol=1e-6)
    (warning,) = messages(logs, SPLIT, logging.WARNING)
    assert "no mapping for aten.lgamma.default (1 call(s))" in warning, warning
    assert messages(logs, COMPILED), "the part after lgamma goes through tilefuse:\n" + logs.text
    assert not messages(logs, FELL_BACK), logs.text


class LgammaBetweenLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(16, 32)
        self.second = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.second(torch.relu(torch.lgamma(self.first(x).abs() + 3) * 3))  # lgamma away from its poles


def test_a_graph_is_split_around_an_unmapped_op_and_each_side_compiled(logs):
    module = LgammaBetweenLinears().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = module(x)
        compiled = torch.compile(module, backend="tilefuse")
        torch.testing.assert_close(compiled(x), expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(compiled(x * 2), module(x * 2), rtol=1e-5, atol=1e-5)  # a second call: the same parts
    assert len(messages(logs, SPLIT, logging.WARNING)) == 1, logs.text
    assert len(messages(logs, COMPILED)) == 2, "the linear before lgamma and the part after it:\n" + logs.text


@torch.library.custom_op("tilefuse_test::shifted", mutates_args=())
def shifted(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@shifted.register_fake
def _(x):
    return torch.empty_like(x)


def test_a_custom_op_runs_in_pytorch_between_tilefuse_parts(logs):
    def uses_custom_op(x):
        return shifted(x * 3) * 2

    x = torch.randn(6)
    torch.testing.assert_close(torch.compile(uses_custom_op, backend="tilefuse")(x), (x * 3 + 1) * 2)
    (warning,) = messages(logs, SPLIT, logging.WARNING)
    assert "tilefuse_test.shifted.default" in warning, warning


def test_a_graph_tilefuse_cannot_compile_falls_back_with_the_reason(logs):
    def through_int16(x):
        return (x * 4).to(torch.int16) + 1

    x = torch.randn(6)
    assert torch.equal(torch.compile(through_int16, backend="tilefuse")(x), through_int16(x))
    (warning,) = messages(logs, FELL_BACK, logging.WARNING)
    assert "tilefuse cannot compile it" in warning and "torch.int16" in warning and "FX node" in warning, warning


def test_training_runs_the_forward_and_the_backward_in_tilefuse_by_default(logs):
    torch.manual_seed(1)
    block = Block()
    twin = Block()
    twin.load_state_dict(block.state_dict())
    x = torch.randn(4, 32)
    out = torch.compile(block, backend="tilefuse")(x)
    expected = twin(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    # A random projection as the loss: the squares' sum would feed the layer norm's backward a
    # gradient that is nearly constant per row, which it cancels (rounding, not tilefuse, differs).
    projection = torch.randn_like(out)
    (out * projection).sum().backward()
    (expected * projection).sum().backward()
    for (name, p), q in zip(block.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4 * q.grad.abs().max().item(), msg=name)
    assert len(messages(logs, COMPILED)) == 2, "the forward and the backward graph:\n" + logs.text
    assert not messages(logs, FELL_BACK) and not messages(logs, "backward graph runs in PyTorch"), logs.text


def test_an_input_modified_in_place_is_written_back(logs):
    def bump(x):
        x.add_(1)
        return x * 2

    x = torch.arange(3.0)
    assert torch.equal(torch.compile(bump, backend="tilefuse")(x), (torch.arange(3.0) + 1) * 2)
    assert torch.equal(x, torch.arange(3.0) + 1)
    assert messages(logs, COMPILED) and not messages(logs, FELL_BACK), logs.text


def test_inference_mode(logs):
    block = Block().eval()
    x = torch.randn(5, 32)
    with torch.inference_mode():
        torch.testing.assert_close(torch.compile(block, backend="tilefuse")(x), block(x), rtol=1e-5, atol=1e-5)
    assert messages(logs, COMPILED) and not messages(logs, FELL_BACK), logs.text


def test_changed_weights_are_recompiled(logs):
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse")
    x = torch.randn(2, 32)
    with torch.no_grad():
        compiled(x)
        block.linear.bias.add_(1.0)  # in place: the weights tilefuse folded in are stale
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    assert len(messages(logs, COMPILED)) == 2, logs.text


# The model zoo's PyTorch modules (tests/models/export_models.py), as eager vs torch.compile.
ZOO = ["mlp_block", "attention_block", "gpt2_2layer", "llama_2layer", "bert_tiny", "vit_tiny", "t5_tiny", "resnet_tiny",
       "mobilenetv3_block", "unet_tiny", "unet_convtranspose"]


@pytest.mark.parametrize("name", ZOO)
def test_the_model_zoo_matches_eager(name, logs):
    module, inputs = zoo_model(name)
    with torch.no_grad():
        expected = module(*inputs)
        actual = torch.compile(module, backend="tilefuse")(*inputs)
    assert not messages(logs, FELL_BACK), logs.text
    assert messages(logs, COMPILED), logs.text
    for got, want in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        # The whole-model rule of `tilefuse run --check`: error within 1e-4 of the output's scale.
        scale = want.abs().max().item()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_the_entry_point_names_the_backend():
    points = [p for p in importlib.metadata.entry_points(group="torch_dynamo_backends") if p.name == "tilefuse"]
    if not points:
        pytest.skip("tilefuse is on PYTHONPATH, not pip-installed: no entry point to check")
    assert points[0].load() is tilefuse.torch_backend.tilefuse_backend


def test_explain_says_what_was_compiled_and_what_runs_in_pytorch(logs):
    import gc

    gc.collect()  # earlier tests' graphs, freed by the fixture's reset, leave the list
    earlier = len(tilefuse.torch_backend.explain(device="cpu"))
    module = LgammaBetweenLinears().eval()
    with torch.no_grad():
        torch.compile(module, backend="tilefuse", options={"backend": "cpu"})(torch.randn(4, 16))
    graphs = tilefuse.torch_backend.explain(device="cpu")[earlier:]
    whole = [g for g in graphs if g["split"]]
    parts = [g for g in graphs if g["part_of_split"]]
    assert len(whole) == 1 and "no mapping for aten.lgamma.default" in whole[0]["in_pytorch"][0], graphs
    assert len(parts) == 2 and all(p["compiled"] and not p["in_pytorch"] for p in parts), graphs
    first = parts[0]["compiled"][0]
    assert first["inputs"] == [(4, 16)] and first["backend"] == "cpu" and first["kernels"] >= 1
    assert first["plan"]["groups"] and first["plan"]["device"] == "cpu"


def test_the_backward_graph_through_tilefuse_gives_eager_s_gradients(logs):
    torch.manual_seed(2)
    block, twin = Block(), Block()
    twin.load_state_dict(block.state_dict())
    x = torch.randn(6, 32)
    compiled = torch.compile(block, backend="tilefuse", options={"backend": "cpu", "backward": "tilefuse"})
    out, expected = compiled(x), twin(x)
    projection = torch.randn_like(out)
    (out * projection).sum().backward()
    (expected * projection).sum().backward()
    for (name, p), q in zip(block.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4 * q.grad.abs().max().item(), msg=name)
    assert len(messages(logs, COMPILED)) == 2, "the forward and the backward graph:\n" + logs.text
    assert not messages(logs, FELL_BACK) and not messages(logs, "backward graph runs in PyTorch"), logs.text
    with pytest.raises(Exception, match="backward must be"):
        torch.compile(block, backend="tilefuse", options={"backward": "inductor"})(x)


def test_dropout_runs_inside_tilefuse_s_graph_on_pytorch_s_generator(logs):
    # Training-mode dropout (aten.native_dropout) is no longer split out: its random numbers are
    # drawn by torch.rand at each call, so torch.manual_seed repeats them; a quarter of the
    # elements dropped, the others scaled by 4/3, and the backward's gradient through the mask.
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.rand(64) + 0.5)

        def forward(self, x):
            return torch.nn.functional.dropout(x * self.w, 0.25, training=True)

    module = Scaled()
    x = torch.rand(256, 64) + 0.5  # no zeros of its own
    compiled = torch.compile(module, backend="tilefuse", options={"backend": "cpu"})
    torch.manual_seed(5)
    out = compiled(x)
    torch.manual_seed(5)
    torch.testing.assert_close(compiled(x), out, rtol=0, atol=0)
    assert not torch.equal(compiled(x), out), "a new call draws new numbers"
    kept = out != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.03, kept.float().mean().item()
    expected = (x * module.w).detach() / 0.75
    torch.testing.assert_close(out[kept], expected[kept], rtol=1e-6, atol=1e-6)
    g = torch.randn(256, 64)
    torch.manual_seed(6)
    out = compiled(x)
    (out * g).sum().backward()
    kept = (out != 0).float()
    torch.testing.assert_close(module.w.grad, (g * kept / 0.75 * x).sum(0), rtol=1e-5, atol=1e-5)
    assert not messages(logs, "native_dropout"), logs.text
    assert len(messages(logs, COMPILED)) >= 2, "the forward and the backward graph:\n" + logs.text


def test_explain_says_what_a_training_forward_saves_for_the_backward():
    # The tensors the partition saves are the backward graph's inputs less its gradient of the
    # output (the last one): their count and bytes, as explain() reports them.
    import tilefuse.torch_backend as backend

    torch.manual_seed(3)
    block = Block()
    x = torch.randn(6, 32)
    compiled = torch.compile(block, backend="tilefuse", options={"backend": "cpu"})
    (compiled(x) * torch.randn(6, 64)).sum().backward()
    graphs = [g for g in (ref() for ref in backend._GRAPHS) if g is not None][-2:]  # this step's forward, backward
    forward, backward = (g.explain("cpu") for g in graphs)
    inputs = [n.meta["val"] for n in graphs[1].gm.graph.nodes
              if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor)]
    saved = inputs[:-1]
    assert forward["saved_for_backward"] == {"tensors": len(saved), "bytes": sum(t.numel() * t.element_size() for t in saved)}
    assert len(saved) >= 1 and backward["saved_for_backward"] is None
    with torch.no_grad():
        torch._dynamo.reset()
        torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x)
    assert backend.explain()[-1]["saved_for_backward"] is None, "an inference graph saves nothing"


def test_explain_and_the_memory_summary_say_what_the_graphs_hold_and_write():
    # A graph's outputs' bytes are its call's outputs'; its intermediates' arena is smaller fused
    # than with every op its own kernel (values that no longer leave a kernel); the summary adds
    # up the graphs alive, a training forward's saved tensors included.
    import tilefuse.torch_backend as backend

    torch.manual_seed(4)
    block = Block()
    x = torch.randn(6, 32)
    arenas = {}
    for fuse in (False, True):
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(block, backend="tilefuse", options={"backend": "cpu", "fuse": fuse})(x)
        memory = backend.explain()[-1]["compiled"][0]["memory"]
        assert memory["output_bytes"] == 6 * 64 * 4, memory
        arenas[fuse] = memory["intermediate_bytes"]
    assert arenas[False] > arenas[True] >= 0, arenas
    torch._dynamo.reset()
    (torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x) * torch.randn(6, 64)).sum().backward()
    graphs = backend.explain()
    summary = backend.memory_summary()
    specs = [c for g in graphs for c in g["compiled"]]
    assert summary["graphs"] == len(graphs)
    assert summary["arena_bytes"] == sum(c["memory"]["intermediate_bytes"] for c in specs)
    assert summary["largest_arena_bytes"] == max(c["memory"]["intermediate_bytes"] for c in specs)
    saved = [g["saved_for_backward"]["bytes"] for g in graphs if g["saved_for_backward"]]
    assert saved and summary["saved_for_backward_bytes"] == sum(saved) > 0


def test_outputs_come_back_with_eager_s_strides():
    # Ops after a graph (PyTorch's own backward kernels, a split graph's next part) may read the
    # layout: cuDNN's attention backward returned a wrong dQ for a dense grad_output where eager's
    # had the attention output's strides.
    def f(x, w):
        return (x @ w).view(4, 8, 2, 16).transpose(1, 2)

    x, w = torch.randn(32, 24), torch.randn(24, 32)
    out = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})(x, w)
    expected = f(x, w)
    assert not expected.is_contiguous() and out.stride() == expected.stride()
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_a_compiled_graph_called_with_another_layout_of_its_inputs_compiles_again(logs):
    # A graph reads a transposed input in memory order: the same shapes laid out otherwise are
    # another specialization, not the first one read wrongly.
    def f(x, y):
        return x * 2 + y

    compiled = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})
    y = torch.randn(6, 4)
    transposed = torch.randn(4, 6).t()
    torch.testing.assert_close(compiled(transposed, y), f(transposed, y))
    dense = torch.randn(6, 4)
    torch.testing.assert_close(compiled(dense, y), f(dense, y))
    torch.testing.assert_close(compiled(transposed, y), f(transposed, y))
    assert len(messages(logs, COMPILED)) == 2, logs.text


def test_a_strided_slice_output_comes_back_in_its_dims_order():
    # A slice of a fused QKV product, permuted to [batch, heads, tokens, dim], is no dense
    # layout; it comes back dense in the order of its dims (tokens outer to heads), as cuDNN's
    # attention backward then returns its gradients, which the backward's views expect.
    def f(x, w):
        q = (x @ w).view(2, 8, 3, 4, 16)[:, :, 0].transpose(1, 2)  # [2, 4, 8, 16], a strided view
        return q, q.transpose(1, 2).reshape(2, 8, 64)

    x, w = torch.randn(16, 24), torch.randn(24, 192)
    x = x.view(2, 8, 24)
    (q, flat), (q_eager, flat_eager) = torch.compile(f, backend="tilefuse", options={"backend": "cpu"})(x, w), f(x, w)
    torch.testing.assert_close(q, q_eager, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(flat, flat_eager, rtol=1e-5, atol=1e-5)
    assert q.stride() == (512, 16, 64, 1), q.stride()  # dense, tokens outer to heads
    q.transpose(1, 2).view(2, 8, 64)  # the view a backward takes of such a gradient


def test_a_second_torch_compile_of_a_model_reuses_its_compiled_graph_until_a_weight_changes(logs):
    block = Block().eval()
    x = torch.randn(3, 32)
    with torch.no_grad():
        torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x)
        torch._dynamo.reset()
        again = torch.compile(block, backend="tilefuse", options={"backend": "cpu"})
        torch.testing.assert_close(again(x), block(x), rtol=1e-5, atol=1e-5)
        assert len(messages(logs, COMPILED)) == 1 and len(messages(logs, "reused a compiled")) == 1, logs.text
        block.norm.weight.mul_(2.0)  # in place: the folded weights are stale, so compile again
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x), block(x),
                                   rtol=1e-5, atol=1e-5)
    assert len(messages(logs, COMPILED)) == 2, logs.text


def test_a_compile_under_other_tilefuse_switches_is_not_reused(logs, monkeypatch):
    # The TILEFUSE_ environment switches change what is built (the decode folds, the norms in
    # the products): a graph compiled under others is compiled again, not reused.
    block = Block().eval()
    x = torch.randn(3, 32)
    with torch.no_grad():
        torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x)
        monkeypatch.setenv("TILEFUSE_CACHE_UPDATE_IN_ATTENTION", "0")
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(x), block(x),
                                   rtol=1e-5, atol=1e-5)
    assert len(messages(logs, COMPILED)) == 2 and not messages(logs, "reused a compiled"), logs.text


def test_a_freed_model_s_compiled_graphs_are_not_kept(logs):
    import gc

    block = Block().eval()
    with torch.no_grad():
        torch.compile(block, backend="tilefuse", options={"backend": "cpu"})(torch.randn(3, 32))
    kept = len(tilefuse.torch_backend._MODELS)
    assert kept >= 1
    torch._dynamo.reset()
    del block
    gc.collect()
    assert len(tilefuse.torch_backend._MODELS) < kept, "the freed weights' entry should be gone"

"""Weights read as inputs or folded as constants (tilefuse.fx.weights, the backend's "weights"
option): which weights fold, and that a model compiled either way matches eager."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")

import tilefuse.torch_backend  # noqa: E402
from conftest import zoo_model  # noqa: E402
from tilefuse.fx import folded_weights  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

COMPILED = "compiled a torch.compile graph"


def aten_graph(fn, *args):
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*args)


def test_only_weights_whose_values_folding_uses_are_folded():
    w, b, s, x = torch.randn(8, 4), torch.randn(8), torch.randn(8), torch.randn(3, 4)

    # w: a product's operand through a transpose; b: added to an activation; s: scaled by a
    # number (computed at compile time when folded).
    def f(w, b, s, x):
        return torch.mm(x, w.t()) + b + s * 2.0

    gm = aten_graph(f, w, b, s, x)
    assert folded_weights(gm, {0, 1, 2}, "inputs") == {2}
    assert folded_weights(gm, {0, 1, 2}, "fold") == {0, 1, 2}
    # On the CPU, "auto" folds them all (oneDNN packs constant weights once).
    assert folded_weights(gm, {0, 1, 2}, "auto") == {0, 1, 2}
    # Not a weight: never folded, whatever computes on it.
    assert folded_weights(gm, {0, 1}, "inputs") == set()


def test_a_convolution_s_and_a_batch_norm_s_weights_are_folded():
    conv = torch.nn.Conv2d(3, 4, 3).eval()
    norm = torch.nn.BatchNorm2d(4).eval()
    x = torch.randn(1, 3, 8, 8)

    def f(weight, bias, mean, var, gamma, beta, x):
        y = torch.nn.functional.conv2d(x, weight, bias)
        return torch.nn.functional.batch_norm(y, mean, var, gamma, beta, training=False)

    with torch.no_grad():
        gm = aten_graph(f, conv.weight, conv.bias, norm.running_mean, norm.running_var, norm.weight, norm.bias, x)
    assert folded_weights(gm, {0, 1, 2, 3, 4, 5}, "inputs") == {0, 1, 2, 3, 4, 5}


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.scale = torch.nn.Parameter(torch.randn(64))

    def forward(self, x):
        return self.norm(torch.nn.functional.gelu(self.linear(x))) * (self.scale * 0.5)


def compiled_messages(logs):
    return [r.getMessage() for r in logs.records if r.name == "tilefuse" and COMPILED in r.getMessage()]


def test_weights_read_as_inputs_follow_changes_in_place_without_a_recompile(logs):
    torch.manual_seed(0)
    block = Block().eval()
    compiled = torch.compile(block, backend="tilefuse", options={"backend": "cpu", "weights": "inputs"})
    x = torch.randn(5, 32)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
        # The linear's weight and bias and the norm's are read at each call; `scale` is folded.
        assert "and 4 weights read as inputs" in compiled_messages(logs)[0], logs.text
        block.linear.weight.mul_(-1.5)
        block.norm.bias.add_(1.0)
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
        assert len(compiled_messages(logs)) == 1, logs.text
        block.scale.add_(1.0)  # folded: stale, so compiled again
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    assert len(compiled_messages(logs)) == 2, logs.text


def test_the_weights_option_is_checked():
    with pytest.raises(Exception, match="weights must be"):  # Dynamo wraps the ValueError
        torch.compile(Block(), backend="tilefuse", options={"weights": "sometimes"})(torch.randn(2, 32))


def test_the_gemm_option_is_checked_and_taken_on_the_cpu():
    # How the GPU runs products (test_cuda.py checks that it does); the CPU takes the option.
    block, x = Block().eval(), torch.randn(3, 32)
    with torch.no_grad():
        compiled = torch.compile(block, backend="tilefuse", options={"gemm": "library"})
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(Exception, match="gemm must be"):
        torch.compile(Block(), backend="tilefuse", options={"gemm": "fastest"})(x)


@pytest.mark.parametrize("name", ["gpt2_2layer", "llama_2layer", "bert_tiny", "resnet_tiny"])
def test_zoo_models_with_weights_as_inputs_match_eager(name, logs):
    module, inputs = zoo_model(name)
    with torch.no_grad():
        expected = module(*inputs)
        actual = torch.compile(module, backend="tilefuse", options={"weights": "inputs"})(*inputs)
    messages = compiled_messages(logs)
    assert messages and not [r for r in logs.records if "in PyTorch" in r.getMessage()], logs.text
    if name != "resnet_tiny":  # a CNN's weights feed convolutions and batch norms: all folded
        assert "weights read as inputs" in messages[0], logs.text
    for got, want in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)):
        scale = want.abs().max().item()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_a_graph_compiled_before_reuses_its_passes_and_plan(logs, tmp_path, monkeypatch):
    # The compiled-model cache: a new torch.compile of the same module (here after Dynamo's reset
    # and with the process's own reuse of compiled graphs emptied, as in a new process) skips
    # tilefuse's graph passes and planning.
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(6, 32)
    with torch.no_grad():
        for _ in range(2):
            torch._dynamo.reset()
            tilefuse.torch_backend._MODELS.clear()
            compiled = torch.compile(block, backend="tilefuse", options={"backend": "cpu", "weights": "inputs"})
            torch.testing.assert_close(compiled(x), block(x), rtol=1e-5, atol=1e-5)
    first, second = compiled_messages(logs)
    assert "compiled-model cache" not in first and "graph passes" in first, first
    assert "compiled-model cache" in second and "graph passes" not in second, second

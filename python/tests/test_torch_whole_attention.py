"""F.scaled_dot_product_attention kept whole through AOTAutograd (tilefuse.fx.whole_attention):
on a GPU, where PyTorch's tracing would write a half-precision attention with an f32 mask out as
its f32 math path, the call becomes tilefuse::attention and reaches the attention group whole.
Here (the CPU) the rewrite is switched on for CPU tensors, as it runs for CUDA ones there;
test_cuda.py checks the GPU's attention template takes it."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402  (registers the backend)
from tilefuse.fx import whole_attention  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture
def whole_on_cpu(monkeypatch):
    monkeypatch.setattr(whole_attention, "WHOLE_ON", {"cuda", "cpu"})


def bert_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def inputs(dtype=torch.bfloat16):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 100, 64, dtype=dtype) for _ in range(3))
    mask = torch.zeros(2, 1, 100, 100)  # f32 on bf16 scores, as transformers' BERT passes it
    mask[0, :, :, 90:] = float("-inf")  # padded keys
    mask[1, :, 7, :] = float("-inf")    # a query that sees no key: 0, as PyTorch's math path gives
    return q, k, v, mask


def test_an_attention_with_an_f32_mask_is_one_attention_group_and_matches_eager(whole_on_cpu, monkeypatch):
    rewritten, keep = [], whole_attention.keep_attention_whole
    monkeypatch.setattr(whole_attention, "keep_attention_whole", lambda gm: rewritten.append(keep(gm)) or rewritten[-1])
    q, k, v, mask = inputs()
    with torch.no_grad():
        got = torch.compile(bert_attention, backend="tilefuse")(q, k, v, mask)
        want = bert_attention(q.float(), k.float(), v.float(), mask)
    assert not torch.isnan(got).any()
    assert ((got.float() - want).abs().max() / want.abs().max()).item() < 2e-2
    assert got[1, :, 7].abs().max().item() == 0, "the query that sees no key"
    graph = tilefuse.torch_backend.explain()[-1]  # this test's (earlier tests' graphs may still be alive)
    (compiled,) = graph["compiled"]
    assert [g["kind"] for g in compiled["plan"]["groups"]] == ["attention"], compiled["plan"]
    assert not graph["in_pytorch"], graph["in_pytorch"]
    assert rewritten == [1], "the call went through tilefuse::attention"


def test_the_op_runs_in_pytorch_where_the_graph_is_split_around_it(whole_on_cpu, logs):
    def attention_then_lgamma(q, k, v, mask):  # lgamma has no mapping: PyTorch runs it, tilefuse the rest
        return torch.lgamma(bert_attention(q, k, v, mask).abs() + 3)  # away from its poles

    q, k, v, mask = inputs(torch.float32)
    with torch.no_grad():
        got = torch.compile(attention_then_lgamma, backend="tilefuse")(q, k, v, mask)
        want = attention_then_lgamma(q, k, v, mask)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # The custom op itself, as PyTorch runs it where tilefuse does not.
    torch.testing.assert_close(torch.ops.tilefuse.attention(q, k, v, mask, 0.0, False, None, False), bert_attention(q, k, v, mask))


def test_only_inference_calls_on_the_chosen_devices_are_rewritten(monkeypatch):
    def traced(requires_grad):
        gm = torch.fx.symbolic_trace(bert_attention)
        q, k, v, mask = inputs(torch.float32)
        for node, value in zip((n for n in gm.graph.nodes if n.op == "placeholder"), (q, k, v, mask)):
            node.meta["example_value"] = value.requires_grad_(requires_grad and value is not mask)
        return gm

    def targets(gm):
        return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]

    gm = traced(False)
    assert whole_attention.keep_attention_whole(gm) == 0, "the CPU is not among the devices by default"
    monkeypatch.setattr(whole_attention, "WHOLE_ON", {"cpu"})
    assert whole_attention.keep_attention_whole(gm) == 1
    assert targets(gm) == ["tilefuse.attention.default"]
    q, k, v, mask = inputs(torch.float32)
    torch.testing.assert_close(gm(q, k, v, mask), bert_attention(q, k, v, mask))
    training = traced(True)
    assert whole_attention.keep_attention_whole(training) == 0, "a call that needs gradients keeps PyTorch's autograd"
    with torch.no_grad():
        assert whole_attention.keep_attention_whole(training) == 1

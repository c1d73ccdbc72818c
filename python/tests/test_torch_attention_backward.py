"""PyTorch's attention backward ops in a backward graph as nodes of tilefuse's graph
(tilefuse.fx.attention_backward): which GPU calls are taken (the attention backward template's),
checked here on graphs whose values are fake CUDA tensors (no GPU needed); test_fx_ops.py checks
the CPU's against autograd, test_cuda.py runs a training step through the template on a GPU."""

import math
import operator

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from tilefuse import fx  # noqa: E402
from tilefuse.fx import attention_backward  # noqa: E402

aten = torch.ops.aten


def backward_graph(op, dtype=torch.bfloat16, d=64, kv_heads=4, dropout=0.0, bias_elements=0, device="cuda"):
    """A graph calling `op` as AOTAutograd's backward graphs do, its values fake tensors."""
    with FakeTensorMode():
        q = torch.empty(2, 4, 128, d, dtype=dtype, device=device)
        k = torch.empty(2, kv_heads, 128, d, dtype=dtype, device=device)
        lse = torch.empty(2, 4, 128, dtype=torch.float32, device=device)
        bias = torch.empty(bias_elements, dtype=dtype, device=device)
        seed = torch.empty(2, dtype=torch.int64, device=device)
    graph = torch.fx.Graph()
    names = ["grad_out", "query", "key", "value", "out", "logsumexp", "philox_seed", "philox_offset", "attn_bias"]
    vals = [q, q, k, k, q, lse, seed, seed, bias]
    nodes = {}
    for name, val in zip(names, vals):
        nodes[name] = graph.placeholder(name)
        nodes[name].meta["val"] = val
    first = [nodes[n] for n in names[:6]]
    if op is aten._scaled_dot_product_cudnn_attention_backward.default:
        args = (*first, nodes["philox_seed"], nodes["philox_offset"], nodes["attn_bias"], None, None, 128, 128, dropout, True)
    else:
        args = (*first, None, None, 128, 128, dropout, True, nodes["philox_seed"], nodes["philox_offset"])
    call = graph.call_function(op, args, {"scale": 0.125})
    graph.output(tuple(graph.call_function(lambda t, i: t[i], (call, i)) for i in range(3)))
    return torch.fx.GraphModule(torch.nn.Module(), graph), call


@pytest.mark.parametrize("op", [aten._scaled_dot_product_cudnn_attention_backward.default,
                                aten._scaled_dot_product_flash_attention_backward.default], ids=["cudnn", "flash"])
def test_a_bf16_causal_attention_backward_is_taken_as_graph_nodes(op):
    gm, call = backward_graph(op)
    assert attention_backward.why_not(call) is None
    assert fx.is_supported(call)
    # Unless PyTorch's kernels are asked for: then it is split out, and the log says why.
    attention_backward.keep_in_pytorch(gm)
    assert not fx.is_supported(call)
    assert fx.why_unsupported(call) == "options attention_backward='pytorch'"


@pytest.mark.parametrize("case", [{"dtype": torch.float32}, {"d": 96}, {"dropout": 0.1}, {"kv_heads": 3}, {"device": "cpu"}],
                         ids=["f32", "d96", "dropout", "uneven-groups", "cpu"])
def test_what_the_template_does_not_take_runs_in_pytorch_with_the_reason(case):
    op = aten._scaled_dot_product_flash_attention_backward.default
    gm, call = backward_graph(op, **case)
    reason = attention_backward.why_not(call)
    assert reason
    assert not fx.is_supported(call)
    assert fx.why_unsupported(call) == reason  # what the split's log line names


def test_a_cudnn_call_with_an_attention_bias_runs_in_pytorch():
    op = aten._scaled_dot_product_cudnn_attention_backward.default
    gm, call = backward_graph(op, bias_elements=2 * 4 * 128 * 128)
    assert attention_backward.why_not(call) == "an attention bias"
    assert not fx.is_supported(call)


def traced_node(graph, op, target, args, val):
    """A node of `graph` with the value eager traced for it (meta "val")."""
    node = graph.placeholder(target) if op == "placeholder" else graph.call_function(target, args)
    node.meta["val"] = val
    return node


def test_a_split_part_of_ops_reading_any_layout_passes_its_inputs_as_they_are(monkeypatch):
    """torch_backend._PyTorchPart lays a part's inputs out as eager traced them (a copy where the
    tilefuse part before wrote them row-major), except for ops that read any layout."""
    from tilefuse import torch_backend

    seen = []

    def reads_any(x):
        seen.append(x.stride())
        return x + 1

    def read_by_pytorch(x):
        seen.append(x.stride())
        return x + 1

    monkeypatch.setattr(attention_backward, "ANY_LAYOUT", attention_backward.ANY_LAYOUT | {reads_any})
    traced = torch.randn(2, 5, 3).transpose(1, 2)  # eager's layout: dims 1 and 2 swapped
    for op in (reads_any, read_by_pytorch):
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        x.meta["val"] = traced
        y = graph.call_function(op, (x,))
        y.meta["val"] = traced + 1
        graph.output(y)
        part = torch_backend._PyTorchPart(torch.fx.GraphModule(torch.nn.Module(), graph))
        dense = torch.randn(2, 3, 5)
        out = part(dense)
        assert torch.equal(out, dense + 1)
        assert out.stride() == traced.stride(), "outputs are laid out as traced either way"
    assert seen == [(15, 5, 1), traced.stride()]


def test_outputs_only_tilefuse_reads_are_left_in_the_layout_the_op_gave(monkeypatch):
    """After a split, a PyTorch part of ops reading any layout leaves what only tilefuse parts
    read as its op gave it (tilefuse reads any layout); what PyTorch reads next, or the graph
    returns directly, is still laid out as eager traced it."""
    from tilefuse import torch_backend

    def two_gradients(x):
        return x + 1, x + 2

    def read_by_pytorch(x):  # no mapping: PyTorch runs it
        return x * 3

    monkeypatch.setattr(attention_backward, "ANY_LAYOUT", attention_backward.ANY_LAYOUT | {two_gradients})
    traced = torch.randn(2, 5, 3).transpose(1, 2)

    def split(then):
        graph = torch.fx.Graph()
        x = traced_node(graph, "placeholder", "x", (), traced)
        call = traced_node(graph, "call_function", two_gradients, (x,), (traced + 1, traced + 2))
        first = traced_node(graph, "call_function", operator.getitem, (call, 0), traced + 1)
        args = (first, 2.0) if then is aten.mul.Tensor else (first,)
        nxt = traced_node(graph, "call_function", then, args, then(traced + 1, *args[1:]))
        graph.output((nxt,))
        refused = [call] + ([nxt] if then is read_by_pytorch else [])
        return torch_backend._split_around(torch.fx.GraphModule(torch.nn.Module(), graph), refused, whole=None)

    for then, restrided in ((aten.mul.Tensor, []), (read_by_pytorch, [0, 1])):
        parts = [m for m in split(then).children() if isinstance(m, torch_backend._PyTorchPart) and m.any_layout]
        assert len(parts) == 1
        assert [i for i, _ in parts[0].restrided_outputs] == restrided, then


def test_a_tilefuse_part_writes_row_major_what_only_ops_reading_any_layout_read(monkeypatch):
    """A tilefuse part before an op that reads any layout writes that op's operand row-major,
    not in eager's layout (which the op would only copy back: the attention template's), also
    where the graph returns it saved for its backward; an output the caller gets stays in
    eager's layout."""
    from tilefuse import torch_backend

    def reads_any(x):
        return x + 1

    monkeypatch.setattr(attention_backward, "ANY_LAYOUT", attention_backward.ANY_LAYOUT | {reads_any})
    traced = torch.randn(2, 5, 3).transpose(1, 2)

    def split(saved):
        graph = torch.fx.Graph()
        x = traced_node(graph, "placeholder", "x", (), traced)
        doubled = traced_node(graph, "call_function", aten.mul.Tensor, (x, 2.0), traced * 2)
        call = traced_node(graph, "call_function", reads_any, (doubled,), traced * 2 + 1)
        graph.output((call, doubled))  # `doubled` returned too (saved for a backward, or the caller's)
        gm = torch.fx.GraphModule(torch.nn.Module(), graph)
        whole = type("Whole", (), {"saved_outputs": saved})()
        return torch_backend._split_around(gm, [call], whole)

    for saved, row_major in ((frozenset({1}), [0]), (frozenset(), [])):
        parts = [m for m in split(saved).children() if isinstance(m, torch_backend._TilefusePart)]
        assert len(parts) == 1
        assert sorted(parts[0].row_major_outputs) == row_major, saved


@pytest.mark.parametrize("dropout, mask, taken", [(0.0, False, True), (0.1, False, False), (0.0, True, False)],
                         ids=["plain", "dropout", "mask"])
def test_the_cpu_kernels_backward_is_taken_without_dropout_or_a_mask(dropout, mask, taken):
    graph = torch.fx.Graph()
    operands = [graph.placeholder(name) for name in ("grad_out", "query", "key", "value", "out", "logsumexp")]
    kwargs = {"attn_mask": graph.placeholder("mask")} if mask else {}
    call = graph.call_function(aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
                               (*operands, dropout, True), kwargs)
    graph.output(call)
    assert fx.is_supported(call) == taken


# ---- the training forward's attention, whose logsumexp the backward reads

def forward_graph(op=aten._scaled_dot_product_cudnn_attention.default, dtype=torch.bfloat16, d=64, kv_heads=4, causal=True,
                  dropout=0.0, bias_elements=0, device="cuda", read=(0, 1, 6, 7)):
    """A training forward's call of `op` (its values fake tensors), returning the results `read`."""
    with FakeTensorMode():
        q = torch.empty(2, 4, 128, d, dtype=dtype, device=device)
        k = torch.empty(2, kv_heads, 128, d, dtype=dtype, device=device)
        bias = torch.empty(bias_elements, dtype=dtype, device=device)
        outs = op(q, k, k, bias, True, dropout, causal) if op is aten._scaled_dot_product_cudnn_attention.default else \
            op(q, k, k, dropout, causal)
    graph = torch.fx.Graph()
    nodes = [traced_node(graph, "placeholder", name, None, val) for name, val in (("query", q), ("key", k), ("value", k))]
    if op is aten._scaled_dot_product_cudnn_attention.default:
        bias_node = traced_node(graph, "placeholder", "attn_bias", None, bias) if bias_elements else None
        call = graph.call_function(op, (*nodes, bias_node, True, dropout, causal))
    else:
        call = graph.call_function(op, (*nodes, dropout, causal))
    call.meta["val"] = outs
    graph.output(tuple(graph.call_function(operator.getitem, (call, i)) for i in read))
    return torch.fx.GraphModule(torch.nn.Module(), graph), call


def test_a_training_forwards_cudnn_attention_is_taken_with_its_logsumexp():
    gm, call = forward_graph()
    assert fx.why_unsupported(call) is None
    # Where PyTorch runs the backward, the forward's results must be cuDNN's own: split out.
    attention_backward.keep_in_pytorch(gm)
    assert fx.why_unsupported(call) == "its logsumexp is read (a training forward) and its backward runs in PyTorch (options)"


@pytest.mark.parametrize("case", [{"dtype": torch.float32}, {"d": 96}, {"dropout": 0.1}, {"kv_heads": 3},
                                  {"bias_elements": 2 * 4 * 128 * 128}],
                         ids=["f32", "d96", "dropout", "uneven-groups", "bias"])
def test_a_training_forward_whose_backward_the_template_does_not_take_runs_in_pytorch(case):
    gm, call = forward_graph(**case)
    reason = fx.why_unsupported(call)
    assert reason and reason.startswith("its logsumexp is read (a training forward) and the backward template does not take it: "), reason


def test_flash_attentions_forward_is_taken_too_and_the_efficient_kernels_splits_out_with_the_reason():
    _, call = forward_graph(aten._scaled_dot_product_flash_attention.default)
    assert fx.why_unsupported(call) is None
    _, call = forward_graph(aten._scaled_dot_product_flash_attention.default, d=96)
    assert "the backward template does not take it: head dim 96" in fx.why_unsupported(call)
    op = aten._scaled_dot_product_efficient_attention.default
    with FakeTensorMode():
        q = torch.empty(2, 4, 128, 64, dtype=torch.bfloat16, device="cuda")
        outs = op(q, q, q, None, True, 0.0, True)
    for read, reason in (((0,), None), ((0, 1), "the efficient kernel's is padded to 32 queries")):
        graph = torch.fx.Graph()
        nodes = [traced_node(graph, "placeholder", name, None, q) for name in ("query", "key", "value")]
        call = graph.call_function(op, (*nodes, None, True, 0.0, True))
        call.meta["val"] = outs
        graph.output(tuple(graph.call_function(operator.getitem, (call, i)) for i in read))
        got = fx.why_unsupported(call)
        assert got == reason if reason is None else reason in got


@pytest.mark.parametrize("op", [aten._scaled_dot_product_cudnn_attention.default, aten._scaled_dot_product_flash_attention.default],
                         ids=["cudnn", "flash"])
@pytest.mark.parametrize("causal, kv_heads", [(True, 4), (False, 2)], ids=["causal", "grouped-query"])
def test_the_forward_calls_logsumexp_matches_pytorchs_math(op, causal, kv_heads):
    # The graph translated as a GPU's (its traced values fake CUDA tensors) and run on the CPU
    # backend: the attention and its logsumexp as one attention kernel with two outputs, against
    # the math in f64; the seed and offset, which nothing but the backward op reads, zeros.
    from tilefuse import _tilefuse
    from tilefuse._model import _wrap

    gm, _ = forward_graph(op, causal=causal, kv_heads=kv_heads)
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 128, 64, generator=gen).to(torch.bfloat16)
    k, v = (torch.randn(2, kv_heads, 128, 64, generator=gen).to(torch.bfloat16) for _ in range(2))
    translation = fx.translate(gm, [q, k, v], set())
    model = _wrap(_tilefuse.compile_graph(translation.graph, "cpu", False, True, 0), "a test graph")
    out, lse, seed, offset = translation.outputs(model(*translation.inputs([q, k, v])), [q, k, v])
    kk, vv = (t.double().repeat_interleave(4 // kv_heads, dim=1) for t in (k, v))
    scores = q.double() @ kk.transpose(-1, -2) / 8
    if causal:
        scores = scores.masked_fill(torch.ones(128, 128, dtype=torch.bool).triu(1), -math.inf)
    want = torch.softmax(scores, -1) @ vv
    cudnn = op is aten._scaled_dot_product_cudnn_attention.default
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32 and list(lse.shape) == [2, 4, 128] + [1] * cudnn
    torch.testing.assert_close(out.double(), want, rtol=0, atol=2e-2 * want.abs().max().item())
    # The graph's scores are bf16 (as cuDNN's own are not): 2^-8 of a score's size.
    torch.testing.assert_close(lse.double(), torch.logsumexp(scores, -1, keepdim=cudnn), rtol=0, atol=2e-2)
    assert seed.dtype == offset.dtype == torch.int64 and seed.dim() == offset.dim() == 0 and seed.item() == offset.item() == 0
    attention = [kern for kern in model.kernels if kern.kind == "attention"]
    assert len(attention) == 1 and attention[0].generated, model.kernels


def test_a_training_forward_writes_what_the_attention_backward_reads_row_major():
    # The saved operands, output and logsumexp of a GPU attention call are written row-major
    # (the backward template reads them dense); what the caller also gets, and other saved
    # tensors, keep eager's layouts.
    from tilefuse import torch_backend

    gm, call = forward_graph(read=())
    graph = gm.graph
    q, k, v = list(graph.nodes)[:3]
    out, lse, seed = (graph.call_function(operator.getitem, (call, i)) for i in (0, 1, 6))
    other = graph.call_function(torch.ops.aten.mul.Tensor, (q, 2))
    graph.erase_node(next(n for n in graph.nodes if n.op == "output"))
    # Returned: out to the caller (0) and saved (1), then q, k, lse, seed and `other` saved.
    graph.output((out, out, q, k, lse, seed, other))
    saved = {1, 2, 3, 4, 5, 6}
    assert torch_backend._saved_for_attention_backward(torch.fx.GraphModule(torch.nn.Module(), graph), saved) == {2, 3, 4}

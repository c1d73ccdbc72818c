"""The final linear and its cross-entropy fused and chunked (tilefuse.fx.linear_cross_entropy):
the explicit API against autograd through F.linear and F.cross_entropy (f64 and f32, ragged
chunks, ignored rows, with and without a bias, mean and sum), and torch.compile's rewrite of a
training loss: taken where the logits feed only the loss, left alone where they do not, and
through transformers' GPT-2, whose LM head is its token embedding."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402  (registers the backend)
from tilefuse.fx import linear_cross_entropy as lce  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

ROWS, FEATURES, VOCABULARY = 74, 24, 101
NOTE = "chunked linear + cross-entropy"


def problem(dtype, bias=True, seed=0):
    torch.manual_seed(seed)
    h = torch.randn(2, ROWS // 2, FEATURES, dtype=dtype, requires_grad=True)
    weight = torch.randn(VOCABULARY, FEATURES, dtype=dtype, requires_grad=True)
    b = torch.randn(VOCABULARY, dtype=dtype, requires_grad=True) if bias else None
    target = torch.randint(0, VOCABULARY, (2, ROWS // 2))
    target[0, ::5] = -100  # padding: no loss, no gradient
    return h, weight, b, target


def gradients(loss, tensors):
    return torch.autograd.grad(loss, [t for t in tensors if t is not None])


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("chunk_rows", [16, 0])  # 16: four chunks and a ragged fifth; 0: the default (one here)
def test_matches_autograd_in_f64(reduction, bias, chunk_rows):
    h, weight, b, target = problem(torch.float64, bias)
    expected = F.cross_entropy(F.linear(h, weight, b).reshape(-1, VOCABULARY), target.reshape(-1), reduction=reduction)
    loss = lce.linear_cross_entropy(h, weight, target, bias=b, reduction=reduction, chunk_rows=chunk_rows)
    assert loss.dtype == torch.float64
    torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-12)
    for got, want in zip(gradients(loss * 0.5, (h, weight, b)), gradients(expected * 0.5, (h, weight, b))):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_vocabulary_of_unaligned_rows_is_padded_and_matches_autograd(bias, dtype):
    # 1029 words: rows of logits not whole 16-byte units, so the products run over 1088 (zero
    # rows of W, the padded logits at the dtype's lowest value); the gradients are W's and b's
    # own sizes and the padding adds nothing to the loss.
    vocabulary = 1029
    torch.manual_seed(1)
    h = torch.randn(40, FEATURES, dtype=dtype, requires_grad=True)
    weight = torch.randn(vocabulary, FEATURES, dtype=dtype, requires_grad=True)
    b = torch.randn(vocabulary, dtype=dtype, requires_grad=True) if bias else None
    target = torch.randint(0, vocabulary, (40,))
    target[::7] = -100
    target[1] = vocabulary - 1  # the last real word
    assert lce._padded_vocabulary(weight) == 1088
    wide = torch.float64
    expected = F.cross_entropy(F.linear(h.to(wide), weight.to(wide), b.to(wide) if bias else None), target)
    loss = lce.linear_cross_entropy(h, weight, target, bias=b, chunk_rows=16)
    tolerance = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(loss.to(wide), expected, **tolerance)
    got = gradients(loss, (h, weight, b))
    want = gradients(expected, (h, weight, b))
    for g, w, t in zip(got, want, (h, weight, b)):
        assert g.shape == t.shape and g.dtype == t.dtype
        scale = w.abs().max()
        assert torch.isfinite(g).all()
        assert (g.to(wide) - w).abs().max() <= (1e-10 if dtype == torch.float64 else 2e-2) * scale


def test_matches_autograd_in_f32_with_another_ignore_index():
    h, weight, b, target = problem(torch.float32)
    target[target == -100] = 3  # class 3 is the ignored one now
    expected = F.cross_entropy(F.linear(h, weight, b).reshape(-1, VOCABULARY), target.reshape(-1), ignore_index=3)
    loss = lce.linear_cross_entropy(h, weight, target, bias=b, ignore_index=3, chunk_rows=32)
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(gradients(loss, (h, weight, b)), gradients(expected, (h, weight, b))):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_every_row_ignored_is_nan_as_in_pytorch():
    h, weight, b, target = problem(torch.float64)
    target.fill_(-100)
    expected = F.cross_entropy(F.linear(h, weight, b).reshape(-1, VOCABULARY), target.reshape(-1))
    assert torch.isnan(expected)
    assert torch.isnan(lce.linear_cross_entropy(h, weight, target, bias=b))


def test_bad_arguments_are_named():
    h, weight, b, target = problem(torch.float32)
    with pytest.raises(ValueError, match="reduction must be 'mean' or 'sum'"):
        lce.linear_cross_entropy(h, weight, target, reduction="none")
    with pytest.raises(ValueError, match="do not chain"):
        lce.linear_cross_entropy(h, weight.t(), target)
    with pytest.raises(ValueError, match="targets for"):
        lce.linear_cross_entropy(h, weight, target[:1])


def test_default_chunks_are_a_quarter_of_the_rows_in_multiples_of_64():
    assert lce.CHUNKS == 4
    assert lce.default_chunk_rows(4096) == 1024
    assert lce.default_chunk_rows(8 * 1024) == 2048
    assert lce.default_chunk_rows(100) == 100  # fewer rows than the smallest chunk: one chunk
    assert lce.default_chunk_rows(3000) == 768


class Head(nn.Module):
    """A language model's last layers: a block, the vocabulary projection and the loss, written
    as nanoGPT writes it (logits viewed as rows, cast to f32)."""

    def __init__(self, returns_logits=False, **loss_options):
        super().__init__()
        self.block = nn.Linear(16, FEATURES)
        self.head = nn.Linear(FEATURES, VOCABULARY, bias=False)
        self.returns_logits = returns_logits
        self.loss_options = loss_options

    def forward(self, x, target):
        logits = self.head(torch.tanh(self.block(x)))
        loss = F.cross_entropy(logits.view(-1, VOCABULARY).float(), target.view(-1), **self.loss_options)
        return (logits, loss) if self.returns_logits else loss


def notes_since(before):
    """What the graphs compiled since `before` (the live graphs then) say runs in PyTorch."""
    graphs = [g for g in tilefuse.torch_backend._live_graphs() if all(g is not old for old in before)]
    return [note for graph in graphs for note in graph.explain("h100-sxm")["in_pytorch"]]


def runs_chunked_loss(before):
    return any(NOTE in note for note in notes_since(before))


def compiled_against_eager(options=None, loss_gradient=1.0, **head_options):
    """The loss's value and its parameters' gradients (of the loss times `loss_gradient`), eager
    and through tilefuse; and the compiled graphs' notes on what ran in PyTorch (explain())."""
    torch.manual_seed(1)
    before = tilefuse.torch_backend._live_graphs()
    eager = Head(**head_options)
    twin = Head(**head_options)
    twin.load_state_dict(eager.state_dict())
    compiled = torch.compile(twin, backend="tilefuse", options=options or {})
    x = torch.randn(2, ROWS // 2, 16)
    target = torch.randint(0, VOCABULARY, (2, ROWS // 2))
    target[1, :4] = -100
    results = []
    for module in (eager, compiled):
        out = module(x, target)
        loss = out[1] if isinstance(out, tuple) else out
        loss = loss.sum() if loss.dim() else loss
        (loss * loss_gradient).backward()
        results.append((loss.detach(), [p.grad for p in module.parameters()]))
    return results, notes_since(before)


def assert_same(results):
    (loss, grads), (loss_twin, grads_twin) = results
    torch.testing.assert_close(loss_twin, loss, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads_twin, grads):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_torch_compile_takes_a_training_loss_of_a_linear(reduction):
    # A loss gradient other than 1 (gradient accumulation's 1/steps, a loss scaler's factor):
    # the gradients the forward computed are scaled in the backward, in place (they are
    # AOTAutograd's donated buffers), not copied.
    results, notes = compiled_against_eager(reduction=reduction, loss_gradient=0.25)
    assert any(NOTE in note for note in notes), "the loss was not rewritten as the chunked linear + cross-entropy"
    assert any("scaled in place" in note for note in notes), notes
    assert_same(results)


@pytest.mark.parametrize("head_options", [{"returns_logits": True}, {"reduction": "none"}, {"label_smoothing": 0.1}],
                         ids=["logits-also-returned", "per-row-losses", "label-smoothing"])
def test_torch_compile_leaves_other_losses_as_written(head_options):
    results, notes = compiled_against_eager(**head_options)
    assert not any(NOTE in note for note in notes)
    assert_same(results)


def test_the_option_turns_it_off_and_is_checked():
    results, notes = compiled_against_eager(options={"chunked_loss": False})
    assert not any(NOTE in note for note in notes)
    assert_same(results)
    with pytest.raises(Exception, match="chunked_loss must be True or False"):
        torch.compile(Head(), backend="tilefuse", options={"chunked_loss": "yes"})(torch.randn(2, 3, 16),
                                                                                  torch.zeros(2, 3, dtype=torch.long))


def test_inference_is_left_as_written():
    torch.manual_seed(2)
    before = tilefuse.torch_backend._live_graphs()
    model = Head()
    compiled = torch.compile(model, backend="tilefuse")
    x, target = torch.randn(2, ROWS // 2, 16), torch.randint(0, VOCABULARY, (2, ROWS // 2))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, target), model(x, target), rtol=1e-5, atol=1e-6)
    assert not runs_chunked_loss(before)


def test_a_gpt2_with_tied_embeddings_trains_through_the_chunked_loss():
    # transformers' GPT-2 (random weights from a config): its LM head is the token embedding's
    # weight, so W's gradient from the chunked loss adds to the embedding's own. The loss written
    # as training code writes it (bench/torch_training.py --loss ce).
    transformers = pytest.importorskip("transformers", reason="transformers is not installed in this Python")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=509, attn_pdrop=0.0, resid_pdrop=0.0,
                                     embd_pdrop=0.0)

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = transformers.GPT2LMHeadModel(config)

        def forward(self, ids, labels):
            logits = self.lm.lm_head(self.lm.transformer(ids, use_cache=False).last_hidden_state)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))

    eager, twin = Step().train(), Step().train()
    twin.load_state_dict(eager.state_dict())
    assert twin.lm.lm_head.weight is twin.lm.transformer.wte.weight
    ids = torch.randint(0, 509, (2, 40))
    labels = torch.roll(ids, -1, 1)
    labels[:, -1] = -100
    before = tilefuse.torch_backend._live_graphs()
    eager(ids, labels).backward()
    torch.compile(twin, backend="tilefuse")(ids, labels).backward()
    assert runs_chunked_loss(before)
    for (name, p), q in zip(twin.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)

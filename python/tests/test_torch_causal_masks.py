"""Attention masks proven causal become is_causal (tilefuse.fx.causal_masks): a mask built from
aranges as transformers' traced models build it is computed at compile time and, where it is the
causal rule, dropped for is_causal=True; masks that depend on an input, or are another rule,
stay. Results against eager either way."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402  (registers the backend)
from tilefuse.fx import causal_masks  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def causal_rule(n, device):
    q = torch.arange(n, device=device)[None, None, :, None]
    k = torch.arange(n, device=device)[None, None, None, :]
    return (k <= q).expand(2, 1, n, n)  # as transformers' sdpa_mask: batch entries, one head


def window_rule(n, device):
    q = torch.arange(n, device=device)[None, None, :, None]
    k = torch.arange(n, device=device)[None, None, None, :]
    return ((k <= q) & (q - k < 4)).expand(2, 1, n, n)  # sliding window: not causal


def attention_with(rule):
    def attention(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=rule(q.shape[-2], q.device))
    return attention


def padded_attention(q, k, v, keep):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :] & causal_rule(q.shape[-2], q.device))


def proven(monkeypatch):
    counts = []
    prove = causal_masks.prove_causal_masks
    monkeypatch.setattr(causal_masks, "prove_causal_masks", lambda gm: counts.append(prove(gm)) or counts[-1])
    return counts


def inputs():
    torch.manual_seed(0)
    return [torch.randn(2, 4, 24, 16, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("rule, taken", [(causal_rule, 1), (window_rule, 0)], ids=["causal", "sliding-window"])
def test_a_mask_computed_from_aranges_is_dropped_only_where_it_is_causal(monkeypatch, rule, taken):
    counts = proven(monkeypatch)
    q, k, v = inputs()
    attention = attention_with(rule)
    got = torch.compile(attention, backend="tilefuse")(q, k, v)
    assert counts == [taken]
    want = attention(q, k, v)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    grads = torch.autograd.grad(got.square().sum(), (q, k, v))
    want_grads = torch.autograd.grad(want.square().sum(), (q, k, v))
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_a_mask_that_depends_on_an_input_stays(monkeypatch):
    counts = proven(monkeypatch)
    q, k, v = inputs()
    keep = torch.ones(2, 24, dtype=torch.bool)  # a padding mask: an input, whatever its values
    got = torch.compile(padded_attention, backend="tilefuse")(q, k, v, keep)
    assert counts == [0]
    torch.testing.assert_close(got, padded_attention(q, k, v, keep), rtol=1e-4, atol=1e-5)


def test_transformers_gpt2_traced_masks_are_proven_causal(monkeypatch):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed in this Python")
    counts = proven(monkeypatch)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, attn_pdrop=0.0, resid_pdrop=0.0,
                                     embd_pdrop=0.0)
    eager, twin = transformers.GPT2LMHeadModel(config).train(), transformers.GPT2LMHeadModel(config).train()
    twin.load_state_dict(eager.state_dict())
    ids = torch.randint(0, 512, (2, 32))
    projection = torch.randn(2, 32, 512)
    (eager(ids, use_cache=False).logits * projection).mean().backward()
    (torch.compile(twin, backend="tilefuse")(ids, use_cache=False).logits * projection).mean().backward()
    assert counts == [2]  # one mask a layer
    for (name, p), q in zip(twin.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)

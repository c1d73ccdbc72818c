"""Training runs through torch.compile(backend="tilefuse") on the CPU, forward and backward
through tilefuse (the default), against the same runs in eager PyTorch: a small GPT (the
test_torch_models one, cross-entropy on next tokens, AdamW) for 200 steps, whose loss curve must
follow eager's, and a LLaMA-style model's (RMSNorm, rotary, grouped-query attention, SwiGLU)
gradients over a few steps. Only the op with no mapping yet may run in PyTorch: the embedding's
index_put."""

import logging
import re
import warnings

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from test_torch_models import COMPILED, IN_PYTORCH, SPLIT, Llama, gpt2, messages, tokens  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

# What a training graph may still split out on the CPU, and nothing else.
SPLIT_OUT = ("aten.index_put",)


def _next_token_loss(model, ids):
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def _losses(model, forward, ids, steps, lr=3e-3):
    """The losses of `steps` AdamW steps; no group of a tilefuse graph on the reference
    interpreter (its warning fails the run)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    losses = []
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*on the reference interpreter.*")
        for _ in range(steps):
            optimizer.zero_grad(set_to_none=True)
            loss = _next_token_loss(forward, ids)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def _assert_only_named_splits(logs):
    in_pytorch = messages(logs, IN_PYTORCH, logging.WARNING)
    others = [m for m in in_pytorch if SPLIT not in m or not all(op in SPLIT_OUT for op in _split_ops(m))]
    assert not others, "ran in PyTorch beyond the named splits:\n" + "\n".join(others)


def _split_ops(message):
    """The ops a split message names ("no mapping for aten.x.default, ..." and "does not take
    aten.y.default (why)"), without their overloads."""
    return re.findall(r"(aten\.\w+)\.\w+", message.split(" call(s)", 1)[0])


def test_a_small_gpt_trains_200_steps_as_eager_does(logs):
    # The same weights, data and optimizer; the loss must fall as eager's does, step by step
    # within f32 rounding's drift (AdamW normalizes the updates, so the runs' differences stay
    # at the kernels' rounding, not the loss's scale).
    ids = tokens(torch.Generator().manual_seed(41), 4, 33, 500)
    eager = gpt2(seed=40).train()
    ours = gpt2(seed=40).train()
    expected = _losses(eager, eager, ids, 200)
    actual = _losses(ours, torch.compile(ours, backend="tilefuse", options={"backend": "cpu"}), ids, 200)
    assert expected[-1] < 0.5 * expected[0], f"eager's run did not learn: {expected[0]:.3f} -> {expected[-1]:.3f}"
    drift = max(abs(a - e) / e for a, e in zip(actual, expected))
    assert drift < 1e-3, f"largest relative difference of the losses {drift:.2e}; " \
                         f"first {actual[0]:.5f} / {expected[0]:.5f}, last {actual[-1]:.5f} / {expected[-1]:.5f}"
    assert len(messages(logs, COMPILED)) >= 2, "the forward and the backward through tilefuse:\n" + logs.text
    _assert_only_named_splits(logs)


@pytest.mark.parametrize("kv_repeat", ["expand", "enable_gqa"])
def test_a_llama_style_model_trains_as_eager_does(kv_repeat, logs):
    # RMSNorm, rotary embeddings, grouped-query attention, SwiGLU: three AdamW steps, then the
    # gradients of every parameter against eager's.
    ids = tokens(torch.Generator().manual_seed(43), 2, 17, 500)
    torch.manual_seed(42)
    eager = Llama(kv_repeat).train()
    ours = Llama(kv_repeat).train()
    ours.load_state_dict(eager.state_dict())
    expected = _losses(eager, eager, ids, 3)
    actual = _losses(ours, torch.compile(ours, backend="tilefuse", options={"backend": "cpu"}), ids, 3)
    torch.testing.assert_close(torch.tensor(actual), torch.tensor(expected), rtol=1e-4, atol=0)
    for (name, p), q in zip(ours.named_parameters(), eager.parameters()):
        scale = q.grad.abs().max().item() or 1.0
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4 * scale, msg=name)
    assert len(messages(logs, COMPILED)) >= 2, "the forward and the backward through tilefuse:\n" + logs.text
    _assert_only_named_splits(logs)

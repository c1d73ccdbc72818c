"""The backward of each op family a training graph holds, through tilefuse (torch.compile with
options={"backward": "tilefuse"}, the CPU backend) against torch.autograd in eager: the
gradients of every input and parameter, in f64 where tilefuse's kernels take it and in f32
otherwise. Each op's forward and backward graphs must both be compiled by tilefuse; a part
split out to PyTorch is named in the case (SPLIT_OUT: the embedding's index_put accumulates, which tilefuse does not take)."""


import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)

COMPILED = "compiled a torch.compile graph"
REUSED = "reused a compiled torch.compile graph"
FELL_BACK = "running a torch.compile graph in PyTorch"
IN_PYTORCH = "the backward graph runs in PyTorch"


# Dynamo reset around each test, and the "tilefuse" logger captured: conftest.py.
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rotate_half(x, cos, sin):
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-b, a), dim=-1) * sin


class Op(torch.nn.Module):
    """`fn(self, *inputs)` as a module, with the parameters `params` builds."""

    def __init__(self, fn, params=None):
        super().__init__()
        self.fn = fn
        for name, value in (params or {}).items():
            setattr(self, name, torch.nn.Parameter(value))

    def forward(self, *inputs):
        return self.fn(self, *inputs)


# name: (module factory, input factory, which inputs take gradients). Inputs are made in the
# test's dtype; integer inputs (indices, targets) are made as they are.
def _cases():
    r = torch.randn
    return {
        "linear": (lambda: torch.nn.Linear(16, 24), lambda d: [r(5, 16, dtype=d)]),
        "gelu_erf": (lambda: Op(lambda m, x: F.gelu(x)), lambda d: [r(4, 32, dtype=d)]),
        "gelu_tanh": (lambda: Op(lambda m, x: F.gelu(x, approximate="tanh")), lambda d: [r(4, 32, dtype=d)]),
        "silu_swiglu": (lambda: Op(lambda m, a, b: F.silu(a) * b), lambda d: [r(4, 32, dtype=d), r(4, 32, dtype=d)]),
        "tanh_sigmoid_exp": (lambda: Op(lambda m, x: torch.tanh(x) * torch.sigmoid(x) + torch.exp(-x * x)), lambda d: [r(6, 8, dtype=d)]),
        "softmax": (lambda: Op(lambda m, x: F.softmax(x, dim=-1)), lambda d: [r(6, 40, dtype=d)]),
        "log_softmax": (lambda: Op(lambda m, x: F.log_softmax(x, dim=-1)), lambda d: [r(6, 40, dtype=d)]),
        "layer_norm": (lambda: torch.nn.LayerNorm(48), lambda d: [r(3, 5, 48, dtype=d)]),
        "rms_norm": (lambda: Op(_rms_norm_module, {"w": torch.randn(48)}), lambda d: [r(3, 5, 48, dtype=d)]),
        "cross_entropy": (lambda: Op(lambda m, x, t: F.cross_entropy(x, t)),
                          lambda d: [r(12, 30, dtype=d), torch.randint(0, 30, (12,))]),
        "embedding": (lambda: torch.nn.Embedding(50, 16), lambda d: [torch.randint(0, 50, (4, 7))]),
        "rotary": (lambda: Op(lambda m, x, c, s: _rotate_half(x, c, s)),
                   lambda d: [r(2, 4, 6, 16, dtype=d), r(6, 16, dtype=d), r(6, 16, dtype=d)]),
        "batched_matmul_views": (lambda: Op(lambda m, a, b: (a.transpose(1, 2) @ b).permute(0, 2, 1).reshape(3, -1)),
                                 lambda d: [r(3, 8, 5, dtype=d), r(3, 8, 6, dtype=d)]),
        "reductions": (lambda: Op(lambda m, x: x.sum(0) + x.mean(1, keepdim=True).squeeze(1)[0] + x.amax(-1).sum()),
                       lambda d: [r(7, 9, dtype=d)]),
        "cat_split_where": (lambda: Op(lambda m, x, y: torch.where(x > 0, torch.cat([x, y], -1)[..., :9], y * 2)),
                            lambda d: [r(4, 9, dtype=d), r(4, 9, dtype=d)]),
        # The forward saves the logsumexp; the backward's attention_grad nodes read it.
        "attention_causal": (lambda: Op(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
                             lambda d: [r(2, 3, 10, 16, dtype=d), r(2, 3, 10, 16, dtype=d), r(2, 3, 10, 16, dtype=d)]),
        # Fewer queries than keys, no mask.
        "attention_ragged": (lambda: Op(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v)),
                             lambda d: [r(2, 3, 7, 16, dtype=d), r(2, 3, 12, 16, dtype=d), r(2, 3, 12, 16, dtype=d)]),
    }


# The ops each case's backward graph tilefuse does not take: split out to PyTorch, said in the log.
SPLIT_OUT = {
    "embedding": "aten.index_put.default",  # the rows' gradients summed into the table
}


def _rms_norm_module(m, x):
    return _rms_norm(x, m.w)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(_cases()))
def test_the_backward_through_tilefuse_gives_autograd_s_gradients(name, dtype, logs):
    make_module, make_inputs = _cases()[name]
    torch.manual_seed(7)
    module = make_module().to(dtype)
    twin = make_module().to(dtype)
    twin.load_state_dict(module.state_dict())
    inputs = make_inputs(dtype)
    ours = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    theirs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    compiled = torch.compile(module, backend="tilefuse", options={"backend": "cpu", "backward": "tilefuse"})
    out, expected = compiled(*ours), twin(*theirs)
    torch.testing.assert_close(out, expected, rtol=1e-6 if dtype == torch.float64 else 1e-4, atol=1e-6 if dtype == torch.float64 else 1e-4)
    projection = torch.randn(expected.shape, dtype=dtype)  # a random loss: every output element's gradient differs
    (out * projection).sum().backward()
    (expected * projection).sum().backward()
    tolerance = 1e-9 if dtype == torch.float64 else 2e-5
    pairs = [(f"input {i}", a.grad, b.grad) for i, (a, b) in enumerate(zip(ours, theirs)) if b.grad is not None]
    pairs += [(n, p.grad, q.grad) for (n, p), q in zip(module.named_parameters(), twin.parameters())]
    assert pairs, "nothing takes a gradient"
    for what, got, want in pairs:
        assert got is not None, f"{what}: no gradient"
        scale = want.abs().max().item() or 1.0
        torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance * scale, msg=f"{name} {what}")
    records = [r.getMessage() for r in logs.records if r.name == "tilefuse"]
    assert not [m for m in records if FELL_BACK in m or IN_PYTORCH in m], "\n".join(records)
    split = [m for m in records if "running part of a torch.compile graph in PyTorch" in m]
    if name in SPLIT_OUT:
        assert len(split) == 1 and SPLIT_OUT[name] in split[0], "\n".join(records)
    else:
        assert not split, "\n".join(records)
    # (A graph another test of this process compiled already is reused, not compiled again.)
    assert sum(COMPILED in m or REUSED in m for m in records) >= 2, "the forward and the backward graph:\n" + "\n".join(records)

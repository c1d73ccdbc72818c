"""CUDA plans of blocks as PyTorch traces them, built for sm_90a without a GPU (NVRTC only).

What the CUDA backend makes of a LLaMA-style block's products and pointwise kernels after the
plan: the MLP's gate computed in the up product's tiles, the rotary embeddings of q and k in
one launch. Their correctness and speed are the GPU script's (bench/experiments/); here, that
the FX path reaches those forms and that they compile without spills.
"""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse import _tilefuse  # noqa: E402
from tilefuse.fx import translate  # noqa: E402
from tilefuse.torch_backend import _decompositions  # noqa: E402


def cuda_kernels(forward, args):
    """forward traced to core ATen as the backend's AOTAutograd hands it over, its weights read
    as inputs (as on a GPU), built for sm_90a."""
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(forward, decomposition_table=_decompositions())(*args)
    translation = translate(gm, args, set())
    try:
        return _tilefuse.build_graph_for_cuda_arch(translation.graph, "sm_90a")
    except tilefuse.Error as error:
        if "NVRTC" in str(error) or "nvrtc" in str(error):
            pytest.skip(f"no NVRTC here: {error}")
        raise


def bf16(*shape):
    return torch.randn(*shape, dtype=torch.bfloat16)


def test_a_swiglu_mlp_s_gate_runs_in_the_up_product_s_tiles():
    def mlp(x, w_gate, w_up, w_down):
        return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)

    kernels = cuda_kernels(mlp, [bf16(128, 512), bf16(1408, 512), bf16(1408, 512), bf16(512, 1408)])
    products = [k for k in kernels if k["mode"] == "gemm template"]
    gated = [k for k in products if "gated" in k["strategy"]]
    assert len(gated) == 1, [k["strategy"] for k in products]
    assert len(products) == 2, "the gated product and the down projection"
    assert all(k["spill_bytes"] == 0 for k in kernels), kernels


def test_the_rotary_embeddings_of_q_and_k_share_a_launch():
    heads, kv_heads, d, t = 4, 2, 64, 128

    def rotate_half(v):
        return torch.cat((-v[..., d // 2:], v[..., :d // 2]), dim=-1)

    def attention_inputs(x, wq, wk, cos, sin):
        q = F.linear(x, wq).view(1, t, heads, d).transpose(1, 2)
        k = F.linear(x, wk).view(1, t, kv_heads, d).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    kernels = cuda_kernels(attention_inputs, [bf16(1, t, 256), bf16(heads * d, 256), bf16(kv_heads * d, 256), bf16(1, 1, t, d),
                                              bf16(1, 1, t, d)])
    together = [k for k in kernels if "launched together" in k["strategy"]]
    assert len(together) == 1, [k["strategy"] for k in kernels]
    assert all(k["spill_bytes"] == 0 for k in kernels), kernels


@pytest.mark.parametrize("cache", [(1, 12, 256, 64), (1, 4, 16, 64)])
def test_a_decode_step_s_key_and_value_cache_updates_are_one_kernel(cache):
    # index_copy at one position: each element compares its own position with the step's (an
    # iota and a broadcast index in the kernel's loads), so the keys' and the values' updates,
    # reading the same comparison, are one pointwise kernel (after the position's own: a
    # negative position counted from the end, one element). A small cache too: its iota, of
    # 4096 elements, was folded to a constant per update and the updates were two kernels.
    def update(k_cache, v_cache, k, v, position):
        return k_cache.index_copy(2, position, k), v_cache.index_copy(2, position, v)

    row = (cache[0], cache[1], 1, cache[3])
    kernels = cuda_kernels(update, [bf16(*cache), bf16(*cache), bf16(*row), bf16(*row), torch.tensor([7])])
    assert len(kernels) == 2, kernels
    updates = [k for k in kernels if k["kind"] == "pointwise" and k["strategy"] != "pointwise x1"]
    assert len(updates) == 1 and "launched together" not in updates[0]["strategy"], kernels


def test_a_decode_step_s_q_k_and_v_are_one_launch():
    # One token: v alone would go to the skinny template, but q and k (rotary epilogues) are on
    # the GEMM template's grouped kernel, which v joins.
    heads, kv_heads, d = 4, 2, 64

    def rotate_half(v):
        return torch.cat((-v[..., d // 2:], v[..., :d // 2]), dim=-1)

    def attention_inputs(x, wq, wk, wv, cos, sin):
        q = F.linear(x, wq).view(1, 1, heads, d).transpose(1, 2)
        k = F.linear(x, wk).view(1, 1, kv_heads, d).transpose(1, 2)
        v = F.linear(x, wv).view(1, 1, kv_heads, d).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    kernels = cuda_kernels(attention_inputs, [bf16(1, 1, 256), bf16(heads * d, 256), bf16(kv_heads * d, 256), bf16(kv_heads * d, 256),
                                              bf16(1, 1, 1, d), bf16(1, 1, 1, d)])
    products = [k for k in kernels if k["mode"] == "gemm template"]
    assert len(products) == 1, [k["strategy"] for k in kernels]
    assert "3 products grouped over N" in products[0]["strategy"], products[0]["strategy"]


@pytest.mark.parametrize("skinny_norms", ["1", "0"])
def test_a_decode_step_s_rms_norm_is_computed_in_the_gate_and_up_products(skinny_norms, monkeypatch):
    # TILEFUSE_SKINNY_NORMS=1: the post-attention RMS norm (LlamaRMSNorm as traced) feeds the
    # gate and up products of one row alone; each computes it, and it has no kernel.
    monkeypatch.setenv("TILEFUSE_SKINNY_NORMS", skinny_norms)

    def mlp(x, scale, w_gate, w_up, w_down):
        xf = x.float()
        normed = scale * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
        return F.linear(F.silu(F.linear(normed, w_gate)) * F.linear(normed, w_up), w_down)

    kernels = cuda_kernels(mlp, [bf16(1, 512), bf16(512), bf16(1408, 512), bf16(1408, 512), bf16(512, 1408)])
    normed = [k for k in kernels if "A an RMS norm of its input" in k["strategy"]]
    reductions = [k for k in kernels if k["kind"] == "row_reduction"]
    if skinny_norms == "1":
        assert len(normed) == 2 and not reductions, [(k["name"], k["strategy"]) for k in kernels]
    else:
        assert not normed and len(reductions) == 1, [(k["name"], k["strategy"]) for k in kernels]
    assert all(k["spill_bytes"] == 0 for k in kernels), kernels


@pytest.mark.parametrize("fold", ["1", "0"])
def test_a_decode_step_s_cache_update_is_written_by_its_attention(fold, monkeypatch):
    # TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1: a static cache's update at the step's position (as
    # transformers' index_copy_, functionalized) has no kernel of its own; the decode attention
    # reads the caches as they were, the new key and value at the position, and writes them.
    monkeypatch.setenv("TILEFUSE_CACHE_UPDATE_IN_ATTENTION", fold)
    heads, d, cache = 12, 64, 256

    def step(x, w_qkv, k_cache, v_cache, position, mask):
        q, k, v = F.linear(x, w_qkv).split(heads * d, dim=-1)
        q, k, v = (t.view(1, 1, heads, d).transpose(1, 2) for t in (q, k, v))
        k_cache = k_cache.index_copy(2, position, k)
        v_cache = v_cache.index_copy(2, position, v)
        return F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask), k_cache, v_cache

    kernels = cuda_kernels(step, [bf16(1, 1, heads * d), bf16(3 * heads * d, heads * d), bf16(1, heads, cache, d),
                                  bf16(1, heads, cache, d), torch.tensor([37]), bf16(1, 1, 1, cache)])
    attention = [k for k in kernels if k["mode"] == "attention template"]
    assert len(attention) == 1 and "decode form" in attention[0]["strategy"], kernels
    assert ("new key and value written" in attention[0]["strategy"]) == (fold == "1"), kernels
    # The position's wrap of negative indices, a kernel of one element either way; the update's own only unfolded.
    updates = [k for k in kernels if k["mode"] == "generated" and k["strategy"] != "pointwise x1"]
    assert len(updates) == (0 if fold == "1" else 1), kernels
    assert all(k["spill_bytes"] == 0 for k in kernels), kernels


def test_a_convnext_stage_s_first_depthwise_stays_one_kernel_beside_its_norm():
    # ConvNeXt-tiny at batch 1: each stage's first block reads the downsampling layer norm. Its
    # 7x7 depthwise combination had gone into the block's norm with each of the 49 taps left
    # as a kernel copying the input (48 launches and a row kernel spilling 18 kB a thread).
    # torchvision's LayerNorm2d and CNBlock, written out.
    c = 96
    torch.manual_seed(0)
    p = {name: bf16(*shape) * 0.1 for name, shape in
         {"g0": (c,), "b0": (c,), "dw": (c, 1, 7, 7), "dwb": (c,), "g1": (c,), "b1": (c,), "w1": (4 * c, c),
          "bias1": (4 * c,), "w2": (c, 4 * c), "bias2": (c,), "scale": (c, 1, 1)}.items()}

    def stage_start(x):
        x = F.layer_norm(x.permute(0, 2, 3, 1), (c,), p["g0"], p["b0"], 1e-6).permute(0, 3, 1, 2)
        y = F.conv2d(x, p["dw"], p["dwb"], padding=3, groups=c).permute(0, 2, 3, 1)
        y = F.linear(F.gelu(F.linear(F.layer_norm(y, (c,), p["g1"], p["b1"], 1e-6), p["w1"], p["bias1"])), p["w2"], p["bias2"])
        return p["scale"] * y.permute(0, 3, 1, 2) + x

    kernels = cuda_kernels(stage_start, [bf16(1, c, 56, 56)])
    assert any("depthwise" in k["strategy"] for k in kernels), [k["strategy"] for k in kernels]
    assert len(kernels) <= 8, [k["strategy"] for k in kernels]
    assert all(k["spill_bytes"] == 0 for k in kernels), [(k["strategy"], k["spill_bytes"]) for k in kernels]

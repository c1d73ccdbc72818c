"""HF-style models through torch.compile(backend="tilefuse") on the CPU, against eager PyTorch.

The models are written here (no network, no `transformers`): GPT-2, BERT (explicit attention
and SDPA), LLaMA (RMSNorm, rotary, grouped-query attention, SwiGLU), a ResNet and a ViT, small
and randomly initialized from a seed. Each runs through the backend on fresh random inputs and
is compared with eager within 1e-4 of the output's scale (2e-2 in bf16), and each test checks
the log: tilefuse compiled the graph(s) ("compiled a torch.compile graph") and, where every op
is mapped, nothing ran in PyTorch. Then the backend's edges: graph breaks, an op with no
mapping in the middle of a model, a buffer mutated in forward, changing sequence lengths, no
ONNX anywhere on the path, and training (forward through tilefuse, backward in PyTorch or tilefuse).
"""

import logging
import math

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)

COMPILED = "compiled a torch.compile graph"
IN_PYTORCH = "in PyTorch"  # every warning that something ran in PyTorch says this
SPLIT = "running part of a torch.compile graph in PyTorch"
BACKWARD = "the backward graph runs in PyTorch"
OPTIONS = {"backend": "cpu"}


# Dynamo reset around each test, and the "tilefuse" logger captured: conftest.py.
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def messages(logs, text, level=None):
    return [r.getMessage() for r in logs.records
            if r.name == "tilefuse" and text in r.getMessage() and (level is None or r.levelno == level)]


def assert_tilefuse_ran(logs, everything_mapped=True, graphs=1):
    compiled = messages(logs, COMPILED, logging.INFO)
    assert len(compiled) >= graphs, "tilefuse compiled nothing (or too little):\n" + logs.text
    if everything_mapped:
        in_pytorch = messages(logs, IN_PYTORCH, logging.WARNING)
        assert not in_pytorch, "something ran in PyTorch:\n" + "\n".join(in_pytorch)


def compile_cpu(model, **kwargs):
    return torch.compile(model, backend="tilefuse", options=dict(OPTIONS), **kwargs)


def assert_matches(got, want, rel=1e-4):
    """Within `rel` of the output's scale (the whole-model rule of `tilefuse run --check`)."""
    got_leaves, want_leaves = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        scale = w.detach().float().abs().max().item()
        torch.testing.assert_close(g, w, rtol=rel, atol=rel * scale)


def tokens(generator, batch, length, vocab):
    return torch.randint(0, vocab, (batch, length), generator=generator)


# ---------------------------------------------------------------------------------------------
# GPT-2: token + position embeddings, pre-LN blocks, fused qkv, causal SDPA, GELU(tanh), tied head


class GPT2Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        batch, length, hidden = x.shape
        q, k, v = self.c_attn(x).split(hidden, dim=2)
        q, k, v = (t.view(batch, length, self.heads, hidden // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(batch, length, hidden))


class GPT2MLP(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.c_proj = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = GPT2Attention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = GPT2MLP(hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, vocab=500, positions=64, hidden=64, heads=4, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.h = nn.ModuleList(GPT2Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for module in self.modules():  # LayerNorms that are not the identity
            if isinstance(module, nn.LayerNorm):
                nn.init.normal_(module.weight, 1.0, 0.1)
                nn.init.normal_(module.bias, 0.0, 0.1)

    def hidden_states(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)

    def forward(self, input_ids):
        return self.lm_head(self.hidden_states(input_ids))


def gpt2(seed=0, **kwargs):
    torch.manual_seed(seed)
    return GPT2(**kwargs).eval()


def test_gpt2_f32(logs):
    model = gpt2()
    ids = tokens(torch.Generator().manual_seed(1), 2, 24, 500)
    with torch.no_grad():
        expected = model(ids)
        actual = compile_cpu(model)(ids)
    assert_matches(actual, expected)
    assert_tilefuse_ran(logs)


def test_gpt2_bf16(logs):
    model = gpt2().to(torch.bfloat16)
    ids = tokens(torch.Generator().manual_seed(2), 2, 16, 500)
    with torch.no_grad():
        expected = model(ids)
        actual = compile_cpu(model)(ids)
    assert actual.dtype == torch.bfloat16
    assert_matches(actual, expected, rel=2e-2)
    assert_tilefuse_ran(logs)


# ---------------------------------------------------------------------------------------------
# BERT: post-LN encoder, additive float mask from a padding mask, explicit matmul/softmax or SDPA


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads, sdpa):
        super().__init__()
        self.heads, self.head_size, self.sdpa = heads, hidden // heads, sdpa
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1)

    def split_heads(self, x):
        return x.view(x.shape[:-1] + (self.heads, self.head_size)).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        if self.sdpa:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:  # HF BertSelfAttention's eager path
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
            probs = self.dropout(nn.functional.softmax(scores + mask, dim=-1))
            context = torch.matmul(probs, v)
        context = context.permute(0, 2, 1, 3).contiguous()
        return context.view(context.shape[:-2] + (self.heads * self.head_size,))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, sdpa):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, sdpa)
        self.attention_output = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, 4 * hidden)
        self.output = nn.Linear(4 * hidden, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        x = self.attention_norm(self.attention_output(self.attention(x, mask)) + x)
        return self.output_norm(self.output(F.gelu(self.intermediate(x))) + x)


class Bert(nn.Module):
    def __init__(self, sdpa, vocab=500, positions=64, hidden=64, heads=4, layers=2):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.embeddings_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, sdpa) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        positions = torch.arange(input_ids.shape[1]).expand(input_ids.shape)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions) + \
            self.token_type_embeddings(token_type_ids)
        x = self.embeddings_norm(x)
        # HF's get_extended_attention_mask: (B, T) -> (B, 1, 1, T), 0 where seen, dtype's min where padded.
        extended = attention_mask[:, None, None, :].to(x.dtype)
        extended = (1.0 - extended) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, extended)
        return x, torch.tanh(self.pooler(x[:, 0]))


@pytest.mark.parametrize("sdpa", [False, True], ids=["explicit_softmax", "sdpa_attn_mask"])
def test_bert(sdpa, logs):
    torch.manual_seed(3)
    model = Bert(sdpa).eval()
    generator = torch.Generator().manual_seed(4)
    batch, length = 3, 20
    ids = tokens(generator, batch, length, 500)
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[1, 13:] = 0  # padded sequences
    mask[2, 5:] = 0
    token_types = torch.randint(0, 2, (batch, length), generator=generator)
    with torch.no_grad():
        expected = model(ids, mask, token_types)
        actual = compile_cpu(model)(ids, mask, token_types)
    assert_matches(actual, expected)
    assert_tilefuse_ran(logs)


# ---------------------------------------------------------------------------------------------
# LLaMA: RMSNorm, rotary tables from arange in forward, grouped-query attention, SwiGLU


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, kv_repeat):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.kv_repeat = heads, kv_heads, hidden // heads, kv_repeat
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def repeat_kv(self, x):
        groups = self.heads // self.kv_heads
        if self.kv_repeat == "repeat_interleave":
            return x.repeat_interleave(groups, dim=1)
        batch, kv_heads, length, head_dim = x.shape  # HF's repeat_kv
        return x[:, :, None, :, :].expand(batch, kv_heads, groups, length, head_dim).reshape(
            batch, kv_heads * groups, length, head_dim)

    def forward(self, x, cos, sin):
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if self.kv_repeat == "enable_gqa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            y = F.scaled_dot_product_attention(q, self.repeat_kv(k), self.repeat_kv(v), is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(batch, length, -1))


class LlamaMLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, kv_repeat):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = LlamaAttention(hidden, heads, kv_heads, kv_repeat)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = LlamaMLP(hidden, 256)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, kv_repeat="expand", vocab=500, hidden=128, heads=8, kv_heads=2, layers=2, theta=10000.0):
        super().__init__()
        self.head_dim, self.theta = hidden // heads, theta
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, kv_heads, kv_repeat) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def rotary(self, length, dtype):
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim))
        positions = torch.arange(length, dtype=torch.int64).float()
        freqs = positions[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[None]
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, input_ids):
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary(input_ids.shape[1], x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


@pytest.mark.parametrize("kv_repeat", ["expand", "repeat_interleave", "enable_gqa"])
def test_llama(kv_repeat, logs):
    torch.manual_seed(5)
    model = Llama(kv_repeat).eval()
    ids = tokens(torch.Generator().manual_seed(6), 2, 32, 500)
    with torch.no_grad():
        expected = model(ids)
        actual = compile_cpu(model)(ids)
    assert_matches(actual, expected)
    assert_tilefuse_ran(logs)


# ---------------------------------------------------------------------------------------------
# ResNet: conv-bn-relu stem, max pool, basic blocks (one with a stride-2 downsample), avg pool, fc


class BasicBlock(nn.Module):
    def __init__(self, channels_in, channels, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(channels_in, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.downsample = None
        if stride != 1 or channels_in != channels:
            self.downsample = nn.Sequential(nn.Conv2d(channels_in, channels, 1, stride, bias=False),
                                            nn.BatchNorm2d(channels))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, classes)
        for module in self.modules():  # running statistics and affine terms that matter
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.normal_(0.0, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                nn.init.normal_(module.weight, 1.0, 0.2)
                nn.init.normal_(module.bias, 0.0, 0.2)

    def forward(self, x):
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def test_resnet(logs):
    torch.manual_seed(7)
    model = ResNet().eval()
    images = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(8))
    with torch.no_grad():
        expected = model(images)
        actual = compile_cpu(model)(images)
    assert_matches(actual, expected)
    assert_tilefuse_ran(logs)


# ---------------------------------------------------------------------------------------------
# ViT: conv patch embedding, cls token by cat, learned positions, pre-LN encoder (SDPA), head on cls


class ViTBlock(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden, eps=1e-6)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden, eps=1e-6)
        self.fc1 = nn.Linear(hidden, 2 * hidden)
        self.fc2 = nn.Linear(2 * hidden, hidden)

    def forward(self, x):
        batch, length, hidden = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(batch, length, 3, self.heads, hidden // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, hidden))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class ViT(nn.Module):
    def __init__(self, image=32, patch=8, hidden=64, heads=4, layers=2, classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, hidden, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, hidden))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, hidden))
        self.blocks = nn.ModuleList(ViTBlock(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, classes)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


def test_vit_under_inference_mode(logs):
    torch.manual_seed(9)
    model = ViT().eval()
    images = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(10))
    with torch.inference_mode():
        expected = model(images)
        actual = compile_cpu(model)(images)
    assert_matches(actual, expected)
    assert_tilefuse_ran(logs)


# ---------------------------------------------------------------------------------------------
# The backend's edges


class PrintingMLP(nn.Module):
    """A graph break in the middle: Dynamo hands the backend two graphs."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(32, 64)
        self.second = nn.Linear(64, 16)

    def forward(self, x):
        h = F.gelu(self.first(x))
        print("tilefuse test: a graph break", tuple(h.shape))
        return self.second(torch.tanh(h))


class ItemBranch(nn.Module):
    """A Python branch on a tensor's value (.item()): a graph break, and a graph per branch."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(32, 64)
        self.second = nn.Linear(64, 16)

    def forward(self, x):
        h = self.first(x)
        if h.mean().item() > 0:
            h = torch.relu(h)
        else:
            h = torch.sigmoid(h) * 2
        return self.second(h)


def test_graph_break_by_print(logs, capsys):
    torch.manual_seed(11)
    model = PrintingMLP().eval()
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        expected = model(x)
        actual = compile_cpu(model)(x)
    assert_matches(actual, expected)
    assert "a graph break" in capsys.readouterr().out
    assert_tilefuse_ran(logs, graphs=2)  # the graph before the print and the one after it
    assert len(messages(logs, COMPILED)) == 2, logs.text


def test_graph_break_by_item_driven_branch(logs):
    torch.manual_seed(13)
    model = ItemBranch().eval()
    compiled = compile_cpu(model)
    generator = torch.Generator().manual_seed(14)
    with torch.no_grad():
        for shift in (3.0, -3.0):  # both branches
            x = torch.randn(4, 32, generator=generator)
            model.first.bias.fill_(shift)
            assert_matches(compiled(x), model(x))
    # The graph before the break (the first Linear; compiled again after its bias changed in
    # place), and one graph per branch after it, each through tilefuse.
    assert_tilefuse_ran(logs, graphs=3)
    after_the_break = [m for m in messages(logs, COMPILED) if "[(4, 64)]" in m]
    assert len(after_the_break) == 2, logs.text


UNMAPPED = "aten.lgamma.default"


class LgammaGPT2(GPT2):
    """GPT-2 with an arctangent (no tilefuse mapping) between its two blocks."""

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0)
        x = self.h[0](self.wte(input_ids) + self.wpe(positions))
        x = self.h[1](x + torch.lgamma(x.abs() + 3))  # lgamma away from its poles
        return self.lm_head(self.ln_f(x))


def test_an_op_with_no_mapping_in_the_middle(logs):
    from tilefuse.fx import HANDLERS

    assert UNMAPPED not in HANDLERS, f"{UNMAPPED} has a mapping now: pick another op for this test"
    torch.manual_seed(15)
    model = LgammaGPT2().eval()
    compiled = compile_cpu(model)
    generator = torch.Generator().manual_seed(16)
    with torch.no_grad():
        for _ in range(2):
            ids = tokens(generator, 2, 16, 500)
            assert_matches(compiled(ids), model(ids))
    (warning,) = messages(logs, SPLIT, logging.WARNING)  # once, for both calls
    assert UNMAPPED in warning and "(1 call(s))" in warning, warning
    others = [m for m in messages(logs, IN_PYTORCH, logging.WARNING) if m != warning]
    assert not others, others
    assert_tilefuse_ran(logs, everything_mapped=False, graphs=2)  # the stretch before the lgamma and the one after
    assert len(messages(logs, COMPILED)) == 2, "the second call reused both parts:\n" + logs.text


class Counting(nn.Module):
    """Buffers mutated in place in forward: a call counter and a cache of the last input."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("cache", torch.zeros(4, 16))

    def forward(self, x):
        self.count += 1
        self.cache.copy_(x)
        return self.linear(x) * self.count + self.cache.sum()


def run_counting(compiled_model, eager, calls=3, seed=18):
    compiled = compile_cpu(compiled_model)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(calls):
        x = torch.randn(4, 16, generator=generator)
        assert_matches(compiled(x), eager(x))
        assert compiled_model.count.item() == eager.count.item()
        torch.testing.assert_close(compiled_model.cache, eager.cache, rtol=0, atol=0)
    assert eager.count.item() == calls


def counting_pair():
    torch.manual_seed(17)
    eager, compiled_model = Counting().eval(), Counting().eval()
    compiled_model.load_state_dict(eager.state_dict())
    return eager, compiled_model


def test_a_buffer_mutated_in_forward(logs):
    # AOTAutograd keeps an inference graph's mutations as copy_ into its inputs at its end:
    # tilefuse's graph computes the buffers' new values and leaves them in the buffers (on the
    # CPU copied in after the run; on the GPU written in place where that is safe).
    eager, compiled_model = counting_pair()
    with torch.no_grad():
        run_counting(compiled_model, eager)
    assert_tilefuse_ran(logs)


def test_a_buffer_mutated_in_forward_is_not_recompiled_at_each_call(logs):
    # A mutated buffer is read at each call (never folded): one compile for the three calls.
    eager, compiled_model = counting_pair()
    with torch.no_grad():
        run_counting(compiled_model, eager)
    assert len(messages(logs, COMPILED)) == 1, logs.text


def test_a_buffer_mutated_in_forward_of_a_module_made_under_inference_mode():
    with torch.inference_mode():
        eager, compiled_model = counting_pair()  # parameters and buffers are inference tensors
        run_counting(compiled_model, eager)


def test_an_inference_tensor_weight_changed_in_place():
    with torch.inference_mode():
        torch.manual_seed(26)
        model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).eval()
        compiled = compile_cpu(model)
        x = torch.randn(4, 32, generator=torch.Generator().manual_seed(27))
        assert_matches(compiled(x), model(x))
        model[2].bias.add_(1.0)
        assert_matches(compiled(x), model(x))


def test_changing_sequence_lengths(logs):
    model = gpt2(seed=19)
    compiled = compile_cpu(model)
    generator = torch.Generator().manual_seed(20)
    counts = []
    with torch.no_grad():
        for length in (16, 24, 32, 24):
            ids = tokens(generator, 2, length, 500)
            assert_matches(compiled(ids), model(ids))
            counts.append(len(messages(logs, COMPILED)))
    assert counts[-1] == counts[-2], "the repeated length found its compiled model:\n" + logs.text
    assert counts[2] >= 3, logs.text  # a compile for each new length
    assert_tilefuse_ran(logs)


def test_no_onnx_on_the_path(logs, monkeypatch):
    def no_onnx(*args, **kwargs):
        raise AssertionError("torch.onnx was called on the torch.compile path")

    monkeypatch.setattr(torch.onnx, "export", no_onnx)
    if hasattr(torch.onnx, "dynamo_export"):
        monkeypatch.setattr(torch.onnx, "dynamo_export", no_onnx)
    model = gpt2(seed=21)
    ids = tokens(torch.Generator().manual_seed(22), 1, 16, 500)
    with torch.no_grad():
        assert_matches(compile_cpu(model)(ids), model(ids))
    assert_tilefuse_ran(logs)


class TrainableMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(32, 64)
        self.second = nn.Linear(64, 64)
        self.out = nn.Linear(64, 8)

    def forward(self, x):
        return self.out(torch.tanh(self.second(F.gelu(self.first(x)))))


def _train_step(model, compiled, x, target):
    expected = model(x)
    F.mse_loss(expected, target).backward()
    expected_grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    actual = compiled(x)
    F.mse_loss(actual, target).backward()
    return expected, actual, expected_grads, {name: p.grad for name, p in model.named_parameters()}


# GPT-2's training forward saves native_layer_norm's mean and rstd and SDPA's logsumexp
# (_scaled_dot_product_flash_attention_for_cpu) for PyTorch's backward: tilefuse computes them.
@pytest.mark.parametrize("backward", ["pytorch", "tilefuse"])
@pytest.mark.parametrize("make", [TrainableMLP, lambda: gpt2(seed=25).train()], ids=["mlp", "gpt2"])
def test_training_forward_in_tilefuse_backward_in_pytorch_or_tilefuse(make, backward, logs):
    torch.manual_seed(23)
    model = make()
    assert all(p.requires_grad for p in model.parameters())
    compiled = torch.compile(model, backend="tilefuse", options=dict(OPTIONS, backward=backward))
    generator = torch.Generator().manual_seed(24)
    if isinstance(model, GPT2):
        x = tokens(generator, 2, 16, 500)
        target = torch.randn(2, 16, 500, generator=generator)
    else:
        x = torch.randn(8, 32, generator=generator)
        target = torch.randn(8, 8, generator=generator)
    assert torch.is_grad_enabled()
    expected, actual, expected_grads, grads = _train_step(model, compiled, x, target)
    assert actual.requires_grad
    assert_matches(actual.detach(), expected.detach())
    for name, grad in grads.items():
        assert grad is not None, name
        torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-4 * expected_grads[name].abs().max())
    assert bool(messages(logs, BACKWARD, logging.WARNING)) == (backward == "pytorch"), logs.text
    assert len(messages(logs, COMPILED)) >= (1 if backward == "pytorch" else 2), "through tilefuse:\n" + logs.text
    # What a backward through tilefuse splits out on the CPU: the flash attention's backward
    # and the embedding's index_put (no mappings yet).
    others = [m for m in messages(logs, IN_PYTORCH, logging.WARNING) if BACKWARD not in m and
              not ("running part of" in m and backward == "tilefuse")]
    assert not others, others

"""Greedy decoding through an ONNX export with a KV cache (bench/onnx_decode.py: a prefill
model and a step model whose past length is the symbolic dim `past`) on the CPU backend: the
step compiles once per new past length and never again, its weights read from the file once,
and the tokens and logits are eager PyTorch's (small models, random weights from configs)."""
import sys

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed in this Python")

from conftest import REPO  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
try:
    import onnx_decode  # noqa: E402
finally:
    sys.path.pop(0)

PROMPT, NEW = 6, 7


def _model(name):
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=300, n_positions=64)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


def _eager(model, prompt):
    """Greedy tokens and the first decode step's last logits, eager with the dynamic cache."""
    with torch.no_grad():
        out = model(input_ids=prompt, use_cache=True)
        token, cache = out.logits[:, -1:].argmax(-1), out.past_key_values
        tokens, first = [token], None
        for i in range(NEW - 1):
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            if i == 0:
                first = out.logits[:, -1]
            token, cache = out.logits[:, -1:].argmax(-1), out.past_key_values
            tokens.append(token)
    return torch.cat(tokens, 1), first


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_an_onnx_kv_cache_export_decodes_compiling_each_past_length_once(name, tmp_path):
    model = _model(name)
    prompt = torch.randint(0, 300, (1, PROMPT), generator=torch.Generator().manual_seed(1))
    paths = onnx_decode.export(model, prompt, str(tmp_path), torch, transformers)
    prefill, step = onnx_decode.tilefuse_runners(paths, "cpu")
    expected_tokens, expected_logits = _eager(model, prompt)
    for generation in range(2):
        tokens, logits, _ = onnx_decode.generate(torch, prefill, step, prompt, NEW)
        torch.testing.assert_close(tokens, expected_tokens, rtol=0, atol=0)
        scale = expected_logits.abs().max()
        assert (logits - expected_logits).abs().max() <= 1e-4 * scale, generation
        # The step ran at past lengths PROMPT ... PROMPT + NEW - 2: each compiled in the first
        # generation, none in the second.
        assert step.compiles == NEW - 1, generation
        assert prefill.compiles == 1

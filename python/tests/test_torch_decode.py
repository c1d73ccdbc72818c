"""Greedy decoding with transformers' static KV cache through torch.compile(backend="tilefuse")
on the CPU: the prompt's graph and the decode step's graph compile once, and every later token
runs the same compiled step (the cache's update, index_copy_ at the step's position, a node of
tilefuse's graph, not split out). Tokens and logits match eager's (small models, random weights
from configs: no download)."""
import logging

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python (scripts/test.sh installs "
                                            "it into build/venv)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed in this Python")

import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from test_torch_models import COMPILED, IN_PYTORCH, messages  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_dynamo")

PROMPT, NEW = 7, 9


def _generate(forward, config, prompt):
    """Greedy tokens after `prompt` and each step's last logits, with a static cache."""
    cache = transformers.StaticCache(config=config, max_cache_len=PROMPT + NEW)
    position = torch.arange(PROMPT)
    tokens, logits = [], []
    with torch.no_grad():
        out = forward(input_ids=prompt, past_key_values=cache, cache_position=position, use_cache=True).logits
        for _ in range(NEW):
            logits.append(out[:, -1].clone())
            tokens.append(out[:, -1:].argmax(-1))
            position = position[-1:] + 1
            out = forward(input_ids=tokens[-1], past_key_values=cache, cache_position=position, use_cache=True).logits
    return torch.cat(tokens, 1), torch.stack(logits)


def _model(name):
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=300, n_positions=64)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_static_cache_decoding_compiles_the_step_once(name, logs):
    model = _model(name)
    prompt = torch.randint(0, model.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(3))
    expected_tokens, expected_logits = _generate(model, model.config, prompt)
    compiled = torch.compile(model.forward, backend="tilefuse", options={"backend": "cpu"})
    tokens, logits = _generate(compiled, model.config, prompt)
    scale = expected_logits.abs().max().item()
    torch.testing.assert_close(logits, expected_logits, rtol=1e-4, atol=1e-4 * scale)
    assert torch.equal(tokens, expected_tokens)
    assert not messages(logs, IN_PYTORCH, logging.WARNING), logs.text
    # The prompt's graph and the step's: every later step reuses the step's.
    assert len(messages(logs, COMPILED)) == 2, "\n".join(messages(logs, COMPILED))
    # The step updates each layer's keys and values as its graph's own outputs (AOTAutograd's
    # copy_ into the cache kept in the graph), not as copies PyTorch makes after the call.
    step = [s for g in tilefuse.torch_backend._live_graphs() for s in g.compiled.values()
            if s is not None and s.input_shapes[0] == (1, 1)]
    assert len(step) == 1 and len(step[0].mutations) >= 2 * model.config.num_hidden_layers, step
    # A second generation (a fresh cache, another prompt) compiles nothing.
    before = len(messages(logs, COMPILED))
    again = torch.randint(0, model.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(4))
    tokens, _ = _generate(compiled, model.config, again)
    assert torch.equal(tokens, _generate(model, model.config, again)[0])
    assert len(messages(logs, COMPILED)) == before, "\n".join(messages(logs, COMPILED))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the cache written in place and the step's graph "
                                                          "replayed are the GPU runtime's")
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_static_cache_decoding_on_the_gpu_writes_the_cache_in_place_and_replays_the_step(name, logs):
    # Every step's token ids, position and logits are fresh tensors (new pointers): the runtime
    # reads and writes them through its own buffers, so the step's captured graph replays; the
    # cache's keys and values are written where they lie, not copied after the run.
    model = _model(name).cuda()
    prompt = torch.randint(0, model.config.vocab_size, (1, PROMPT), generator=torch.Generator().manual_seed(3)).cuda()
    expected_tokens, expected_logits = _generate(model, model.config, prompt)
    compiled = torch.compile(model.forward, backend="tilefuse")
    tokens, logits = _generate(compiled, model.config, prompt)
    scale = expected_logits.abs().max().item()
    torch.testing.assert_close(logits, expected_logits, rtol=1e-3, atol=1e-3 * scale)
    assert torch.equal(tokens, expected_tokens)
    assert not messages(logs, IN_PYTORCH, logging.WARNING), logs.text
    step = [s for g in tilefuse.torch_backend._live_graphs() for s in g.compiled.values()
            if s is not None and s.input_shapes[0] == (1, 1)]
    assert len(step) == 1 and step[0].model.backend == "cuda", step
    assert len(step[0].in_place) == len(step[0].mutations), (step[0].in_place, step[0].mutations)
    runs = step[0].model.device_run_counts
    assert runs["replays"] >= NEW // 2, runs
    # Of the updated inputs only counters (one a layer) may go through the runtime's buffers;
    # the caches (two a layer) are written where they lie.
    calls = runs["replays"] + runs["one_by_one"] + runs["through_buffers"]
    assert runs["output_copies"] <= calls * model.config.num_hidden_layers, runs
    assert runs["staged_copies"] > 0, runs


def _forced(forward, config, tokens):
    """Each step's last logits (f32) with `tokens` fed in (the first PROMPT at once, then one a
    step: the same inputs for every forward, whatever it would have chosen) and the static
    cache's keys and values after the last step. As bench/decode.py feeds a step: the position on
    the tokens' device and each step's token a tensor of its own (a CPU position or a view at an
    offset made Dynamo compile the step again and again, not every graph taking the fold)."""
    cache = transformers.StaticCache(config=config, max_cache_len=tokens.shape[1])
    position = torch.arange(PROMPT, device=tokens.device)
    logits = []
    with torch.no_grad():
        out = forward(input_ids=tokens[:, :PROMPT].clone(), past_key_values=cache, cache_position=position, use_cache=True).logits
        for t in range(PROMPT, tokens.shape[1]):
            logits.append(out[:, -1].float())
            position = position[-1:] + 1
            out = forward(input_ids=tokens[:, t:t + 1].clone(), past_key_values=cache, cache_position=position,
                          use_cache=True).logits
    return torch.stack(logits), [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]


def _head_dim_64_model(name):
    """GPT-2's or a LLaMA-style config of two layers, 256 wide in heads of 64 (the decode
    attention's form), random weights (seed 0), in eval mode."""
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=300, n_positions=64)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the decode attention and its cache update are the "
                                                          "GPU's attention template")
@pytest.mark.parametrize("fold", ["1", "0"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_bf16_decoding_on_the_gpu_with_the_cache_update_in_the_attention(name, fold, logs, monkeypatch):
    # Head dim 64, bf16: the step's attention takes the template's decode form, which with
    # TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1 writes the new keys and values into the cache itself.
    # The same tokens fed to eager and to the compiled model: the logits agree within bf16's
    # rounding, and so do the caches after the last step (every position written, none other).
    monkeypatch.setenv("TILEFUSE_CACHE_UPDATE_IN_ATTENTION", fold)
    model = _head_dim_64_model(name).cuda().to(torch.bfloat16)
    config = model.config
    tokens = torch.randint(0, config.vocab_size, (1, PROMPT + NEW), generator=torch.Generator().manual_seed(5)).cuda()
    expected_logits, expected_cache = _forced(model, model.config, tokens)
    earlier = {id(g) for g in tilefuse.torch_backend._live_graphs()}  # (other tests' graphs may live on)
    compiled = torch.compile(model.forward, backend="tilefuse")
    for attempt in range(2):  # the second time through the step's captured graph
        logits, cache = _forced(compiled, model.config, tokens)
        scale = expected_logits.abs().max().item()
        steps = [round(d, 3) for d in ((logits - expected_logits).abs().amax(dim=-1).flatten() / scale).tolist()]
        torch.testing.assert_close(logits, expected_logits, rtol=0, atol=3e-2 * scale,
                                   msg=lambda m: f"pass {attempt}, each step's largest difference / scale {steps}: {m}")
        for (keys, values), (expected_keys, expected_values) in zip(cache, expected_cache):
            torch.testing.assert_close(keys, expected_keys, rtol=2e-2, atol=2e-2)
            torch.testing.assert_close(values, expected_values, rtol=2e-2, atol=2e-2)
    assert not messages(logs, IN_PYTORCH, logging.WARNING), logs.text
    step = [s for g in tilefuse.torch_backend._live_graphs() if id(g) not in earlier for s in g.compiled.values()
            if s is not None and s.input_shapes[0] == (1, 1)]
    # Some one-token graph folds where asked, none where not (a position Dynamo specialized to a
    # constant would keep the update's kernel: the fold reads the position from memory).
    assert step and all(s.model.backend == "cuda" for s in step), step
    folded = []
    for s in step:
        attention = [k for k in s.model.kernels if k.mode == "attention template"]
        assert len(attention) == config.num_hidden_layers, [k.strategy for k in s.model.kernels]
        folded += ["new key and value written" in k.strategy for k in attention]
    assert any(folded) == (fold == "1"), [k.strategy for s in step for k in s.model.kernels if k.mode == "attention template"]

"""Where a compiled decode step's logits leave eager's: the GPU fold test's models (GPT-2 and
LLaMA configs, two layers, bf16) fed the same tokens, eager and torch.compile(backend="tilefuse"),
twice (the second time through captured graphs); per step the largest logit difference, as a
fraction of the logits' scale, and the step's runtime counters. Run it under the switches to
compare (TILEFUSE_SKINNY_NORMS, TILEFUSE_CACHE_UPDATE_IN_ATTENTION, TILEFUSE_LAUNCH_TOGETHER).

    PYTHONPATH=... python3 bench/experiments/decode_mismatch_probe.py [gpt2|llama ...]
"""
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from test_torch_decode import PROMPT, NEW, _forced  # noqa: E402


def model_named(name):
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=300, n_positions=64)
        return transformers.GPT2LMHeadModel(config)
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=300, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config)


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    switches = {k: v for k, v in os.environ.items() if k.startswith("TILEFUSE_")}
    for name in sys.argv[1:] or ["gpt2", "llama"]:
        torch._dynamo.reset()
        model = model_named(name).eval().to(device, torch.bfloat16)
        tokens = torch.randint(0, model.config.vocab_size, (1, PROMPT + NEW), generator=torch.Generator().manual_seed(5)).to(device)
        expected, expected_cache = _forced(model, model.config, tokens)
        scale = expected.abs().max().item()
        compiled = torch.compile(model.forward, backend="tilefuse")
        for attempt in range(2):
            logits, cache = _forced(compiled, model.config, tokens)
            steps = ((logits - expected).abs().amax(dim=-1).flatten() / scale).tolist()
            zeros = [int((row == 0).all()) for row in logits.reshape(logits.shape[0], -1)]
            keys = max((k - e).abs().max().item() for (k, _), (e, _) in zip(cache, expected_cache))
            print(f"{name} {switches} pass {attempt}: step max |diff|/scale {[round(s, 3) for s in steps]}; "
                  f"all-zero steps {zeros}; keys max |diff| {keys:.3g}", flush=True)
        for g in tilefuse.torch_backend._live_graphs():
            for s in g.compiled.values():
                if s is not None and s.input_shapes[0] == (1, 1):
                    # (The kernel list names folded groups too: count the folds by their strategies.)
                    folds = sum("new key and value written" in k.strategy for k in s.model.kernels)
                    norms = sum("norm of its input" in k.strategy for k in s.model.kernels)
                    print(f"  step graph: {len(s.model.kernels)} groups, {folds} attention(s) with the cache update, "
                          f"{norms} product(s) computing a norm, counters {s.model.device_run_counts}, "
                          f"in place {len(s.in_place)}/{len(s.mutations)}", flush=True)


if __name__ == "__main__":
    main()

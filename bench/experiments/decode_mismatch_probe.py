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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python", "tests"))
import tilefuse.torch_backend  # noqa: E402,F401  (registers the backend)
from test_torch_decode import NEW, PROMPT, _forced, _head_dim_64_model  # noqa: E402


def main():
    device = "cuda" if torch.cuda.is_available() else "cpu"
    switches = {k: v for k, v in os.environ.items() if k.startswith("TILEFUSE_")}
    for name in sys.argv[1:] or ["gpt2", "llama"]:
        torch._dynamo.reset()
        model = _head_dim_64_model(name).to(device, torch.bfloat16)
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

#!/usr/bin/env python3
"""The CUDA plan of a KV-cache decode step through torch.compile(backend="tilefuse"), built on a
machine without a GPU: HF GPT-2 (or a LLaMA-style model) with transformers' static cache runs its
prompt and one step on the CPU in PyTorch (each graph refused after it is captured), then the
step's captured graph is translated and built for sm_90a (NVRTC, no GPU), its launches listed with
their mode and strategy. How many launches a step makes, and of what, before spending GPU time.

    PYTHONPATH=build/python python3 bench/experiments/decode_step_plan.py --model gpt2 [--dump DIR]
"""
import argparse
import collections
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import decode  # noqa: E402
import tilefuse.torch_backend as backend  # noqa: E402
from tilefuse import _tilefuse  # noqa: E402
from tilefuse.fx import Unsupported, folded_weights, translate  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gpt2", choices=["gpt2", "llama"])
parser.add_argument("--cache", type=int, default=256, help="the static cache's positions (decode.py: prompt + new)")
parser.add_argument("--dump", default="", help="the compile stages into DIR (--dump-dir's files)")
args = parser.parse_args()
torch.manual_seed(0)
model = decode.build_model(args.model, torch, transformers).to(torch.bfloat16).eval()
captured = []


def spy(self, gm, call_args, weights, settings, *more):  # more: all_weights, row_major_outputs
    all_weights = more[0] if more else weights
    # The weights as a GPU takes them: inputs, but for those folding computes with.
    captured.append((gm, list(call_args), folded_weights(gm, set(all_weights), "inputs"), more[1] if len(more) > 1 else frozenset()))
    raise Unsupported("captured for the experiment")


backend._Specialization.__init__ = spy
forward = torch.compile(model.forward, backend="tilefuse")
cache = transformers.StaticCache(config=model.config, max_cache_len=args.cache)
with torch.no_grad():
    position = torch.arange(8)
    logits = forward(input_ids=torch.randint(0, 500, (1, 8)), past_key_values=cache, cache_position=position, use_cache=True).logits
    forward(input_ids=logits[:, -1:].argmax(-1), past_key_values=cache, cache_position=position[-1:] + 1, use_cache=True)
gm, call_args, folded, row_major_outputs = captured[-1]
translation = translate(gm, call_args, folded, row_major_outputs)
kernels = _tilefuse.build_graph_for_cuda_arch(translation.graph, dump_dir=args.dump)
print(f"decode step: {len(gm.graph.nodes)} FX nodes, {len(kernels)} launches {dict(collections.Counter(k['mode'] for k in kernels))}")
for k in kernels:
    print(f"  {k['name']:<30} {k['mode']:<18} {k['strategy'][:170]}")

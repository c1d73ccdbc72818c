#!/usr/bin/env python3
"""Where a warm first call of torch.compile(backend="tilefuse") goes (Python's cProfile), on a
machine with a GPU: GPT-2 small, the kernel cache filled by a first compile, then Dynamo reset
and the call profiled, per --weights setting.

    PYTHONPATH=... python3 bench/experiments/torch_first_call_profile.py --shape 8x512 --weights auto --weights fold
"""
import argparse
import cProfile
import io
import pstats
import time

import torch
import transformers

import tilefuse.torch_backend as backend

parser = argparse.ArgumentParser()
parser.add_argument("--shape", default="8x512")
parser.add_argument("--weights", action="append", default=[])
parser.add_argument("--top", type=int, default=30)
args = parser.parse_args()
batch, seq = (int(v) for v in args.shape.split("x"))
torch.manual_seed(0)
config = transformers.GPT2Config()
model = transformers.GPT2LMHeadModel(config).to("cuda", torch.bfloat16).eval()
ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
with torch.no_grad():
    for weights in args.weights or ["auto"]:
        for state in ("fill the caches", "profiled"):
            torch._dynamo.reset()
            backend._MODELS.clear()
            compiled = torch.compile(lambda x: model(x, use_cache=False), backend="tilefuse", options={"weights": weights})
            profile = cProfile.Profile() if state == "profiled" else None
            start = time.perf_counter()
            if profile:
                profile.enable()
            compiled(ids)
            torch.cuda.synchronize()
            if profile:
                profile.disable()
            print(f"weights {weights}, {state}: first call {time.perf_counter() - start:.2f} s", flush=True)
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
        print(text.getvalue(), flush=True)
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(args.top)
        print(text.getvalue(), flush=True)

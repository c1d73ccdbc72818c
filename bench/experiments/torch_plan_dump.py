#!/usr/bin/env python3
"""GPT-2 small's forward graph through tilefuse.fx compiled twice in one process on the GPU, its
compile stages printed and the first compile's IR dumped (--dump DIR): where a cold compile's
plan stage goes, on a machine with a GPU.

    PYTHONPATH=... python3 bench/experiments/torch_plan_dump.py --shape 8x512 --dump out/dump
"""
import argparse
import time

import torch
import transformers

import tilefuse.torch_backend as backend
from tilefuse import _tilefuse
from tilefuse.fx import Unsupported, translate

parser = argparse.ArgumentParser()
parser.add_argument("--shape", default="8x512")
parser.add_argument("--dump", default="")
parser.add_argument("--compiles", type=int, default=2)
args = parser.parse_args()
batch, seq = (int(v) for v in args.shape.split("x"))
torch.manual_seed(0)
config = transformers.GPT2Config()
model = transformers.GPT2LMHeadModel(config).to("cuda", torch.bfloat16).eval()
ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
captured = {}
init = backend._Specialization.__init__


def spy(self, gm, call_args, weights, settings, *more):  # more: all_weights, row_major_outputs
    """Keeps the graph and refuses it (PyTorch runs this call): the compiles below are the process's first."""
    captured.update(gm=gm, args=list(call_args), weights=weights)
    raise Unsupported("captured for the experiment")


backend._Specialization.__init__ = spy
with torch.no_grad():
    torch.compile(lambda x: model(x, use_cache=False), backend="tilefuse")(ids)
for i in range(args.compiles):
    start = time.perf_counter()
    translation = translate(captured["gm"], captured["args"], captured["weights"])
    translated = time.perf_counter()
    graph = _tilefuse.compile_graph(translation.graph, "cuda", False, True, 0, False, args.dump if i == 0 else "", "highest")
    stages = ", ".join(f"{name} {ms:.0f}" for name, ms in graph.compile_stages_ms)
    print(f"compile {i}: translated in {1e3 * (translated - start):.0f} ms, compiled in "
          f"{1e3 * (time.perf_counter() - translated):.0f} ms: {stages}", flush=True)

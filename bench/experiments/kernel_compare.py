#!/usr/bin/env python3
"""One forward's GPU kernels, tilefuse's against torch.compile's, in one process on a machine
with a GPU: tilefuse's kernels timed one by one (CompiledModel.profile, device events) with the
strategy each runs, and torch.compile()'s kernels from torch.profiler (default mode: the same
kernels CUDA graphs replay), each averaged over the profiled calls. Where a model's time goes,
side by side.

    PYTHONPATH=... python3 bench/experiments/kernel_compare.py --model gpt2 --shape 8x512
"""
import argparse
import collections
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torch_frontend import VISION, build_model, model_input  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gpt2")
parser.add_argument("--shape", default="8x512")
parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
parser.add_argument("--calls", type=int, default=5)
parser.add_argument("--top", type=int, default=30)
parser.add_argument("--first", type=int, default=10, help="also list the first N kernels one by one")
parser.add_argument("--device", default="cuda", help="cpu: a dry run of this script on the CPU backend")
parser.add_argument("--options", default="{}", help='torch.compile options for tilefuse, JSON (e.g. {"tune": true})')
args = parser.parse_args()

import torch  # noqa: E402
import transformers  # noqa: E402
import tilefuse.torch_backend as backend  # noqa: E402

dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
model, vocab = build_model(args.model, torch, transformers)
model = model.to(args.device, dtype).eval()
x = model_input(torch, args.model, args.shape, vocab, dtype, args.device)
eager = (lambda t: model(t)) if args.model in VISION + ("bert",) else (lambda t: model(t, use_cache=False))


def kind(name):
    """A kernel's name without its group number (tilefuse) or its generated index (Triton)."""
    return re.sub(r"_\d+$", "", re.sub(r"tf_group\d+_", "", name))


with torch.no_grad():
    compiled = torch.compile(eager, backend="tilefuse", options=json.loads(args.options))
    compiled(x)
    backend.finish_compiles()
    compiled(x)
    profiles, strategies, run = [], {}, backend._Specialization.run

    def profiled(self, call_args):
        profiles.append(self.model.profile(*self.inputs_of(call_args)))
        strategies.update({k.name: f"{k.mode}: {k.strategy}" for k in self.model.kernels})
        return run(self, call_args)

    backend._Specialization.run = profiled
    compiled(x)
    backend._Specialization.run = run
    by_kind = collections.defaultdict(lambda: [0, 0.0, ""])
    total = 0.0
    for profile in profiles:
        for timing in profile:  # (name, µs) or (name, start µs, µs)
            name, us = timing[0], timing[-1]
            strategy = strategies.get(name, strategies.get(name.rsplit("_", 1)[0], ""))
            entry = by_kind[(kind(name), strategy)]  # the same kernel in every layer, one line
            entry[0] += 1
            entry[1] += us
            entry[2] = strategy
            total += us
    print(f"== tilefuse: {sum(len(p) for p in profiles)} kernels, {total:.0f} µs timed one by one")
    for (k, _), (n, us, strategy) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {us:9.1f} µs  {n:3d} x {us / n:7.1f}  {k:<16} {strategy[:200]}")
    print(f"-- the first {args.first} kernels in order (a model's first layer):")
    for timing in profiles[0][:args.first]:
        name, us = timing[0], timing[-1]
        print(f"  {us:9.1f} µs  {name:<26} {strategies.get(name, '')[:200]}")

    torch._dynamo.reset()
    peer = torch.compile(eager)
    for _ in range(3):
        peer(x)
    activity = torch.profiler.ProfilerActivity.CUDA if args.device == "cuda" else torch.profiler.ProfilerActivity.CPU
    with torch.profiler.profile(activities=[activity]) as prof:
        for _ in range(args.calls):
            peer(x)
    device_type = torch.autograd.DeviceType.CUDA if args.device == "cuda" else torch.autograd.DeviceType.CPU
    rows = [e for e in prof.key_averages() if e.device_type == device_type and e.self_device_time_total > 0]
    total = sum(e.self_device_time_total for e in rows) / args.calls
    print(f"== torch.compile: {sum(e.count for e in rows) / args.calls:.0f} kernels a call, {total:.0f} µs")
    for e in sorted(rows, key=lambda e: -e.self_device_time_total)[:args.top]:
        us = e.self_device_time_total / args.calls
        print(f"  {us:9.1f} µs  {e.count / args.calls:5.1f} x {us * args.calls / e.count:7.1f}  {e.key[:150]}")

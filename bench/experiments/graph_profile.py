#!/usr/bin/env python3
"""Where a forward's time goes inside its CUDA graph, tilefuse's against torch.compile's
(mode="reduce-overhead"), in one process on a machine with a GPU.

kernel_compare.py times tilefuse's kernels one by one, which overstates short kernels (each
pays a launch and two events). Here both sides replay their CUDA graphs as they do when timed,
under torch.profiler, whose CUDA activity records every kernel node of a replayed graph with
its own start and duration. Printed per side: the kernels by kind (time inside the graph),
the span of one call (first kernel's start to last kernel's end), the idle time between
kernels in that span, and the first kernels of a call in order with their gaps.

    PYTHONPATH=... python3 bench/experiments/graph_profile.py --model gpt2 --shape 1x128
"""
import argparse
import collections
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from torch_frontend import VISION, build_model, model_input  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="gpt2")
parser.add_argument("--shape", default="1x128")
parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
parser.add_argument("--calls", type=int, default=10)
parser.add_argument("--top", type=int, default=25)
parser.add_argument("--first", type=int, default=16, help="list the first N kernels of a call in order")
parser.add_argument("--options", default="{}", help='torch.compile options for tilefuse, JSON')
parser.add_argument("--peer", action="store_true", help="also profile torch.compile(mode='reduce-overhead')")
parser.add_argument("--explain", default="", help="write tilefuse's plans (torch_backend.explain()) to this JSON file")
args = parser.parse_args()

import torch  # noqa: E402
import transformers  # noqa: E402
import tilefuse.torch_backend as backend  # noqa: E402

dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
model, vocab = build_model(args.model, torch, transformers)
model = model.to("cuda", dtype).eval()
x = model_input(torch, args.model, args.shape, vocab, dtype)
eager = (lambda t: model(t)) if args.model in VISION + ("bert",) else (lambda t: model(t, use_cache=False))


def kind(name):
    """A kernel's name without its group number (tilefuse) or its generated index (Triton)."""
    return re.sub(r"_\d+$", "", re.sub(r"tf_group\d+_", "", name))[:110]


def kernels_of(fn):
    """(name, start µs, duration µs) of every GPU kernel of args.calls calls, in start order."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(args.calls):
            fn(x)
            torch.cuda.synchronize()  # calls apart, so a call's span is its own
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        events = json.load(open(trace.name))["traceEvents"]
    rows = [(e["name"], float(e["ts"]), float(e["dur"])) for e in events
            if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and "dur" in e]
    return sorted(rows, key=lambda r: r[1])


def calls_of(rows):
    """The rows split into calls where the device sat idle more than 50 µs (the synchronize)."""
    calls, current, end = [], [], None
    for row in rows:
        if end is not None and row[1] - end > 50.0:
            calls.append(current)
            current = []
        current.append(row)
        end = max(end or 0.0, row[1] + row[2])
    if current:
        calls.append(current)
    return calls


def host_and_device(title, fn, calls=20):
    """A call's host time (issuing `calls` calls without waiting) beside its device time (CUDA
    events around the same calls back to back): a call whose host time is the longer is host-bound."""
    import time
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    began = time.perf_counter()
    for _ in range(calls):
        fn(x)
    issued = time.perf_counter() - began
    end.record()
    torch.cuda.synchronize()
    print(f"== {title}: host {1e6 * issued / calls:.1f} µs a call, device {1e3 * start.elapsed_time(end) / calls:.1f} µs "
          f"a call ({calls} calls back to back)")


def report(title, rows):
    calls = calls_of(rows)
    if not calls:
        print(f"== {title}: no kernels recorded")
        return
    spans = [c[-1][1] + c[-1][2] - c[0][1] for c in calls]
    busy = [sum(r[2] for r in c) for c in calls]
    n = len(calls)
    spans.sort()
    median = spans[n // 2]
    print(f"== {title}: {len(rows) / n:.0f} kernels a call over {n} calls; span median {median:.1f} µs, "
          f"kernels {sum(busy) / n:.1f} µs, idle between {median - sorted(busy)[n // 2]:.1f} µs")
    by_kind = collections.defaultdict(lambda: [0, 0.0])
    for c in calls:
        for name, _, us in c:
            by_kind[kind(name)][0] += 1
            by_kind[kind(name)][1] += us
    for k, (count, us) in sorted(by_kind.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {us / n:8.1f} µs  {count / n:5.1f} x {us / count:6.2f}  {k}")
    print(f"-- the first {args.first} kernels of the median call, in order (start gap, duration):")
    call = calls[n // 2]
    end = call[0][1]
    for name, start, us in call[:args.first]:
        print(f"  +{start - end:5.2f} {us:7.2f} µs  {kind(name)}")
        end = start + us


with torch.no_grad():
    compiled = torch.compile(eager, backend="tilefuse", options=json.loads(args.options))
    compiled(x)
    backend.finish_compiles()
    for _ in range(5):
        compiled(x)
    report(f"tilefuse {args.model} {args.shape} {args.dtype}", kernels_of(compiled))
    host_and_device("tilefuse", compiled)
    if args.explain:
        with open(args.explain, "w") as f:
            json.dump(backend.explain(), f, indent=1, default=str)
    if args.peer:
        torch._dynamo.reset()
        peer = torch.compile(eager, mode="reduce-overhead")
        for _ in range(5):
            peer(x)
        report(f"torch.compile reduce-overhead {args.model} {args.shape} {args.dtype}", kernels_of(peer))
        host_and_device("torch.compile reduce-overhead", peer)

"""Where a decode step's time goes on the host: the whole step (the loop's wall time a step, no
synchronize inside it), tilefuse's graph call (TilefuseGraph.__call__), its launch
(CompiledModel.call_checked: the inputs' pointers read, the outputs allocated, the runtime's
run_device) and the rest (Dynamo's guards, AOTAutograd's wrappers, the model's
Python outside the graph, the argmax); then the step's device time alone (the compiled step
launched back to back with the same inputs, CUDA events), which bounds a step from below when
the host is fast enough.

    PYTHONPATH=... python3 bench/experiments/decode_host_time_probe.py [--model gpt2] [--steps 64]
"""
import argparse
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import decode  # noqa: E402
import tilefuse.torch_backend as backend  # noqa: E402
from tilefuse import _model  # noqa: E402

spent = {"graph call": 0.0, "launch": 0.0, "outputs": 0.0, "run_device": 0.0}
calls = {"graph call": 0, "launch": 0, "outputs": 0, "run_device": 0}
last = {}


def timed(name, function):
    def wrapper(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return function(self, *args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - began
            calls[name] += 1
            last[name] = (self, args, kwargs)
    return wrapper


def launch_on_device(self, torch_, pointers, into=None, inputs=()):
    """CompiledModel._launch_on_device with its two parts timed: the outputs allocated and
    gathered with the inputs updated in place, and the runtime's run (run_device: C++, the
    captured graph's launch and the staged copies' launches)."""
    began = time.perf_counter()
    if into is None:
        outputs = self._empty_outputs()
        output_pointers = [o.data_ptr() for o in outputs]
    else:
        fresh = self._empty_outputs(only=into.fresh)
        outputs = into.gather(inputs, fresh)
        output_pointers = into.gather(pointers, [o.data_ptr() for o in fresh])
    allocated = time.perf_counter()
    self._graph.run_device(pointers, output_pointers, self._current_stream())
    spent["outputs"] += allocated - began
    spent["run_device"] += time.perf_counter() - allocated
    calls["outputs"] += 1
    calls["run_device"] += 1
    return outputs


backend.TilefuseGraph.__call__ = timed("graph call", backend.TilefuseGraph.__call__)
_model.CompiledModel.call_checked = timed("launch", _model.CompiledModel.call_checked)
_model.CompiledModel._launch_on_device = launch_on_device


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--timeline", action="store_true", help="print the compiled step's kernels on the device's timeline")
    parser.add_argument("--host", action="store_true", help="profile a generation's host time (cProfile), and time the steps "
                        "with tilefuse's graph call returning its last outputs (the host time outside tilefuse)")
    args = parser.parse_args()
    model = decode.build_model(args.model, torch, transformers).to("cuda", torch.bfloat16).eval()
    prompt = torch.randint(0, model.config.vocab_size, (1, 128), device="cuda")
    forward = torch.compile(model.forward, backend="tilefuse")
    decode.generate(torch, transformers, forward, model, prompt, args.steps, True)  # compiles
    for generation in range(3):
        for name in spent:
            spent[name], calls[name] = 0.0, 0
        stepper = last["launch"][0]  # the step's compiled model (the last call's)
        before = stepper.device_run_counts
        torch.cuda.synchronize()
        began = time.perf_counter()
        _, _, ms = decode.generate(torch, transformers, forward, model, prompt, args.steps, True)
        wall = time.perf_counter() - began
        after = stepper.device_run_counts
        runs = sum(after[k] - before[k] for k in ("replays", "one_by_one", "through_buffers"))
        in_cpp = {k: (after[k] - before[k]) / max(runs, 1)
                  for k in ("host_us", "host_us_in_launches", "host_us_deciding", "host_us_finding_graph") if k in after}
        steps = args.steps - 1
        # The generation's calls: the prompt's (one) and the steps'.
        per = {name: 1e6 * spent[name] / max(calls[name], 1) for name in spent}
        print(f"generation {generation}: {ms / steps * 1e3:.1f} us a step (CUDA events over the steps), "
              f"{1e6 * wall / args.steps:.1f} us of wall time a step (prompt included); "
              f"graph call {per['graph call']:.1f} us ({calls['graph call']} calls), "
              f"launch {per['launch']:.1f} us ({calls['launch']} calls: its outputs allocated {per['outputs']:.1f}, "
              f"run_device {per['run_device']:.1f}, the inputs' pointers read the rest)", flush=True)
        if in_cpp:
            print(f"  the step's runtime ({runs} runs): {in_cpp['host_us']:.1f} us a run in C++, of which "
                  f"{in_cpp['host_us_in_launches']:.1f} in the driver's launch calls, "
                  f"{in_cpp.get('host_us_deciding', float('nan')):.1f} deciding what to stage and copy, "
                  f"{in_cpp.get('host_us_finding_graph', float('nan')):.1f} finding the captured graph", flush=True)
        moved = {k: after[k] - before[k] for k in ("staged_copies", "output_copies", "captures", "one_by_one", "replays")}
        print(f"  the step's runs this generation: {moved}", flush=True)
    # The step's device time alone: its compiled model launched back to back, same inputs.
    model_, inputs, kwargs = last["launch"]
    for repeats in (10, 100):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        began = time.perf_counter()
        start.record()
        for _ in range(repeats):
            model_.call_checked(*inputs, **kwargs)
        end.record()
        host = time.perf_counter() - began
        torch.cuda.synchronize()
        print(f"the step's compiled model alone, {repeats} back to back: {1e3 * start.elapsed_time(end) / repeats:.1f} us a step "
              f"of device time, {1e6 * host / repeats:.1f} us of host time a launch", flush=True)
    print(f"its kernels: {len(model_.kernels)}; runtime counters: {model_.device_run_counts}")
    if args.timeline:
        timeline(model_, inputs, kwargs)
    if args.host:
        host_time(model, prompt, forward, args.steps)


def host_time(model, prompt, forward, steps):
    """cProfile over a generation (by own time); then the steps' wall time with every tilefuse
    graph call answered by its previous outputs (no launch): Dynamo's guards, AOTAutograd's
    wrappers, the model's Python outside the graph and the loop's argmax."""
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    decode.generate(torch, transformers, forward, model, prompt, steps, True)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    call = backend.TilefuseGraph.__call__
    answers = {}

    def answered(self, args):
        if id(self) not in answers:
            answers[id(self)] = call(self, args)
        return answers[id(self)]
    backend.TilefuseGraph.__call__ = answered
    try:
        for _ in range(2):
            torch.cuda.synchronize()
            began = time.perf_counter()
            decode.generate(torch, transformers, forward, model, prompt, steps, True)
            print(f"steps without tilefuse's call: {1e6 * (time.perf_counter() - began) / steps:.1f} us of wall time a step", flush=True)
    finally:
        backend.TilefuseGraph.__call__ = call


def timeline(model_, inputs, kwargs, repeats=20):
    """The step's kernels on the device's timeline (torch.profiler, `repeats` steps back to back):
    per kernel name, the time it adds to the step (its end past the previous kernels' ends, so
    overlapped launches count once) and the idle gaps between kernels; then the last step's
    kernels in order beside the compiled model's kernel list."""
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            model_.call_checked(*inputs, **kwargs)
        torch.cuda.synchronize()
    events = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    adds, counts, gaps, rows, ended = {}, {}, 0.0, [], events[0][0]
    for start, end, name in events:
        gap = max(0.0, start - ended)
        add = max(0.0, end - max(start, ended))
        gaps += gap
        adds[name] = adds.get(name, 0.0) + add
        counts[name] = counts.get(name, 0) + 1
        rows.append((name, start, end - start, gap, add))
        ended = max(ended, end)
    span = (events[-1][1] - events[0][0]) / repeats
    print(f"timeline: {span:.1f} us a step, {len(events) / repeats:.1f} kernels a step, idle gaps {gaps / repeats:.1f} us a step")
    for name, add in sorted(adds.items(), key=lambda kv: -kv[1]):
        print(f"  {add / repeats:8.2f} us/step added  {counts[name] / repeats:5.1f}/step  {name[:90]}")
    per_step = len(rows) // repeats
    print("the last step, in order: name, duration, idle gap before it, time added (us)")
    for name, _, duration, gap, add in rows[-per_step:]:
        print(f"  {duration:7.2f} {gap:6.2f} {add:7.2f}  {name[:70]}")
    print("the compiled model's kernels: name, mode, strategy")
    for k in model_.kernels:
        print(f"  {k.name} | {k.mode} | {k.num_nodes} nodes | {k.strategy[:150]}")


if __name__ == "__main__":
    main()

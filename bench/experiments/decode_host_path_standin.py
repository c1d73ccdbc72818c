"""A decode step's host path on a machine without a GPU: GPT-2 small's step compiled through
torch.compile(backend="tilefuse") for the CPU with its weights as inputs (as on a GPU), then each
compiled model made to take the GPU path with the runtime's run a no-op (run_device and
a stand-in), so that everything Python does for a GPU step runs: Dynamo's
guards, AOTAutograd's wrapper, TilefuseGraph.__call__ down to the runtime's call. The outputs are
CPU tensors allocated per call (a malloc where the GPU's caching allocator is cheaper) and the
loop's argmax runs on the CPU (~50 us here, a few on a GPU): compare like with like.

Prints the step's wall time and tilefuse's graph call (medians over generations of 63 steps),
with Dynamo's guards checked and, in turns, skipped (PyTorch's skip_guard_eval_unsafe stance),
each generation alternating between the two.

    PYTHONPATH=build/python python3 bench/experiments/decode_host_path_standin.py [--generations 8]
"""
import argparse
import contextlib
import statistics
import time

import torch
import transformers

import tilefuse.torch_backend as backend
from tilefuse import _model

NEW = 64  # tokens a generation (the static cache's length, and so Dynamo's guards, depend on it)


class RunStandIn:
    """The compiled model's runtime: nothing launched."""

    def __init__(self, real):
        self.real, self.device = real, 0

    def run_device(self, inputs, outputs, stream):
        pass

    def output_may_overwrite_input(self, output, input):
        return True

    def __getattr__(self, name):
        return getattr(self.real, name)


def on_the_gpu_path(specialization):
    """The specialization's model as a GPU model after its first call, its runtime a stand-in."""
    m = specialization.model
    m._graph = RunStandIn(m._graph)
    m._device_runs = m._inputs_checked = True
    m._torch_types = {k: getattr(torch, v) for k, v in _model._TORCH_BY_TILEFUSE.items()}
    layouts = [(shape, m._torch_types[d]) for d, shape in m._device_outputs]
    m._empty_outputs = lambda only=None: [torch.empty(s, dtype=t) for s, t in (layouts if only is None else [layouts[i] for i in only])]
    m._current_stream = lambda: 0
    specialization.in_place = [(o, p) for o, p in specialization.mutations if p in specialization.input_numbers]
    specialization.into = None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--generations", type=int, default=8)
    args = parser.parse_args()
    torch._dynamo.config.automatic_dynamic_shapes = False  # as on a GPU: the step's graph is static
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).eval()
    forward = torch.compile(model.forward, backend="tilefuse", options={"backend": "cpu", "weights": "inputs"})
    prompt = torch.randint(0, model.config.vocab_size, (1, 128))
    spent = {"call": 0.0, "calls": 0}

    def generate():
        cache = transformers.StaticCache(config=model.config, max_cache_len=128 + NEW)
        position = torch.arange(128)
        with torch.no_grad():
            token = forward(input_ids=prompt, past_key_values=cache, cache_position=position, use_cache=True).logits[:, -1:].argmax(-1)
            began = time.perf_counter()
            for _ in range(NEW - 1):
                position = position[-1:] + 1
                token = forward(input_ids=token, past_key_values=cache, cache_position=position, use_cache=True).logits[:, -1:].argmax(-1)
            return (time.perf_counter() - began) / (NEW - 1)

    generate()
    generate()  # the second generation's new cache compiles nothing more
    for graph in [r() for r in backend._GRAPHS if r() is not None]:
        for s in graph.compiled.values():
            if s is not None:
                on_the_gpu_path(s)
    call = backend.TilefuseGraph.__call__

    def timed(self, call_args):
        began = time.perf_counter()
        try:
            return call(self, call_args)
        finally:
            spent["call"] += time.perf_counter() - began
            spent["calls"] += 1
    backend.TilefuseGraph.__call__ = timed
    results = {"guards checked": [], "guards skipped": []}
    for _ in range(args.generations):
        for setting, rows in results.items():
            skipped = setting == "guards skipped"
            with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True) if skipped else contextlib.nullcontext():
                spent["call"], spent["calls"] = 0.0, 0
                step = generate()
            rows.append((1e6 * step, 1e6 * spent["call"] / spent["calls"]))
    for setting, rows in results.items():
        print(f"{setting}: a step {statistics.median(r[0] for r in rows):.1f} us, tilefuse's graph call "
              f"{statistics.median(r[1] for r in rows):.1f} us (medians of {len(rows)} generations of {NEW - 1} steps)")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Greedy decoding with a KV cache: tilefuse against eager PyTorch and torch.compile's modes, in
one process, on transformers' models with random weights (from their configs; no download).

Each mode (in a process of its own) generates --new tokens after a --prompt-token prompt at batch 1 and is timed over the
decode steps alone (CUDA events around the loop, after a whole warm-up generation; median of
--repeats generations). The cache:

- eager-dynamic: transformers' DynamicCache (the keys grow every step), eager;
- compile-dynamic, tilefuse-dynamic: the same cache through torch.compile(dynamic=True), with
  Inductor and with tilefuse (Dynamo's sizes symbolic: TorchInductor compiles one graph for every
  length; tilefuse's kernels take the lengths at launch, but each new length is planned and
  loaded again in the first generation; a graph over symbolic sizes keeps up to 256 of them,
  so the timed generations should find every length compiled);
- eager-static and every other compiled mode: a StaticCache of prompt + new positions, written at
  the step's cache_position (one shape for every step, so a compiled step serves them all);
- compile: torch.compile(model.forward); reduce-overhead: with CUDA graphs; max-autotune: with
  CUDA graphs and autotuning; tilefuse: torch.compile(model.forward, backend="tilefuse") (each
  compiled graph replays as one CUDA graph);
- onnx-tilefuse, onnx-onnxruntime: the model exported to ONNX with its cache as deployments
  export it (bench/onnx_decode.py: a prefill model and a step model over a symbolic past, in
  f32), run by tilefuse (a SpecializingModel: a compile per new past length, counted) and by
  onnxruntime (its CUDA provider, the cache kept on the device).

Per mode: ms a token, tokens a second, the ratio to the best torch.compile mode, the first
generation's wall time (compiles included), the graphs compiled during the timed generations
(0 is the goal: no compile after the first token), and the agreement with eager-static's tokens
(greedy tokens of random weights diverge once two logits tie within bf16 noise: the first step's
logits error, relative to their scale, is the precise check).

    python3 bench/decode.py --model gpt2 --json out.json

Needs a GPU, torch and transformers; tilefuse on PYTHONPATH.
"""
import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("eager-dynamic", "eager-static", "compile", "reduce-overhead", "max-autotune", "tilefuse", "compile-dynamic",
         "tilefuse-dynamic", "onnx-tilefuse", "onnx-onnxruntime")
PEERS = ("compile", "reduce-overhead", "max-autotune", "compile-dynamic")  # torch.compile's modes: the ratios' base
DYNAMIC_CACHE = ("eager-dynamic", "compile-dynamic", "tilefuse-dynamic")
ONNX = ("onnx-tilefuse", "onnx-onnxruntime")  # the model exported with its KV cache (bench/onnx_decode.py)


def build_model(name, torch, transformers):
    torch.manual_seed(0)
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config())
    if name == "llama":  # TinyLlama-1.1B's shape: RMSNorm, SwiGLU, RoPE, GQA 32/4
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
            num_key_value_heads=4, vocab_size=32000, max_position_embeddings=2048))
    if name == "gpt2-tiny":  # a smoke test of this script on the CPU
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=1000))
    raise SystemExit(f"unknown model {name}")


class Compiles(logging.Handler):
    """Counts tilefuse's compiled graphs (its log's "compiled a torch.compile graph" lines)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record):
        if "compiled a torch.compile graph" in record.getMessage():
            self.count += 1


def generate(torch, transformers, forward, model, prompt, new, static):
    """Greedy tokens after `prompt`, the first decode step's logits and the decode loop's time
    in ms (CUDA events around the steps after the prompt)."""
    config = model.config
    length = prompt.shape[1] + new
    cache = transformers.StaticCache(config=config, max_cache_len=length) if static else transformers.DynamicCache(config=config)
    position = torch.arange(prompt.shape[1], device=prompt.device)
    with torch.no_grad():
        logits = forward(input_ids=prompt, past_key_values=cache, cache_position=position, use_cache=True).logits
        token = logits[:, -1:].argmax(-1)
        tokens, first_logits = [token], None
        cuda = prompt.is_cuda
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        began = time.perf_counter()
        for step in range(new - 1):
            position = position[-1:] + 1
            logits = forward(input_ids=token, past_key_values=cache, cache_position=position, use_cache=True).logits
            if step == 0:
                first_logits = logits[:, -1].float().clone()
            token = logits[:, -1:].argmax(-1)
            tokens.append(token)
        if cuda:
            end.record()
            torch.cuda.synchronize()
    ms = start.elapsed_time(end) if cuda else 1e3 * (time.perf_counter() - began)
    return torch.cat(tokens, 1), first_logits, ms


def synchronizing_calls(torch, transformers, forward, model, prompt, new):
    """Prints where a generation makes the host wait for the GPU (PyTorch's sync debug mode: a
    copy to or from pageable memory, an .item()), each place once with its Python stack: a wait
    a step serialises the host's launching with the GPU's running."""
    import traceback
    import warnings

    seen = set()

    def show(message, category, filename, lineno, file=None, line=None):
        stack = "".join(traceback.format_stack(limit=10)[:-1])
        if stack not in seen:
            seen.add(stack)
            print(f"synchronizing call: {str(message).splitlines()[0]}\n{stack}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        torch.cuda.set_sync_debug_mode("warn")
        try:
            generate(torch, transformers, forward, model, prompt, new, True)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    print(f"synchronizing calls: {len(seen)} places")


def profile(torch, transformers, forward, model, prompt, new):
    """The decode loop under torch.profiler: each kernel's device time a step, and the step's."""
    from torch.profiler import ProfilerActivity
    if torch.cuda.is_available():
        synchronizing_calls(torch, transformers, forward, model, prompt, new)
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        _, _, ms = generate(torch, transformers, forward, model, prompt, new, True)
    steps = new - 1
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    device_us = sum(e.self_device_time_total for e in events) / steps
    print(f"profile: {ms / steps:.3f} ms a step under the profiler, kernels {device_us:.1f} us a step of device time "
          f"({sum(e.count for e in events) / steps:.1f} kernels a step, prompt included)")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:30]:
        print(f"  {e.self_device_time_total / steps:8.2f} us/step  {e.count / steps:6.2f}/step  {e.key[:110]}")
    # The host side: the ops a step calls (copies and syncs show here as aten::copy_,
    # aten::_local_scalar_dense, cudaMemcpyAsync, cudaStreamSynchronize).
    host = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU]
    print("host: the calls a step makes, by host time")
    for e in sorted(host, key=lambda e: -e.self_cpu_time_total)[:25]:
        print(f"  {e.self_cpu_time_total / steps:8.2f} us/step  {e.count / steps:6.2f}/step  {e.key[:110]}")
    from tilefuse import torch_backend
    for graph in torch_backend._live_graphs():
        for s in graph.compiled.values():
            if s is not None and s.model.backend == "cuda":
                print(f"tilefuse graph of inputs {s.input_shapes[:2]}...: {len(s.model.kernels)} kernels, runs "
                      f"{s.model.device_run_counts}, {len(s.in_place)} of {len(s.mutations)} updated inputs written in place")


def run_onnx_mode(args, mode, torch, transformers, model, prompt) -> tuple:
    """run_mode for the ONNX exports: the export's time, then the generations through tilefuse
    (its step a SpecializingModel: compiles counted) or onnxruntime."""
    import onnx_decode

    model = model.to(onnx_decode.onnx_dtype(torch, args.device))
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        paths = onnx_decode.export(model, prompt, folder, torch, transformers)
        export_s = time.perf_counter() - began
        if mode == "onnx-tilefuse":
            prefill, step = onnx_decode.tilefuse_runners(paths, args.device)
        else:
            prefill, step = onnx_decode.onnxruntime_runners(paths, args.device, torch)
        began = time.perf_counter()
        onnx_decode.generate(torch, prefill, step, prompt, args.new)
        first = time.perf_counter() - began
        compiled_before = getattr(step, "compiles", 0)
        times = []
        for _ in range(args.repeats):
            tokens, logits, ms = onnx_decode.generate(torch, prefill, step, prompt, args.new)
            times.append(ms / (args.new - 1))
    row = {"mode": mode, "ms_per_token": statistics.median(times), "all_ms_per_token": times, "export_s": export_s,
           "first_generation_s": first, "dtype": str(model.dtype).replace("torch.", ""),
           "graphs_compiled_while_timed": getattr(step, "compiles", 0) - compiled_before}
    return row, tokens, logits


def run_mode(args, mode, torch, transformers, compiles, model, prompt) -> tuple:
    """One mode's generations: its row, and its tokens and first logits (saved for the parent)."""
    if mode in ONNX:
        return run_onnx_mode(args, mode, torch, transformers, model, prompt)
    forward = model.forward
    if mode in ("compile", "reduce-overhead", "max-autotune"):
        forward = torch.compile(model.forward, mode=None if mode == "compile" else mode, fullgraph=True)
    elif mode == "tilefuse":
        forward = torch.compile(model.forward, backend="tilefuse", options={"backend": args.device})
    elif mode == "compile-dynamic":
        forward = torch.compile(model.forward, dynamic=True)
    elif mode == "tilefuse-dynamic":
        forward = torch.compile(model.forward, backend="tilefuse", options={"backend": args.device}, dynamic=True)
    static = mode not in DYNAMIC_CACHE
    began = time.perf_counter()
    generate(torch, transformers, forward, model, prompt, args.new, static)
    first = time.perf_counter() - began
    compiled_before = compiles.count
    dynamo_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    times = []
    # --skip-guards: Dynamo's guards evaluated only where they tell its compiled graphs apart,
    # after the warm-up generation compiled them all (PyTorch's stance for warmed-up inference;
    # a graph that would need compiling raises instead). GPT-2's step has ~1,800 guards: on the
    # development machine they took ~100 of a step's ~210 us of host time in Dynamo.
    compiled = mode not in ("eager-dynamic", "eager-static")  # (a bound method is a new object at each access)
    stance = torch.compiler.set_stance("default", skip_guard_eval_unsafe=True) if args.skip_guards and compiled \
        else contextlib.nullcontext()
    with stance:
        for _ in range(args.repeats):
            tokens, logits, ms = generate(torch, transformers, forward, model, prompt, args.new, static)
            times.append(ms / (args.new - 1))
    row = {"mode": mode, "ms_per_token": statistics.median(times), "all_ms_per_token": times,
           "first_generation_s": first, "guards_skipped": bool(args.skip_guards and compiled),
           "graphs_compiled_while_timed": (compiles.count - compiled_before) +
                                          (torch._dynamo.utils.counters["stats"]["unique_graphs"] - dynamo_before)}
    if args.profile and mode == "tilefuse":
        profile(torch, transformers, forward, model, prompt, args.new)
    return row, tokens, logits


def child(args) -> None:
    """`--one MODE`: that mode alone in this process; its row and outputs to --out."""
    import torch
    import transformers

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench/decode.py needs a GPU (--device cpu: a smoke test)")
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    compiles = Compiles()
    logging.getLogger("tilefuse").addHandler(compiles)
    logging.getLogger("tilefuse").setLevel(logging.INFO)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    model = build_model(args.model, torch, transformers).to(args.device, dtype).eval()
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt), device=args.device,
                           generator=torch.Generator(args.device).manual_seed(1))
    row, tokens, logits = run_mode(args, args.one, torch, transformers, compiles, model, prompt)
    row["device"] = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    row["torch"], row["transformers"] = torch.__version__, transformers.__version__
    torch.save({"tokens": tokens.cpu(), "logits": logits.cpu()}, os.path.join(args.out, f"{args.one}.pt"))
    with open(os.path.join(args.out, f"{args.one}.json"), "w") as f:
        json.dump(row, f)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2", choices=("gpt2", "llama", "gpt2-tiny"))
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu for a smoke test")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens (default 128)")
    parser.add_argument("--new", type=int, default=128, help="tokens generated (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="timed generations a mode (default 3)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--profile", action="store_true",
                        help="after the tilefuse mode, its decode steps under torch.profiler: the kernels' device time a "
                             "step, the host calls, and how tilefuse's graphs ran (replays, launches one by one)")
    parser.add_argument("--skip-guards", action="store_true",
                        help="time the compiled modes' generations under torch.compiler.set_stance(\"default\", "
                             "skip_guard_eval_unsafe=True) (Dynamo's guards checked only where they tell its graphs apart: "
                             "PyTorch's stance for a warmed-up decode loop), every torch.compile mode alike")
    parser.add_argument("--timeout", type=float, default=400, help="seconds a mode may take (default 400)")
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a mode's own process
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        return child(args)
    modes = args.modes.split(",")
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"unknown modes {unknown}")

    import torch

    results, reference = [], None
    with tempfile.TemporaryDirectory() as out:
        for mode in modes:
            # Each mode in a process of its own, one after another on the same machine: a
            # peer that crashes (transformers' static cache under CUDA graphs did, with
            # PyTorch 2.11) is reported, and the modes after it still run.
            command = [sys.executable, __file__, "--one", mode, "--out", out] + \
                _without_option(_without_option(sys.argv[1:], "--modes"), "--json")
            try:
                done = subprocess.run(command, timeout=args.timeout)
                failed = f"exit status {done.returncode}" if done.returncode else None
            except subprocess.TimeoutExpired:
                failed = f"did not finish in {args.timeout:.0f} s"
            row_path = os.path.join(out, f"{mode}.json")
            if failed or not os.path.exists(row_path):
                results.append({"mode": mode, "failed": failed or "wrote no result"})
                print(f"{args.model} {mode}: failed ({results[-1]['failed']})", flush=True)
                continue
            with open(row_path) as f:
                row = json.load(f)
            saved = torch.load(os.path.join(out, f"{mode}.pt"))
            if mode == "eager-static":
                reference = saved
            if reference is not None:
                same = (saved["tokens"] == reference["tokens"])[0].int()
                row["tokens_before_divergence"] = int(same.cumprod(0).sum())
                row["first_step_logits_error"] = ((saved["logits"] - reference["logits"]).abs().max() /
                                                  reference["logits"].abs().max()).item()
            results.append(row)
            print(f"{args.model} {mode}: {row['ms_per_token']:.3f} ms a token ({1e3 / row['ms_per_token']:.0f} tokens/s), "
                  f"first generation {row['first_generation_s']:.1f} s, {row['graphs_compiled_while_timed']} graphs compiled while timed"
                  + (", guards skipped" if row.get("guards_skipped") else "")
                  + (f", {row['tokens_before_divergence']}/{args.new} tokens as eager-static, first step's logits "
                     f"{row['first_step_logits_error']:.4f} of scale" if "first_step_logits_error" in row else ""), flush=True)
    timed = [r for r in results if "ms_per_token" in r]
    best = min((r["ms_per_token"] for r in timed if r["mode"] in PEERS), default=None)
    for r in timed:
        if best:
            r["vs_best_torch_compile"] = best / r["ms_per_token"]
    if best:
        print("ratio to the best torch.compile mode: " + ", ".join(f"{r['mode']} {r['vs_best_torch_compile']:.2f}x" for r in timed))
    if args.json:
        first = next((r for r in timed), {})
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "prompt": args.prompt, "new": args.new, "device": first.get("device"),
                       "torch": first.get("torch"), "transformers": first.get("transformers"), "results": results}, f, indent=1)


def _without_option(command, name):
    """The command without `name VALUE` / `name=VALUE`."""
    kept, skip = [], False
    for a in command:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            kept.append(a)
    return kept


if __name__ == "__main__":
    main()

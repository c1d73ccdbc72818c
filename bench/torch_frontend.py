#!/usr/bin/env python3
"""torch.compile(backend="tilefuse") against torch.compile's own modes, in one process, on
transformers' models with random weights (from their configs; no download):

- the first call's time (Dynamo + AOTAutograd + tilefuse's translation and compile, NVRTC
  included), cold (an empty kernel cache) and warm (the same graph again after
  torch._dynamo.reset(), the kernel cache filled); torch.compile()'s first call beside it;
  for each --weights setting of the backend (weights read as inputs or folded as constants);
- the steady-state time of a call (CUDA events around 20 calls after warm-up, median of
  --repeats), for eager, torch.compile() with CUDA graphs ("reduce-overhead"), optionally
  max-autotune, and tilefuse (which replays each compiled graph as one CUDA graph);
- the output's error against eager, relative to the output's scale, and against an exact f32
  result (f32: eager with TF32 off for convolutions too, PyTorch's default leaving cuDNN's on;
  bf16: the same weights widened to f32), eager's own error to it beside.

    python3 bench/torch_frontend.py --model gpt2 --shape 1x128 --shape 8x512 --dtype bf16 --json out.json

Models: gpt2 (GPT-2 small with its LM head), bert (BERT-base), llama (a 4-layer LLaMA of
hidden 2048), resnet50 (torchvision's), vit (timm's vit_base_patch16_224), resnet18,
mobilenet_v3_small, convnext_tiny (torchvision's, BatchNorms calibrated as bench/conv_models.py
does); a vision model's shape is its batch (a shape BxS takes B). Needs a GPU, torch and transformers (torchvision and
timm for the vision models); tilefuse on PYTHONPATH.
"""
import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import warnings


VISION = ("resnet50", "vit", "resnet18", "mobilenet_v3_small", "convnext_tiny")


def build_model(name, torch, transformers):
    """The model in eval mode and its input's vocabulary (None for images)."""
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config()
        return transformers.GPT2LMHeadModel(config), config.vocab_size
    if name == "bert":
        config = transformers.BertConfig()
        return transformers.BertModel(config), config.vocab_size
    if name == "llama":
        config = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                                          num_attention_heads=16, num_key_value_heads=4, vocab_size=32000)
        return transformers.LlamaForCausalLM(config), config.vocab_size
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None), None
    if name in VISION and name != "vit":
        # BatchNorms calibrated on a random batch (bench/conv_models.py): a deeper random net's
        # activations otherwise drift in scale (MobileNetV3-small's logits ~1e-9).
        from conv_models import make_torch_model
        return make_torch_model(name)[0], None
    if name == "vit":
        import timm
        return timm.create_model("vit_base_patch16_224", pretrained=False), None
    raise SystemExit(f"unknown model {name}")


def model_input(torch, name, shape, vocab, dtype, device="cuda"):
    """Token ids of BATCHxSEQ for a language model; BATCH images of 224x224 for a vision model."""
    if name in VISION:
        return torch.randn(int(shape.split("x")[0]), 3, 224, 224, device=device, dtype=dtype)
    batch, seq = (int(v) for v in shape.split("x"))
    return torch.randint(0, vocab, (batch, seq), device=device)


def first_output(result):
    if hasattr(result, "logits"):
        return result.logits
    if hasattr(result, "last_hidden_state"):
        return result.last_hidden_state
    return result[0] if isinstance(result, (tuple, list)) else result


def time_calls(torch, fn, ids, repeats, calls=20):
    for _ in range(3):
        fn(ids)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(ids)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(times)


def exact_f32_output(torch, eager, ids):
    """Eager's output with TF32 off for matmuls and convolutions alike: f32's own accuracy."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return eager(ids)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def f32_twin_output(torch, model, name, ids):
    """The output of `model` with its weights (and a vision model's input) widened to f32, TF32 off."""
    import copy

    twin = copy.deepcopy(model).float()
    x = ids.float() if ids.is_floating_point() else ids
    eager = (lambda t: twin(t)) if name in VISION + ("bert",) else (lambda t: twin(t, use_cache=False))
    return exact_f32_output(torch, eager, x)


def first_call(torch, fn, ids):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(ids)
    torch.cuda.synchronize()
    return time.perf_counter() - start, out


def error_to_scale(torch, got, want):
    got, want = first_output(got).float(), first_output(want).float()
    if torch.isnan(got).any():
        return float("nan")
    return ((got - want).abs().max() / want.abs().max()).item()


def profile_kernels(torch, compiled, ids):
    """Each tilefuse graph's kernels timed one by one in one call: [(name, µs)] per graph."""
    import tilefuse.torch_backend as backend

    profiles, run = [], backend._Specialization.run

    def profiled(self, args):
        profiles.append(self.model.profile(*self.inputs_of(args)))
        return run(self, args)

    backend._Specialization.run = profiled
    try:
        compiled(ids)
        torch.cuda.synchronize()
    finally:
        backend._Specialization.run = run
    return profiles


class BackendTimes:
    """Within a `with`, the seconds tilefuse's backend spent compiling graphs and in their first runs."""

    def __enter__(self):
        import torch
        import tilefuse.torch_backend as backend

        self.compile_s = self.run_s = 0.0
        self.backend, self.init, self.run = backend, backend._Specialization.__init__, backend._Specialization.run
        times = self

        def init(spec, *a, **k):
            start = time.perf_counter()
            times.init(spec, *a, **k)
            times.compile_s += time.perf_counter() - start

        def run(spec, *a, **k):
            if getattr(spec, "_ran_once", False):
                return times.run(spec, *a, **k)
            spec._ran_once = True
            start = time.perf_counter()
            out = times.run(spec, *a, **k)
            torch.cuda.synchronize()
            times.run_s += time.perf_counter() - start
            return out

        backend._Specialization.__init__, backend._Specialization.run = init, run
        return self

    def __exit__(self, *exc):
        self.backend._Specialization.__init__, self.backend._Specialization.run = self.init, self.run
        return False


def time_tilefuse(torch, eager, ids, expected, weights, log, args, exact=None):
    """First calls cold (an empty kernel cache) and warm (the same graphs again), then the
    steady state, of torch.compile(backend="tilefuse") with options={"weights": weights}."""
    import tilefuse.torch_backend

    row = {}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TILEFUSE_CACHE_DIR"] = cache
        for state in ("cold", "warm"):
            torch._dynamo.reset()
            tilefuse.torch_backend._MODELS.clear()  # the process's own reuse of compiled graphs: not this measurement
            log.records.clear()
            compiled = torch.compile(eager, backend="tilefuse", options={"weights": weights, **json.loads(args.options)})
            with warnings.catch_warnings(record=True) as caught, BackendTimes() as backend:
                warnings.simplefilter("always")
                row[f"tilefuse_first_call_{state}_s"], out = first_call(torch, compiled, ids)
            # The first call's parts: tilefuse's translation and compile, its first run (the
            # device synchronized), and the rest (Dynamo, AOTAutograd, the call's Python).
            row[f"tilefuse_first_call_{state}_parts_s"] = {
                "tilefuse_compile": backend.compile_s, "first_run": backend.run_s,
                "dynamo_and_rest": row[f"tilefuse_first_call_{state}_s"] - backend.compile_s - backend.run_s}
            log.records += [f"warning: {w.message}" for w in caught if "tilefuse" in str(w.filename) or
                            "torch.compile graph" in str(w.message)]
            row[f"tilefuse_log_{state}"] = list(log.records)
            # The cold compile's kernels still compiling behind their stand-ins (background
            # NVRTC on every core) finish before the warm compile: otherwise they slowed its
            # Dynamo tracing (LLaMA-style 8x512: warm "dynamo_and_rest" 8.4 s against 2.0 s
            # cold, H200, 2026-12-01), and the warm compile should find every kernel cached.
            if state == "cold":
                finish_start = time.perf_counter()
                tilefuse.torch_backend.finish_compiles()
                row["tilefuse_cold_finish_compiles_s"] = time.perf_counter() - finish_start
        row["tilefuse_error_to_scale"] = error_to_scale(torch, out, expected)
        if exact is not None:
            row["tilefuse_error_to_exact"] = error_to_scale(torch, out, exact)
        # Kernels still compiling behind their stand-ins (background compiles) first.
        finish_start = time.perf_counter()
        tilefuse.torch_backend.finish_compiles()
        row["tilefuse_finish_compiles_s"] = time.perf_counter() - finish_start
        row["tilefuse_us"] = time_calls(torch, compiled, ids, args.repeats)
        if args.profile:
            row["tilefuse_profile"] = profile_kernels(torch, compiled, ids)
        os.environ.pop("TILEFUSE_CACHE_DIR")
    return row


class FallbackLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], help="gpt2, bert, llama, resnet50, vit, resnet18, mobilenet_v3_small or convnext_tiny (repeatable)")
    parser.add_argument("--shape", action="append", default=[], help="BATCHxSEQ, or BATCH for a vision model (repeatable; default 1x128 and 8x512: batches 1 and 8)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--max-autotune", action="store_true", help="also time torch.compile(mode='max-autotune') (minutes)")
    parser.add_argument("--profile", action="store_true", help="time tilefuse's kernels one by one (one profiled call)")
    parser.add_argument("--weights", action="append", default=[],
                        help="the backend's weights option: auto (default), fold, inputs (repeatable: each timed)")
    parser.add_argument("--tilefuse-only", action="store_true", help="time tilefuse alone (no torch.compile peers)")
    parser.add_argument("--options", default="{}", help='more torch.compile options for tilefuse, JSON (e.g. {"gemm": "template"})')
    parser.add_argument("--json", help="write every measurement here")
    parser.add_argument("--cudnn-tf32", choices=["on", "off"], default="on",
                        help="torch.backends.cudnn.allow_tf32 for every side: PyTorch's default (on) runs f32 "
                             "convolutions on TF32, and so does tilefuse; off: exact f32 everywhere")
    args = parser.parse_args()
    import torch
    import transformers
    import tilefuse.torch_backend  # registers the backend

    torch.backends.cudnn.allow_tf32 = args.cudnn_tf32 == "on"

    log = FallbackLog()
    logging.getLogger("tilefuse").addHandler(log)
    logging.getLogger("tilefuse").setLevel(logging.INFO)
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    rows = []
    for name in args.model or ["gpt2"]:
        model, vocab = build_model(name, torch, transformers)
        model = model.to("cuda", dtype).eval()
        for shape in args.shape or ["1x128", "8x512"]:
            ids = model_input(torch, name, shape, vocab, dtype)
            row = {"model": name, "shape": "x".join(str(d) for d in ids.shape), "dtype": args.dtype, "device": torch.cuda.get_device_name()}
            if args.cudnn_tf32 == "off":
                row["cudnn_tf32"] = False
            with torch.no_grad():
                eager = lambda x: model(x) if name in VISION + ("bert",) else model(x, use_cache=False)  # noqa: E731
                expected = eager(ids)
                # f32: eager's convolutions run TF32 by PyTorch's default (cudnn.allow_tf32), so
                # eager is not exact f32 there; each side's error to an exact eager is reported too.
                if dtype == torch.float32:
                    exact = exact_f32_output(torch, eager, ids)
                else:
                    # bf16: the same weights in f32 give the result bf16 rounds away from; each
                    # side's error to it beside eager bf16's own says how much of the error to
                    # eager is bf16's (BERT 8x512: 0.034 to eager, torch.compile 0.025).
                    exact = f32_twin_output(torch, model, name, ids)
                row["eager_error_to_exact"] = error_to_scale(torch, expected, exact)
                row["eager_us"] = time_calls(torch, eager, ids, args.repeats)
                for weights in args.weights or ["auto"]:
                    suffix = "" if weights == "auto" else f"_weights_{weights}"
                    row.update({k + suffix if k.startswith("tilefuse") else k: v for k, v in
                                time_tilefuse(torch, eager, ids, expected, weights, log, args, exact).items()})
                if not args.tilefuse_only:
                    torch._dynamo.reset()
                    compiled = torch.compile(eager)
                    row["torch_compile_first_call_s"], out = first_call(torch, compiled, ids)
                    row["torch_compile_error_to_scale"] = error_to_scale(torch, out, expected)
                    row["torch_compile_error_to_exact"] = error_to_scale(torch, out, exact)
                    row["torch_compile_us"] = time_calls(torch, compiled, ids, args.repeats)
                    torch._dynamo.reset()
                    compiled = torch.compile(eager, mode="reduce-overhead")
                    first_call(torch, compiled, ids)
                    row["torch_compile_cudagraphs_us"] = time_calls(torch, compiled, ids, args.repeats)
                    if args.max_autotune:
                        torch._dynamo.reset()
                        compiled = torch.compile(eager, mode="max-autotune")
                        row["max_autotune_first_call_s"], _ = first_call(torch, compiled, ids)
                        row["max_autotune_us"] = time_calls(torch, compiled, ids, args.repeats)
                    torch._dynamo.reset()
            peers = [v for k, v in row.items() if k in ("torch_compile_us", "torch_compile_cudagraphs_us", "max_autotune_us")]
            for key in [k for k in row if k.startswith("tilefuse_us") and peers]:
                row["speedup_vs_best_torch_compile" + key[len("tilefuse_us"):]] = min(peers) / row[key]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.startswith(("tilefuse_log", "tilefuse_profile"))}), flush=True)
            for key in (k for k in row if k.startswith("tilefuse_log")):
                for line in row[key]:
                    print(f"  {key}:", line[:400], flush=True)
            for profile in row.get("tilefuse_profile", []):
                total = sum(us for _, us in profile)
                print(f"  profile: {len(profile)} kernels, {total:.0f} µs timed one by one; the slowest:", flush=True)
                for kernel, us in sorted(profile, key=lambda k: -k[1])[:12]:
                    print(f"    {us:9.1f} µs  {kernel}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

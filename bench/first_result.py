#!/usr/bin/env python3
"""Time to the first result of a model compiled cold for the GPU, with and without background
compiles (`tilefuse.compile(background_compile=)`), on a machine with a GPU.

Each model is compiled in a process of its own with empty kernel caches, tilefuse's and the CUDA
driver's (the process's CUDA context and NVRTC first started on a pointwise example, outside the
timings), run once, and then asked to finish its background compiles; the settings take turns
round by round. Printed per model and setting
(median of the rounds, seconds): the compile (what `tilefuse.compile` took), its NVRTC stage
("build"), the first result (compile + first call), and the time until every kernel runs its own
form (compile + first call + finish_compiles). With background compiles, "build" is the NVRTC
time of the kernels compiled before the compile returns: for a one-kernel model, that kernel's
(or its stand-in's) cold compile.

    PYTHONPATH=build/python python3 bench/first_result.py bench/cases/gemm_bias_gelu_bf16_4096.onnxtxt ... --json out.json
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WARM_UP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "gelu_manual.onnxtxt")


def inputs_for(model):
    import torch  # bf16 inputs: NumPy has no bfloat16
    torch.manual_seed(0)
    types = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32}
    out = []
    for spec in model.inputs:
        t = types[spec.dtype]
        out.append(torch.rand(spec.shape, dtype=torch.float32).mul(2).sub(1).to(t) if t.is_floating_point
                   else torch.randint(0, 8, spec.shape, dtype=t))
    return out


def one(path, background):
    """In this process, whose kernel cache is empty: the measurement of one compile."""
    import tilefuse
    warm = tilefuse.compile(WARM_UP, backend="cuda", background_compile=False)
    warm(*inputs_for(warm))
    start = time.perf_counter()
    model = tilefuse.compile(path, backend="cuda", background_compile=background)
    compiled = time.perf_counter() - start
    pending = model.pending_compiles
    compiles, hits = model.jit_compiles, model.jit_cache_hits
    build = dict(model.compile_stages_ms).get("build", 0.0) / 1000
    inputs = inputs_for(model)
    first_start = time.perf_counter()
    model(*inputs)
    first = compiled + time.perf_counter() - first_start
    model.finish_compiles()
    final = compiled + time.perf_counter() - first_start
    kernels = [(k.name, k.strategy) for k in model.kernels if k.mode.endswith("template")]
    del model  # releasing it waits for nothing more: finish_compiles has
    return {"compile_s": compiled, "build_s": build, "first_result_s": first, "all_own_forms_s": final,
            "stand_ins": pending, "nvrtc_compiles": compiles, "cache_hits": hits, "template_kernels": kernels,
            "cache_dir": os.environ.get("TILEFUSE_CACHE_DIR", "")}


def in_a_process(path, background):
    # Both caches empty: tilefuse's, and the CUDA driver's compute cache, which NVRTC's cubins
    # for sm_90a pass through on the GPU machine (without this, the second process to compile
    # a kernel there took 0.06 s instead of seconds, with tilefuse's cache empty).
    cache = tempfile.mkdtemp(prefix="tilefuse-first-")
    try:
        env = dict(os.environ, TILEFUSE_CACHE_DIR=cache, CUDA_CACHE_PATH=os.path.join(cache, "cuda"))
        run = subprocess.run([sys.executable, __file__, "--one", path, "--background", "on" if background else "off"],
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"{path} (background {background}) failed:\n{run.stderr}")
        return json.loads(run.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--background", choices=("on", "off"), help=argparse.SUPPRESS)
    ap.add_argument("models", nargs="*")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.background == "on")))
        return
    runs = {(m, b): [] for m in args.models for b in (False, True)}
    for _ in range(args.rounds):
        for m in args.models:
            for b in (False, True):
                runs[(m, b)].append(in_a_process(m, b))
    med = lambda rows, key: statistics.median(r[key] for r in rows)
    print("| model | background | stand-ins | compile s | NVRTC (build) s | first result s | all own forms s |")
    print("|---|---|---|---|---|---|---|")
    for m in args.models:
        for b in (False, True):
            rows = runs[(m, b)]
            print(f"| {os.path.basename(m)} | {'on' if b else 'off'} | {rows[0]['stand_ins']} | {med(rows, 'compile_s'):.2f} | "
                  f"{med(rows, 'build_s'):.2f} | {med(rows, 'first_result_s'):.2f} | {med(rows, 'all_own_forms_s'):.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"model": m, "background": b, "runs": rows} for (m, b), rows in runs.items()], f, indent=1)


if __name__ == "__main__":
    main()

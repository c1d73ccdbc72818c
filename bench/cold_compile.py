#!/usr/bin/env python3
"""Cold compile time of models for the GPU: `tilefuse compile MODEL --backend cuda` (NVRTC, no GPU
needed) with an empty kernel cache, for one or more tilefuse binaries (say, before and after a
change), interleaved round by round so a busy machine slows all alike.

    python3 bench/cold_compile.py --bin before=/path/old/tilefuse --bin after=build/tilefuse \\
        --rounds 3 tests/models/gpt2_2layer tests/conv/*.onnxtxt bench/cases/*.onnxtxt
    python3 bench/cold_compile.py --bin serial=build/tilefuse:TILEFUSE_NVRTC_THREADS=1 --bin after=build/tilefuse ...

A binary may carry environment settings after a colon (NAME=VALUE, comma-separated). Extra compile
flags (--gemm template) go in --flags. Prints a Markdown table: per model, kernels, then per
binary the median wall seconds of the rounds and the CPU seconds of that run (user + system of
tilefuse and its threads); the last row sums them. --json FILE writes every measurement.
"""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time


def parse_bin(text):
    label, _, rest = text.partition("=")
    path, _, env = rest.partition(":")
    settings = dict(kv.split("=", 1) for kv in env.split(",") if kv)
    return label, path, settings


def cold_compile(binary, env_extra, model, flags):
    cache = tempfile.mkdtemp(prefix="tilefuse-cold-")
    env = dict(os.environ, TILEFUSE_CACHE_DIR=cache, **env_extra)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    run = subprocess.run([binary, "compile", model, "--backend", "cuda", *flags], env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(cache, ignore_errors=True)
    if run.returncode != 0:
        raise SystemExit(f"{binary} failed on {model}:\n{run.stderr}")
    kernels = len(re.findall(r"^  tf_\S+ ", run.stdout, re.M))  # generated kernels' rows (not cuBLASLt's, the host's)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", required=True, help="LABEL=PATH[:NAME=VALUE,...]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--flags", default="", help="extra `tilefuse compile` flags, e.g. '--gemm template'")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    bins = [parse_bin(b) for b in args.bin]
    flags = args.flags.split()
    times = {(m, label): [] for m in args.models for label, _, _ in bins}
    kernels = {}
    for _ in range(args.rounds):
        for model in args.models:
            for label, path, env in bins:
                wall, cpu, n = cold_compile(path, env, model, flags)
                times[(model, label)].append((wall, cpu))
                kernels[model] = n
    header = "| model | kernels | " + " | ".join(f"{label} s (cpu s)" for label, _, _ in bins) + " |"
    print(header)
    print("|" + "---|" * (2 + len(bins)))
    totals = {label: [0.0, 0.0] for label, _, _ in bins}
    for model in args.models:
        cells = []
        for label, _, _ in bins:
            runs = times[(model, label)]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            totals[label][0] += wall
            totals[label][1] += cpu
            cells.append(f"{wall:.2f} ({cpu:.2f})")
        print(f"| {model} | {kernels[model]} | " + " | ".join(cells) + " |")
    print("| **total** | | " + " | ".join(f"**{w:.2f}** ({c:.2f})" for w, c in totals.values()) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"flags": args.flags, "nproc": os.cpu_count(), "bins": [{"label": l, "path": p, "env": e} for l, p, e in bins],
                       "runs": [{"model": m, "bin": label, "wall_cpu": runs} for (m, label), runs in times.items()]}, f, indent=1)


if __name__ == "__main__":
    main()

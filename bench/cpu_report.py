#!/usr/bin/env python3
"""Times the CPU bench cases (bench/cpu_cases: the examples at sizes beyond the last-level
cache) fused vs unfused, whole graph with `tilefuse bench --json` and the kernels alone
with tilefuse_bench_cpu_kernels, and the compile time of each example, and prints
Markdown tables for bench/results.

The machine is shared: before each bench it waits (up to --wait seconds) for the
1-minute load average to fall under --max-load, records the load it ran at, repeats
each bench --rounds times and reports medians.

  bench/cpu_report.py --tilefuse build/tilefuse > /tmp/cpu.md   (tilefuse_bench_cpu_kernels beside it)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = ["gelu_manual", "gelu_composite", "softmax_manual", "softmax_composite", "layernorm_manual",
         "layernorm_composite", "rmsnorm", "dropout_residual_layernorm", "mlp_block"]


def wait_for_quiet(max_load, wait_s):
    deadline = time.time() + wait_s
    while os.getloadavg()[0] >= max_load and time.time() < deadline:
        time.sleep(5)
    return os.getloadavg()[0]


def bench(tilefuse, model, repeats, max_load, wait_s):
    load = wait_for_quiet(max_load, wait_s)
    out = subprocess.run([tilefuse, "bench", model, "--json", "--repeats", str(repeats)], check=True,
                         capture_output=True, text=True).stdout
    result = json.loads(out)
    result["load"] = load
    return result


def median_of(results, *path):
    values = []
    for r in results:
        for key in path:
            r = r[key]
        values.append(r)
    return statistics.median(values)


def case_row(name, results):
    first = results[0]
    fused, unfused = median_of(results, "fused", "ms"), median_of(results, "unfused", "ms")
    gbps = first["bytes"] / (fused * 1e-3) / 1e9
    loads = ", ".join(f"{r['load']:.1f}" for r in results)
    return (f"| {name} | {first['shape']} | {fused:.1f} | {unfused:.1f} | {unfused / fused:.2f}x | {gbps:.1f} | "
            f"{100 * gbps / median_of(results, 'copy_gbps'):.0f}% | {median_of(results, 'output_alloc_ms'):.1f} | {loads} |")


def kernel_rounds(binary, models, rounds, max_load, wait_s):
    """Per model name, one tilefuse_bench_cpu_kernels result per round (all models per run)."""
    by_name = {}
    for _ in range(rounds):
        load = wait_for_quiet(max_load, wait_s)
        out = subprocess.run([binary, *models, "--json"], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            result = json.loads(line)
            result["load"] = load
            by_name.setdefault(os.path.basename(result["model"]).replace(".onnxtxt", ""), []).append(result)
    return by_name


def kernel_row(name, results):
    if "skipped" in results[0]:
        return f"| {name} | skipped: {results[0]['skipped']} | | | | | |"
    fused, unfused = median_of(results, "fused", "ms"), median_of(results, "unfused", "ms")
    gbps = results[0]["bytes"] / (fused * 1e-3) / 1e9
    loads = ", ".join(f"{r['load']:.1f}" for r in results)
    return (f"| {name} | {fused:.2f} | {unfused:.2f} | {unfused / fused:.2f}x | {gbps:.1f} | "
            f"{100 * gbps / median_of(results, 'copy_gbps'):.0f}% | {loads} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tilefuse", default=os.path.join(ROOT, "build", "tilefuse"))
    parser.add_argument("--kernels-bench", help="default: tilefuse_bench_cpu_kernels beside --tilefuse")
    parser.add_argument("--rounds", type=int, default=3, help="bench runs per case (median reported)")
    parser.add_argument("--repeats", type=int, default=10, help="timed graph runs inside each bench")
    parser.add_argument("--max-load", type=float, default=1.5)
    parser.add_argument("--wait", type=float, default=300, help="longest wait for the load to fall, seconds")
    parser.add_argument("--cases", nargs="*", default=CASES)
    args = parser.parse_args()

    kernels_bench = args.kernels_bench or os.path.join(os.path.dirname(args.tilefuse), "tilefuse_bench_cpu_kernels")
    models = [os.path.join(ROOT, "bench", "cpu_cases", name + ".onnxtxt") for name in args.cases]
    kernels = kernel_rounds(kernels_bench, models, args.rounds, args.max_load, args.wait)
    print("| case | fused ms | unfused ms | speedup | fused GB/s | % copy | load per round |")
    print("|---|---|---|---|---|---|---|")
    for name in args.cases:
        print(kernel_row(name, kernels[name]))
    print()

    print("| case | shape | fused ms | unfused ms | speedup | fused GB/s | % copy | output alloc ms | load per round |")
    print("|---|---|---|---|---|---|---|---|---|")
    copies = []
    for name in args.cases:
        model = os.path.join(ROOT, "bench", "cpu_cases", name + ".onnxtxt")
        results = [bench(args.tilefuse, model, args.repeats, args.max_load, args.wait) for _ in range(args.rounds)]
        with open(model) as f:
            signature = next(line for line in f if line.startswith(name + " ("))
        results[0]["shape"] = signature.split("(")[1].split(" ")[0].replace("float", "f32")
        copies += [r["copy_gbps"] for r in results]
        print(case_row(name, results), flush=True)
    print(f"\nhost copy bandwidth (memcpy of 256 MiB, read + write): median {statistics.median(copies):.1f} GB/s, "
          f"range {min(copies):.1f}-{max(copies):.1f}\n")

    print("| example | kernels fused / unfused | compile cold fused ms | warm fused ms | cold unfused ms | "
          "warm unfused ms |")
    print("|---|---|---|---|---|---|")
    for name in args.cases:
        model = os.path.join(ROOT, "examples", name + ".onnxtxt")
        results = [bench(args.tilefuse, model, 3, args.max_load, args.wait) for _ in range(args.rounds)]
        first = results[0]
        print(f"| {name} | {first['fused']['kernels']} / {first['unfused']['kernels']} | "
              f"{median_of(results, 'fused', 'compile_cold_ms'):.0f} | {median_of(results, 'fused', 'compile_warm_ms'):.1f} | "
              f"{median_of(results, 'unfused', 'compile_cold_ms'):.0f} | "
              f"{median_of(results, 'unfused', 'compile_warm_ms'):.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""One markdown table from the JSON files bench/model_peers.py writes (one per model):

  python3 bench/model_report.py OUT/model-peers-*.json > models.md

Columns: tilefuse fused and unfused (whole CUDA graph), onnxruntime, and the model's PyTorch
module (eager, torch.compile, torch.compile with CUDA graphs) where it was timed; µs per
forward; the ratios are the peer's time over tilefuse's fused time (above 1: tilefuse faster)."""
import json
import os
import sys


def us(entry):
    return entry.get("us") if isinstance(entry, dict) else None


def cell(value, fused):
    if value is None:
        return "—"
    return f"{value:.1f}" + (f" ({value / fused:.2f}x)" if fused else "")


def main(paths):
    print("| model | tilefuse fused µs (kernels) | unfused µs | onnxruntime µs | PyTorch eager µs | torch.compile µs | "
          "torch.compile + CUDA graphs µs |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted(paths):
        r = json.load(open(path))
        name = os.path.basename(os.path.dirname(os.path.abspath(r["model"])))
        tf = r.get("tilefuse", {})
        fused = tf["fused"]["ms"] * 1000 if "fused" in tf else None
        kernels = tf["fused"]["kernels"] if "fused" in tf else "—"
        unfused = tf["unfused"]["ms"] * 1000 if "unfused" in tf else None
        ort = r.get("onnxruntime", {})
        ort_cell = cell(us(ort), fused)
        if us(ort) is not None and ort.get("provider") != "CUDAExecutionProvider":
            ort_cell += " CPU"
        pt = r.get("pytorch", {})
        fused_cell = f"{fused:.1f} ({kernels})" if fused else "error: " + tf.get("error", "?")[:60]
        print(f"| {name} | {fused_cell} | {cell(unfused, None)} | {ort_cell} | {cell(us(pt.get('eager')), fused)} | "
              f"{cell(us(pt.get('compile')), fused)} | {cell(us(pt.get('compile_cudagraphs')), fused)} |")
    print("\nRatios in brackets: the peer's time over tilefuse's fused time (above 1: tilefuse is faster). "
          "onnxruntime marked CPU ran on the host (no CUDA provider in its wheel there).")


if __name__ == "__main__":
    main(sys.argv[1:])

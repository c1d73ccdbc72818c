#!/usr/bin/env python3
"""FP8 products on the GPU: tilefuse's FP8 GEMM template against cuBLAS's (issue 50).

Each case is y = x · wᵀ at M = N = K, x and w e4m3 with per-tensor scales, y bf16, written as
quantization tools write it (DequantizeLinear on both operands, MatMul, Cast): pass fp8-products
makes it one FP8 product with the scales in the template's epilogue. Beside it the same
product in bf16 (x, w bf16), tilefuse's own GEMM template. w is an input, read K-major as it is.

  tilefuse   `tilefuse bench --backend cuda` (the whole CUDA graph, device events, median),
             FP8 with promoted sums (the default) and with the tensor cores' own accumulation
             (--precision high), and the bf16 product
  PyTorch    torch._scaled_mm (cuBLAS's FP8 GEMM, bf16 out, per-tensor scales) with
             use_fast_accum False (promoted, its default) and True; torch.mm in bf16 (cuBLAS)
             — same process, CUDA events, median of 30 after warm-up

  python3 bench/fp8_gemm.py --write-models bench/cases/fp8     # needs the onnx package
  python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse build/tilefuse [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys

SIZES = (8192, 4096)


def write_models(folder):
    import onnx
    from onnx import TensorProto, helper
    os.makedirs(folder, exist_ok=True)
    for n in SIZES:
        for kind in ("e4m3", "bf16"):
            if kind == "e4m3":
                nodes = [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
                         helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
                         helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]),
                         helper.make_node("MatMul", ["xd", "wt"], ["p"]),
                         helper.make_node("Cast", ["p"], ["y"], to=TensorProto.BFLOAT16)]
                inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [n, n]),
                          helper.make_tensor_value_info("sx", TensorProto.FLOAT, []),
                          helper.make_tensor_value_info("w", TensorProto.FLOAT8E4M3FN, [n, n]),
                          helper.make_tensor_value_info("sw", TensorProto.FLOAT, [])]
            else:
                nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]), helper.make_node("MatMul", ["x", "wt"], ["y"])]
                inputs = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [n, n]),
                          helper.make_tensor_value_info("w", TensorProto.BFLOAT16, [n, n])]
            graph = helper.make_graph(nodes, f"gemm_{kind}_{n}", inputs, [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [n, n])])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
            onnx.checker.check_model(model)
            onnx.save(model, os.path.join(folder, f"gemm_{kind}_{n}.onnx"))


def time_us(fn, repeats=30):
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


def peers(n):
    import torch
    x = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    out = {}
    for fast in (False, True):
        out[f"_scaled_mm fast_accum={fast}"] = time_us(
            lambda: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast))
    xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
    out["mm bf16"] = time_us(lambda: torch.mm(xb, wb.t()))
    return out


def tilefuse_us(binary, path, *flags):
    r = subprocess.run([binary, "bench", path, "--backend", "cuda", "--json", "--repeats", "30", "--warmup", "5", *flags],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
        return None, None
    report = json.loads(r.stdout)
    return report["fused"]["ms"] * 1e3, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-models", metavar="DIR")
    ap.add_argument("--models", metavar="DIR", default="bench/cases/fp8")
    ap.add_argument("--tilefuse", default="build/tilefuse")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    if a.write_models:
        write_models(a.write_models)
        return
    rows = []
    print("| M=N=K | tilefuse FP8 promoted µs (TF/s) | tilefuse FP8 fast accum | tilefuse bf16 | cuBLAS FP8 promoted | cuBLAS FP8 fast | cuBLAS bf16 | FP8 vs cuBLAS FP8 (same accumulation) | FP8 vs tilefuse bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        fp8 = os.path.join(a.models, f"gemm_e4m3_{n}.onnx")
        ours = {"promoted": tilefuse_us(a.tilefuse, fp8), "fast": tilefuse_us(a.tilefuse, fp8, "--precision", "high"),
                "bf16": tilefuse_us(a.tilefuse, os.path.join(a.models, f"gemm_bf16_{n}.onnx"))}
        p = peers(n)
        flops = 2 * n ** 3

        def cell(us):
            return f"{us:.0f} ({flops / us / 1e6:.0f})" if us else "failed"
        us = {k: v[0] for k, v in ours.items()}
        ratio = lambda peer, mine: f"{peer / mine:.2f}x" if mine else "-"
        print(f"| {n} | {cell(us['promoted'])} | {cell(us['fast'])} | {cell(us['bf16'])} | {cell(p['_scaled_mm fast_accum=False'])} | "
              f"{cell(p['_scaled_mm fast_accum=True'])} | {cell(p['mm bf16'])} | "
              f"{ratio(p['_scaled_mm fast_accum=False'], us['promoted'])} / {ratio(p['_scaled_mm fast_accum=True'], us['fast'])} | "
              f"{ratio(us['bf16'] or 0, us['promoted'])} / {ratio(us['bf16'] or 0, us['fast'])} |", flush=True)
        for k, (_, report) in ours.items():
            if report:
                print(f"  {n} {k}: {report['groups'][0]['strategy']}", file=sys.stderr, flush=True)
        rows.append({"size": n, "tilefuse_us": us, "peers_us": p, "reports": {k: v[1] for k, v in ours.items()}})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

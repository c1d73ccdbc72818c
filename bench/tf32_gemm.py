#!/usr/bin/env python3
"""f32 linear layers on the GPU: tilefuse's TF32 and 3xTF32 GEMM template forms against PyTorch's
TF32 and exact-f32 peers.

Each case is an f32 product x[M, K] · W[K, N] with a constant weight (as an ONNX export of a
linear layer carries it) and an epilogue: + bias, + bias then GELU (tanh), or + a residual
input. The ONNX file is written here and compiled by tilefuse's Python package for the GPU
twice: precision="high" (TF32 tensor cores: the GEMM template's TF32 form, its epilogue
fused) and precision="highest" (f32's accuracy: the template's 3xTF32 form, each operand
split into two TF32 parts, three products summed). The peers run in the same process on the
same inputs, with TF32 allowed (torch.backends.cuda.matmul.allow_tf32) unless named exact:
  eager_tf32        x @ W + b (then GELU / + r): cuBLAS TF32 and separate kernels
  addmm_tf32        torch.addmm(b, x, W) (bias fused by cuBLASLt; the GELU and residual
                    cases add their op after it)
  compile_tf32      torch.compile of eager (default mode)
  autotune_tf32     torch.compile(mode="max-autotune-no-cudagraphs") of eager (Triton's TF32
                    GEMM templates tried against cuBLAS)
  eager_exact       eager with TF32 off: exact f32 (cuBLAS's SIMT kernels)
  compile_exact     torch.compile (default mode) with TF32 off
  autotune_exact    torch.compile(mode="max-autotune-no-cudagraphs") with TF32 off
Every output is checked first against an f64 evaluation (norm-wise relative error: TF32
5e-3, exact f32 1e-5); a peer that disagrees is reported, not timed. Times: GPU events after
warm-up, median of --repeats calls queued behind a GPU sleep (bench/peers.py's median_us),
inputs rotated past L2.

  python3 bench/tf32_gemm.py --json out.json      # markdown table on stdout
"""
import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402  (its timing and rotation helpers)

CASES = [  # name, M, N, K, epilogue
    ("linear_bias_f32_4096x4096x4096", 4096, 4096, 4096, "bias"),
    ("linear_bias_gelu_f32_16384x4096x1024", 16384, 4096, 1024, "bias_gelu"),
    ("linear_residual_f32_16384x1024x4096", 16384, 1024, 4096, "residual"),
    ("linear_residual_f32_8192x768x768", 8192, 768, 768, "residual"),
    ("linear_bias_f32_8192x3072x768", 8192, 3072, 768, "bias"),
    # ResNet-50's 1x1 expansions at batch 32 (56x56 pixels, 64 -> 256 channels) as products:
    # bound by writing the f32 output (103 MB; with the residual 206 MB moved), not by K.
    ("conv1x1_bias_f32_100352x256x64", 100352, 256, 64, "bias"),
    ("conv1x1_residual_f32_100352x256x64", 100352, 256, 64, "residual"),
]
TOLERANCE = {"tf32": 5e-3, "exact": 1e-5}
SEED_WEIGHTS = 1234


def onnx_model(m, n, k, epilogue, weight, bias):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("MatMul", ["x", "W"], ["p"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    initializers = [numpy_helper.from_array(weight, "W")]
    if epilogue == "residual":
        nodes.append(helper.make_node("Add", ["p", "r"], ["y"]))
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [m, n]))
    else:
        initializers.append(numpy_helper.from_array(bias, "b"))
        nodes.append(helper.make_node("Add", ["p", "b"], ["y" if epilogue == "bias" else "s"]))
        if epilogue == "bias_gelu":
            nodes.append(helper.make_node("Gelu", ["s"], ["y"], approximate="tanh"))
    graph = helper.make_graph(nodes, "linear", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def run_case(torch, F, name, m, n, k, epilogue, args, directory):
    import numpy as np
    import tilefuse
    rng = np.random.default_rng(peers.SEED)
    weight = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    path = os.path.join(directory, name + ".onnx")
    import onnx
    onnx.save(onnx_model(m, n, k, epilogue, weight, bias), path)
    W = torch.from_numpy(weight).cuda()
    b = torch.from_numpy(bias).cuda()

    def formula(x, r=None):
        p = x @ W
        if epilogue == "residual":
            return p + r
        return F.gelu(p + b, approximate="tanh") if epilogue == "bias_gelu" else p + b

    def addmm(x, r=None):
        if epilogue == "residual":
            return torch.addmm(r, x, W)
        p = torch.addmm(b, x, W)
        return F.gelu(p, approximate="tanh") if epilogue == "bias_gelu" else p

    per_set = 4 * (m * k + (m * n if epilogue == "residual" else 0))
    sets = max(2, math.ceil(peers.ROTATION_BYTES / per_set))
    generator = torch.Generator(device="cuda").manual_seed(peers.SEED)
    input_sets = []
    for _ in range(sets):
        x = torch.randn(m, k, device="cuda", generator=generator)
        input_sets.append((x, torch.randn(m, n, device="cuda", generator=generator)) if epilogue == "residual" else (x,))
    first = input_sets[0]
    x64 = [t.double() for t in first]
    p64 = x64[0] @ W.double()
    if epilogue == "residual":
        expected = p64 + x64[1]
    else:
        expected = p64 + b.double()
        if epilogue == "bias_gelu":
            expected = F.gelu(expected, approximate="tanh")

    def tilefuse_fn(precision):
        model = tilefuse.compile(path, backend="cuda", precision=precision)
        return (lambda *inputs: model(*inputs)[0]), model

    result = {"name": name, "m": m, "n": n, "k": k, "epilogue": epilogue, "flops": 2 * m * n * k, "peers": {}}
    peer_list = [
        ("tilefuse_tf32", "tf32", lambda: tilefuse_fn("high")),
        ("eager_tf32", "tf32", lambda: (formula, None)),
        ("addmm_tf32", "tf32", lambda: (addmm, None)),
        ("compile_tf32", "tf32", lambda: (torch.compile(formula, dynamic=False), None)),
        ("autotune_tf32", "tf32", lambda: (torch.compile(formula, dynamic=False, mode="max-autotune-no-cudagraphs"), None)),
        ("tilefuse_exact", "exact", lambda: tilefuse_fn("highest")),
        ("eager_exact", "exact", lambda: (formula, None)),
        ("compile_exact", "exact", lambda: (torch.compile(formula, dynamic=False), None)),
        ("autotune_exact", "exact", lambda: (torch.compile(formula, dynamic=False, mode="max-autotune-no-cudagraphs"), None)),
    ]
    for peer, precision, make in peer_list:
        if args.peers and peer not in args.peers:
            continue
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch._dynamo.reset()
        entry = {"precision": precision}
        try:
            fn, model = make()
            error = peers.relative_error(torch, fn(*first), expected)
            entry["error"] = error
            if model is not None:
                entry["kernels"] = [f"{kernel.name}: {kernel.mode}" for kernel in model.kernels]
            if not error <= TOLERANCE[precision]:
                entry["failed"] = f"relative error {error:.2e} over {TOLERANCE[precision]:.0e}"
            else:
                us, host_us = peers.median_us(torch, fn, input_sets, args.warmup, args.repeats)
                entry.update(us=us, host_us=host_us, tflops=result["flops"] / us / 1e6)
        except Exception as e:  # a peer that cannot run is reported, the others still run
            entry["failed"] = f"{type(e).__name__}: {e}"
        result["peers"][peer] = entry
        print(f"  {name} {peer}: {entry.get('us', float('nan')):.1f} us, error {entry.get('error', float('nan')):.1e}"
              f"{' ' + entry['failed'] if 'failed' in entry else ''}", file=sys.stderr, flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    return result


def write_cases(cases, folder):
    """The cases as bench/cases does them (bytes_moved: inputs read and the output written once)."""
    import numpy as np
    import onnx
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SEED_WEIGHTS)
    manifest = []
    for name, m, n, k, epilogue in cases:
        weight = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        onnx.save(onnx_model(m, n, k, epilogue, weight, bias), folder / f"{name}.onnx")
        moved = 4 * (m * k + k * n + m * n * (2 if epilogue == "residual" else 1) + (0 if epilogue == "residual" else n))
        manifest.append({"name": name, "file": f"{name}.onnx", "bytes_moved": moved, "flops": 2 * m * n * k})
    (folder / "cases.json").write_text(json.dumps({"cases": manifest}, indent=1))


def markdown(results):
    names = [p for p in ("tilefuse_tf32", "eager_tf32", "addmm_tf32", "compile_tf32", "autotune_tf32", "tilefuse_exact", "eager_exact",
                         "compile_exact", "autotune_exact")
             if any(p in r["peers"] for r in results)]
    lines = ["| case | " + " | ".join(names) + " | tilefuse vs best peer, TF32 | exact |", "|---|" + "---|" * (len(names) + 2)]
    for r in results:
        cells = []
        for p in names:
            e = r["peers"].get(p)
            cells.append("-" if e is None else ("FAILED" if "failed" in e else f"{e['us']:.0f} µs ({e['tflops']:.0f} TF/s, err {e['error']:.0e})"))
        for precision in ("tf32", "exact"):
            ours = r["peers"].get(f"tilefuse_{precision}", {}).get("us")
            best = min((e["us"] for p, e in r["peers"].items() if not p.startswith("tilefuse") and e["precision"] == precision and "us" in e),
                       default=None)
            cells.append(f"{best / ours:.2f}x" if ours and best else "-")
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--peers", help="comma-separated peers (default: all)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--write-cases", metavar="ROOT",
                        help="write the cases' ONNX files and ROOT/bench/cases/cases.json, for tilefuse_bench_gpu_cases "
                             "--root ROOT --precision high (its template overrides), and exit")
    args = parser.parse_args()
    args.peers = set(args.peers.split(",")) if args.peers else None
    selected = [c for c in CASES if not args.cases or c[0] in args.cases.split(",")]
    if args.list:
        for c in selected:
            print(f"{c[0]}: M={c[1]} N={c[2]} K={c[3]}, {c[4]}")
        return
    if args.write_cases:
        write_cases(selected, Path(args.write_cases) / "bench" / "cases")
        return
    import torch
    import torch.nn.functional as F
    device = torch.cuda.get_device_name()
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for name, m, n, k, epilogue in selected:
            results.append(run_case(torch, F, name, m, n, k, epilogue, args, directory))
    report = {"device": device, "torch": torch.__version__, "cases": results}
    print(f"{device}, torch {torch.__version__}\n")
    print(markdown(results))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

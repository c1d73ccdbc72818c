#!/usr/bin/env python3
"""Writes the GEMM bench cases: the graphs (bench/cases/gemm_*.onnxtxt, mlp_*.onnxtxt), their
small correctness twins (bench/cases/check/*.onnxtxt) and their entries in cases.json (other
entries are kept as they are). Re-running it rewrites the same files.

    python3 bench/cases/gemm_cases.py

All bf16; every tensor is a graph input (no initializers), so the PyTorch peers get the same
random tensors as tilefuse. The GELU is the tanh form written out op by op, as in
gelu_tanh_bf16.onnxtxt (f32 constants cast to bf16; the import folds the casts).

Manifest fields beyond the memory-bound cases' (see cases.json "about"):
  flops           2*M*N*K summed over the case's matmuls
  gemm_alone      [M, N, K] of each matmul: peers.py times a plain `a @ b` (cuBLAS) of each and
                  sums them, the rate the fused case is held against (target >= 0.95x)
  peers.compile_max_autotune   present: peers.py also times torch.compile(mode=
                  "max-autotune-no-cudagraphs") of the eager formula
  full_size_check false: the f64 reference interpreter would take many minutes on the host,
                  so scripts/gpu-check.sh checks the case through the twins in check/ instead
                  (none of today's GEMM cases: FULL_SIZE_CHECK_MAX_FLOPS)
"""
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "cases.json"
BF16 = "bfloat16"

# The reference interpreter's matmul (f64, i-k-j loops) ran at about 4 GFLOP/s a core on a
# 2-core AMD EPYC build host: 1024^3 f32 in 0.37 s, 2048^3 in 2.95 s, 4096^3 in 34 s (DRAM-bound
# once w outgrows L3). Its large products now run their rows on every core (OpenMP): on the GPU
# machine's 16 cores (2026-11-27, three checks at once) the whole check of
# mlp_block_bf16_8x2048x1024 took 73 s, gemm_bf16_8192 111 s, gemm_bias_gelu_bf16_8192 125 s.
# A case over 2 TFLOP (minutes of reference even there) is checked through its twins instead.
FULL_SIZE_CHECK_MAX_FLOPS = 2e12

EPILOGUES = {  # kind: (what the graph computes, eager formula, library op)
    "plain": ("y = x @ w", "x @ w", "x @ w"),
    "bias": ("y = x @ w + b", "x @ w + b", "torch.addmm(b, x, w)"),
    "bias_relu": ("y = relu(x @ w + b)", "torch.relu(x @ w + b)", "torch._addmm_activation(b, x, w)"),
    "bias_gelu": ("y = gelu_tanh(x @ w + b), the GELU op by op",
                  "0.5 * (h := x @ w + b) * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))",
                  "torch._addmm_activation(b, x, w, use_gelu=True)"),
    "residual": ("y = x @ w + r", "x @ w + r", "torch.addmm(r, x, w)"),
}
COMPILE = "torch.compile(eager)"
COMPILE_MAX_AUTOTUNE = "torch.compile(eager, mode='max-autotune-no-cudagraphs')"

# ANCHORS.md (H200, 2026-11-21), TF/s: the first table for eager and torch.compile, the
# epilogue table for the cuBLASLt library op, max-autotune and cuBLAS's plain GEMM.
ANCHORS = {
    "gemm_bf16_4096": {"library": 774, "gemm_alone": 774},
    "gemm_bias_relu_bf16_4096": {"eager": 574, "library": 700, "compile": 660, "gemm_alone": 774},
    "gemm_bias_gelu_bf16_4096": {"library": 694, "compile_max_autotune": 616, "gemm_alone": 774},
    "gemm_bf16_16384x4096x1024": {"library": 640, "gemm_alone": 640},
    "gemm_bias_relu_bf16_16384x4096x1024": {"eager": 323, "library": 599, "compile": 411, "gemm_alone": 640},
    "gemm_bias_gelu_bf16_16384x4096x1024": {"library": 594, "compile": 371, "compile_max_autotune": 474,
                                            "gemm_alone": 640},
}


def tensor(name, shape):
    return {"name": name, "shape": list(shape), "dtype": BF16}


def signature(values):
    return ", ".join(f"{BF16}[{','.join(map(str, v['shape']))}] {v['name']}" for v in values)


def graph_text(name, comment, inputs, outputs, body):
    lines = [f"# {line}".rstrip() for line in comment]
    lines += ["<", "  ir_version: 8,", '  opset_import: ["" : 17]', ">",
              f"{name} ({signature(inputs)}) => ({signature(outputs)})", "{"]
    lines += [f"  {line}" for line in body]
    return "\n".join(lines + ["}"]) + "\n"


def gelu_body(h, y, prefix=""):
    """y = 0.5 * h * (1 + tanh(sqrt(2/pi) * (h + 0.044715 * h^3))), one ONNX op per step."""
    p = prefix
    return [
        f"{p}three = Constant <value = float {{3.0}}> ()",
        f"{p}coeff_f32 = Constant <value = float {{0.044715}}> ()",
        f"{p}coeff = Cast <to = 16> ({p}coeff_f32)",
        f"{p}sqrt_2_over_pi_f32 = Constant <value = float {{0.7978845608}}> ()",
        f"{p}sqrt_2_over_pi = Cast <to = 16> ({p}sqrt_2_over_pi_f32)",
        f"{p}one_f32 = Constant <value = float {{1.0}}> ()",
        f"{p}one = Cast <to = 16> ({p}one_f32)",
        f"{p}half_f32 = Constant <value = float {{0.5}}> ()",
        f"{p}half = Cast <to = 16> ({p}half_f32)",
        f"{p}cubed = Pow ({h}, {p}three)",
        f"{p}cubed_scaled = Mul ({p}cubed, {p}coeff)",
        f"{p}inner = Add ({h}, {p}cubed_scaled)",
        f"{p}inner_scaled = Mul ({p}inner, {p}sqrt_2_over_pi)",
        f"{p}t = Tanh ({p}inner_scaled)",
        f"{p}one_plus_t = Add ({p}t, {p}one)",
        f"{p}half_h = Mul ({h}, {p}half)",
        f"{y} = Mul ({p}half_h, {p}one_plus_t)",
    ]


def gemm_case(name, m, n, k, epilogue, why, check_twin=False):
    """One MatMul x[m,k] @ w[k,n] with the epilogue: (graph text, manifest entry)."""
    formula, eager, library = EPILOGUES[epilogue]
    inputs = [tensor("x", (m, k)), tensor("w", (k, n))]
    if epilogue.startswith("bias"):
        inputs.append(tensor("b", (n,)))
    if epilogue == "residual":
        inputs.append(tensor("r", (m, n)))
    outputs = [tensor("y", (m, n))]
    body = {"plain": ["y = MatMul (x, w)"],
            "bias": ["xw = MatMul (x, w)", "y = Add (xw, b)"],
            "bias_relu": ["xw = MatMul (x, w)", "h = Add (xw, b)", "y = Relu (h)"],
            "bias_gelu": ["xw = MatMul (x, w)", "h = Add (xw, b)"] + gelu_body("h", "y", "g_"),
            "residual": ["xw = MatMul (x, w)", "y = Add (xw, r)"]}[epilogue]
    comment = [f"GEMM M x N x K = {m} x {n} x {k}, bf16, {why}:", f"  {formula}"]
    if epilogue == "bias_gelu":
        comment.append("GELU tanh form as in gelu_tanh_bf16.onnxtxt: f32 constants cast to bf16 (folded on import).")
    if check_twin:
        comment.append("Correctness twin of the full-size GEMM bench cases (scripts/gpu-check.sh, tilefuse run --check).")
    flops = 2 * m * n * k
    entry = {"name": name, "file": f"{name}.onnxtxt", "inputs": inputs, "outputs": outputs,
             "bytes_moved": bytes_moved(inputs, outputs), "flops": flops, "gemm_alone": [[m, n, k]],
             "peers": {"eager": eager, "library": library, "compile": COMPILE,
                       "compile_max_autotune": COMPILE_MAX_AUTOTUNE}}
    return graph_text(name, comment, inputs, outputs, body), entry


def mlp_case(name, batch, tokens, d, d_ff, why):
    """Pre-LayerNorm MLP block with its residual: x + (gelu(LN(x) @ w1 + b1) @ w2 + b2)."""
    inputs = [tensor("x", (batch, tokens, d)), tensor("ln_scale", (d,)), tensor("ln_bias", (d,)),
              tensor("w1", (d, d_ff)), tensor("b1", (d_ff,)), tensor("w2", (d_ff, d)), tensor("b2", (d,))]
    outputs = [tensor("y", (batch, tokens, d))]
    body = ["normed = LayerNormalization <axis = -1, epsilon = 1e-5> (x, ln_scale, ln_bias)",
            "up = MatMul (normed, w1)", "h = Add (up, b1)"] + gelu_body("h", "g", "gelu_") + \
           ["down = MatMul (g, w2)", "down_biased = Add (down, b2)", "y = Add (down_biased, x)"]
    comment = [f"MLP block, {batch} x {tokens} tokens, d = {d}, d_ff = {d_ff}, bf16, {why}:",
               "  y = x + gelu_tanh(LayerNorm(x) @ w1 + b1) @ w2 + b2",
               "LayerNormalization opset 17 (last axis, epsilon 1e-5, scale and bias inputs); the GELU tanh form",
               "op by op as in gelu_tanh_bf16.onnxtxt (f32 constants cast to bf16, folded on import)."]
    m = batch * tokens
    ln = "F.layer_norm(x, x.shape[-1:], ln_scale, ln_bias, eps=1e-5)"
    eager = (f"(0.5 * (h := {ln} @ w1 + b1) * (1 + torch.tanh(0.7978845608 * (h + 0.044715 * h**3)))) "
             "@ w2 + b2 + x")
    library = (f"(torch.addmm(b2, torch._addmm_activation(b1, {ln}.view(-1, x.shape[-1]), w1, use_gelu=True), w2)"
               " + x.view(-1, x.shape[-1])).view(x.shape)")
    entry = {"name": name, "file": f"{name}.onnxtxt", "inputs": inputs, "outputs": outputs,
             "bytes_moved": bytes_moved(inputs, outputs), "flops": 2 * m * d_ff * d * 2,
             "gemm_alone": [[m, d_ff, d], [m, d, d_ff]],
             "peers": {"eager": eager, "library": library, "compile": COMPILE,
                       "compile_max_autotune": COMPILE_MAX_AUTOTUNE}}
    return graph_text(name, comment, inputs, outputs, body), entry


def bytes_moved(inputs, outputs):
    """Each input read once and each output written once, 2 bytes an element."""
    return sum(2 * math.prod(v["shape"]) for v in inputs + outputs)


def shape_name(m, n, k):
    return str(m) if m == n == k else f"{m}x{n}x{k}"


def bench_cases():
    cases = []
    for m, n, k in ((4096, 4096, 4096), (16384, 4096, 1024)):
        for kind, prefix in (("plain", "gemm"), ("bias_relu", "gemm_bias_relu"), ("bias_gelu", "gemm_bias_gelu"),
                             ("residual", "gemm_residual")):
            cases.append(gemm_case(f"{prefix}_bf16_{shape_name(m, n, k)}", m, n, k, kind, "bench case"))
    for kind, prefix in (("bias_gelu", "gemm_bias_gelu"), ("plain", "gemm")):
        cases.append(gemm_case(f"{prefix}_bf16_8192", 8192, 8192, 8192, kind, "bench case"))
    cases.append(gemm_case("gemm_bias_bf16_16x4096x4096", 16, 4096, 4096, "bias", "skinny (decode-like) bench case"))
    # Decode steps of one sequence, of 64, and a LLaMA-style down projection (K = 14336): the
    # skinny GEMM template's range (at most 64 rows), bound by reading w.
    cases.append(gemm_case("gemm_bias_bf16_1x4096x4096", 1, 4096, 4096, "bias", "skinny (decode) bench case"))
    cases.append(gemm_case("gemm_bf16_64x4096x4096", 64, 4096, 4096, "plain", "skinny (decode) bench case"))
    cases.append(gemm_case("gemm_bf16_16x4096x14336", 16, 4096, 14336, "plain", "skinny (decode) bench case"))
    cases.append(mlp_case("mlp_block_bf16_8x2048x1024", 8, 2048, 1024, 4096, "bench case"))
    for _, entry in cases:
        if entry["name"] in ANCHORS:
            entry["anchor_h200_tflops"] = ANCHORS[entry["name"]]
        if entry["flops"] > FULL_SIZE_CHECK_MAX_FLOPS:
            entry["full_size_check"] = False
    return cases


def check_twins():
    """Every epilogue kind at an aligned and a ragged shape, and a small MLP block (not in the manifest)."""
    twins = []
    for m, n, k in ((512, 768, 384), (1000, 1000, 1000)):
        for kind in EPILOGUES:
            prefix = "gemm" if kind == "plain" else f"gemm_{kind}"
            twins.append(gemm_case(f"{prefix}_bf16_{m}x{n}x{k}", m, n, k, kind, "small check case", True))
    twins.append(mlp_case("mlp_block_bf16_2x100x192", 2, 100, 192, 768, "small check case (ragged tokens)"))
    return [text for text, _ in twins], [entry["name"] for _, entry in twins]


def manifest_json(value, indent=0):
    """cases.json's layout: two-space indents, each input/output tensor on one line."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict) and value and "shape" not in value:
        items = [f"{inner}{json.dumps(key)}: {manifest_json(v, indent + 2)}" for key, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return "[\n" + ",\n".join(inner + manifest_json(v, indent + 2) for v in value) + f"\n{pad}]"
    return json.dumps(value)


def merge_cases(cases, entries):
    """The manifest's cases with `entries` merged in: one already there (by name) is replaced where
    it stands, a new one is appended. Keeps the order stable whichever generator runs last."""
    by_name = {entry["name"]: entry for entry in entries}
    merged = [by_name.pop(case["name"], case) for case in cases]
    return merged + [entry for entry in entries if entry["name"] in by_name]


def main():
    generated = bench_cases()
    for text, entry in generated:
        (HERE / entry["file"]).write_text(text)
    (HERE / "check").mkdir(exist_ok=True)
    texts, names = check_twins()
    for text, name in zip(texts, names):
        (HERE / "check" / f"{name}.onnxtxt").write_text(text)
    manifest = json.loads(MANIFEST.read_text())
    manifest["cases"] = merge_cases(manifest["cases"], [entry for _, entry in generated])
    MANIFEST.write_text(manifest_json(manifest) + "\n")
    print(f"{len(generated)} bench cases, {len(names)} check twins, {MANIFEST.name} with {len(manifest['cases'])} cases")


if __name__ == "__main__":
    main()

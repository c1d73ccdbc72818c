#!/usr/bin/env python3
"""FP8 products on the GPU: tilefuse's FP8 GEMM template against cuBLAS's (issue 50).

Each case is y = x · wᵀ at M = N = K and at GPT-2's shapes (8x512 tokens), x and w e4m3 with per-tensor scales, y bf16, written as
quantization tools write it (DequantizeLinear on both operands, MatMul, Cast): pass fp8-products
makes it one FP8 product with the scales in the template's epilogue. Beside it the same
product in bf16 (x, w bf16), tilefuse's own GEMM template. w is an input, read K-major as it is.
Then an MLP block (write_mlp_models) quantized and in bf16, tilefuse alone.

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
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lm_head import tilefuse_us, time_us  # noqa: E402  (the same timing as the LM-head bench)

SIZES = (8192, 4096)
# GPT-2's products at 8x512 tokens (M, N, K): attention's q, k and v, its output, the MLP's two.
# K = 768 is six K steps of 128: the promoted sums' chains of 4 serialized their wgmmas there
# until 2026-12-04.
GPT2_SHAPES = ((4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072))


# GPT-2's LM head at 8x512 (N = 50257): its bf16 logits' rows are not 16-byte aligned, so the
# threads store them (no TMA); tilefuse alone (torch._scaled_mm takes N a multiple of 16).
LM_HEAD = (4096, 50257, 768)


def shapes():
    return [(n, n, n) for n in SIZES] + list(GPT2_SHAPES)


def model_name(kind, m, n, k):
    return f"gemm_{kind}_{n}" if m == n == k else f"gemm_{kind}_{m}x{n}x{k}"


def write_models(folder):
    import onnx
    from onnx import TensorProto, helper
    os.makedirs(folder, exist_ok=True)
    for m, n, k in shapes() + [LM_HEAD]:
        for kind in ("e4m3", "bf16"):
            if kind == "e4m3":
                nodes = [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
                         helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
                         helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]),
                         helper.make_node("MatMul", ["xd", "wt"], ["p"]),
                         helper.make_node("Cast", ["p"], ["y"], to=TensorProto.BFLOAT16)]
                inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [m, k]),
                          helper.make_tensor_value_info("sx", TensorProto.FLOAT, []),
                          helper.make_tensor_value_info("w", TensorProto.FLOAT8E4M3FN, [n, k]),
                          helper.make_tensor_value_info("sw", TensorProto.FLOAT, [])]
            else:
                nodes = [helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]), helper.make_node("MatMul", ["x", "wt"], ["y"])]
                inputs = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [m, k]),
                          helper.make_tensor_value_info("w", TensorProto.BFLOAT16, [n, k])]
            name = model_name(kind, m, n, k)
            graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
            onnx.checker.check_model(model)
            onnx.save(model, os.path.join(folder, name + ".onnx"))
        if m == n == k:
            write_block_scaled_model(folder, m, n, k, weight_blocks=False)
            write_block_scaled_model(folder, m, n, k, weight_blocks=True)


def write_block_scaled_model(folder, m, n, k, weight_blocks):
    """Block scales: x per row and 128 columns of K, w per column and 128 of K (an input), or
    (weight_blocks, DeepGEMM's weights) one per 128x128 block of w, a constant repeated over the
    block's 128 columns as ONNX's blocked DequantizeLinear writes it (w itself an input)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"], axis=1, block_size=128),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1, block_size=128),
             helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]),
             helper.make_node("MatMul", ["xd", "wt"], ["p"]),
             helper.make_node("Cast", ["p"], ["y"], to=TensorProto.BFLOAT16)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [m, k]),
              helper.make_tensor_value_info("sx", TensorProto.FLOAT, [m, k // 128]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT8E4M3FN, [n, k])]
    initializers = []
    if weight_blocks:
        blocks = np.random.default_rng(5).uniform(0.5, 2.0, (n // 128, k // 128)).astype(np.float32)
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(np.repeat(blocks, 128, axis=0)), "sw"))
    else:
        inputs.append(helper.make_tensor_value_info("sw", TensorProto.FLOAT, [n, k // 128]))
    name = model_name("e4m3_weight_blocks" if weight_blocks else "e4m3_blocks", m, n, k)
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(folder, name + ".onnx"))


MLPS = ((8192, 4096, 16384), (4096, 768, 3072))  # tokens, hidden, inner: a large block, GPT-2's at 8x512


def write_int8_models(folder):
    """y = x · wᵀ with x and w int8 (symmetric: zero points 0), per-tensor scales, y bf16, as
    quantization tools write it: pass fp8-products makes it one int8 product (int32 sums) with
    the scales in the epilogue."""
    import onnx
    from onnx import TensorProto, helper
    info = helper.make_tensor_value_info
    for n in SIZES:
        nodes = [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]), helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
                 helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]), helper.make_node("MatMul", ["xd", "wt"], ["p"]),
                 helper.make_node("Cast", ["p"], ["y"], to=TensorProto.BFLOAT16)]
        inputs = [info("x", TensorProto.INT8, [n, n]), info("sx", TensorProto.FLOAT, []), info("w", TensorProto.INT8, [n, n]),
                  info("sw", TensorProto.FLOAT, [])]
        graph = helper.make_graph(nodes, "gemm_i8", inputs, [info("y", TensorProto.BFLOAT16, [n, n])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(folder, model_name("i8", n, n, n) + ".onnx"))
        # onnxruntime's default activations: uint8 with a zero point (131); pass fp8-products
        # shifts x into int8 and takes 3 · Σ_k w_k off after the sum (w's column sums computed
        # each call here: w is an input).
        nodes[0] = helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"])
        inputs[0] = info("x", TensorProto.UINT8, [n, n])
        zx = helper.make_tensor("zx", TensorProto.UINT8, [], [131])
        graph = helper.make_graph(nodes, "gemm_u8", inputs, [info("y", TensorProto.BFLOAT16, [n, n])], [zx])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(folder, model_name("u8", n, n, n) + ".onnx"))


def int8_peers(n):
    """torch._int_mm (cuBLAS's int8 GEMM, int32 out) and the same with its scales and the cast to
    bf16 after, eager and compiled."""
    import torch
    x = torch.randint(-127, 128, (n, n), device="cuda", dtype=torch.int8)
    w = torch.randint(-127, 128, (n, n), device="cuda", dtype=torch.int8)
    sx, sw = torch.tensor(0.01, device="cuda"), torch.tensor(0.02, device="cuda")

    def scaled(x, w):
        return (torch._int_mm(x, w.t()).float() * (sx * sw)).to(torch.bfloat16)
    compiled = torch.compile(scaled)
    return {"_int_mm": time_us(lambda: torch._int_mm(x, w.t())), "scaled eager": time_us(lambda: scaled(x, w)),
            "scaled torch.compile": time_us(lambda: compiled(x, w))}


def write_amax_models(folder):
    """Delayed scaling's product: y = x · wᵀ in f32 (x, w e4m3, per-tensor scales), quantized to
    e4m3 by a given scale for the next layer, and its amax ReduceMax(Abs(y)) over every element for
    the next step's scale (gemm_e4m3_amax_N: outputs q and the amax); beside it the same product
    quantized without the amax (gemm_e4m3_quantized_N), what the amax adds to."""
    import onnx
    from onnx import TensorProto, helper
    info = helper.make_tensor_value_info
    for n in SIZES:
        for kind in ("amax", "quantized"):
            zero = helper.make_tensor("zy", TensorProto.FLOAT8E4M3FN, [], [0.0])
            nodes = [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]), helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
                     helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]), helper.make_node("MatMul", ["xd", "wt"], ["y"]),
                     helper.make_node("Constant", [], ["zy"], value=zero), helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["q"])]
            outputs = [info("q", TensorProto.FLOAT8E4M3FN, [n, n])]
            if kind == "amax":
                nodes += [helper.make_node("Abs", ["y"], ["a"]), helper.make_node("ReduceMax", ["a"], ["amax"], keepdims=0)]
                outputs.append(info("amax", TensorProto.FLOAT, []))
            inputs = [info("x", TensorProto.FLOAT8E4M3FN, [n, n]), info("sx", TensorProto.FLOAT, []),
                      info("w", TensorProto.FLOAT8E4M3FN, [n, n]), info("sw", TensorProto.FLOAT, []), info("sy", TensorProto.FLOAT, [])]
            graph = helper.make_graph(nodes, f"gemm_e4m3_{kind}", inputs, outputs)
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
            onnx.checker.check_model(model)
            onnx.save(model, os.path.join(folder, model_name(f"e4m3_{kind}", n, n, n) + ".onnx"))


def amax_peers(n):
    """PyTorch's delayed-scaling step: torch._scaled_mm to f32, then the amax and the quantization
    (eager: two reductions' worth of kernels; torch.compile: the amax and the cast fused after
    cuBLAS)."""
    import torch
    x = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    one, sy = torch.tensor(1.0, device="cuda"), torch.tensor(0.05, device="cuda")

    def step(x, w):
        y = torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
        return (y / sy).to(torch.float8_e4m3fn), y.abs().amax()
    compiled = torch.compile(step)
    return {"eager": time_us(lambda: step(x, w)), "torch.compile": time_us(lambda: compiled(x, w))}


def write_mlp_models(folder):
    """The MLP block y = GELU(x · W1ᵀ + b1) · W2ᵀ + b2 (tanh GELU) in bf16, and quantized as
    quantization tools write it: x and both weights e4m3 with per-tensor scales, the GELU's
    output quantized to e4m3 (QuantizeLinear, scale and zero point) and dequantized before the
    second product, y bf16."""
    for mlp in MLPS:
        write_mlp_model(folder, *mlp)


def write_mlp_model(folder, m, h, f):
    import onnx
    from onnx import TensorProto, helper
    info = helper.make_tensor_value_info
    for kind in ("e4m3", "bf16"):
        e = TensorProto.FLOAT8E4M3FN if kind == "e4m3" else TensorProto.BFLOAT16
        bias = TensorProto.FLOAT if kind == "e4m3" else TensorProto.BFLOAT16
        inputs = [info("x", e, [m, h]), info("w1", e, [f, h]), info("b1", bias, [f]), info("w2", e, [h, f]), info("b2", bias, [h])]
        nodes = []
        if kind == "e4m3":
            inputs += [info("sx", TensorProto.FLOAT, []), info("s1", TensorProto.FLOAT, []), info("s2", TensorProto.FLOAT, []),
                       info("sg", TensorProto.FLOAT, [])]
            nodes += [helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]), helper.make_node("DequantizeLinear", ["w1", "s1"], ["w1d"]),
                      helper.make_node("DequantizeLinear", ["w2", "s2"], ["w2d"])]
            x, w1, w2 = "xd", "w1d", "w2d"
        else:
            x, w1, w2 = "x", "w1", "w2"
        nodes += [helper.make_node("Transpose", [w1], ["w1t"], perm=[1, 0]), helper.make_node("MatMul", [x, "w1t"], ["p1"]),
                  helper.make_node("Add", ["p1", "b1"], ["a1"]), helper.make_node("Gelu", ["a1"], ["g"], approximate="tanh")]
        if kind == "e4m3":
            zero = helper.make_tensor("zg", TensorProto.FLOAT8E4M3FN, [], [0.0])
            nodes += [helper.make_node("Constant", [], ["zg"], value=zero), helper.make_node("QuantizeLinear", ["g", "sg", "zg"], ["gq"]),
                      helper.make_node("DequantizeLinear", ["gq", "sg"], ["gd"])]
            g = "gd"
        else:
            g = "g"
        nodes += [helper.make_node("Transpose", [w2], ["w2t"], perm=[1, 0]), helper.make_node("MatMul", [g, "w2t"], ["p2"]),
                  helper.make_node("Add", ["p2", "b2"], ["a2"])]
        nodes.append(helper.make_node("Cast", ["a2"], ["y"], to=TensorProto.BFLOAT16))
        graph = helper.make_graph(nodes, f"mlp_{kind}", inputs, [info("y", TensorProto.BFLOAT16, [m, h])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(folder, f"mlp_{kind}_{m}x{h}x{f}.onnx"))


def peers(m, n, k):
    import torch
    x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    out = {}
    for fast in (False, True):
        out[f"_scaled_mm fast_accum={fast}"] = time_us(
            lambda: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast))
    xb, wb = x.to(torch.bfloat16), w.to(torch.bfloat16)
    out["mm bf16"] = time_us(lambda: torch.mm(xb, wb.t()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-models", metavar="DIR")
    ap.add_argument("--models", metavar="DIR", default="bench/cases/fp8")
    ap.add_argument("--tilefuse", default="build/tilefuse")
    ap.add_argument("--json", metavar="FILE", help="the rows as JSON, rewritten after each row (a run cut short keeps its rows)")
    ap.add_argument("--parts", default="products,blocks,head,mlp,amax,int8",
                    help="comma-separated: products (per tensor against cuBLAS), blocks (block scales), head (GPT-2's LM head), mlp, "
                         "amax (a quantized output's amax in the epilogue, against its own kernel and PyTorch), "
                         "int8 (symmetric int8 products against torch._int_mm)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="the square sizes of products and blocks (GPT-2's shapes are timed with 'products' wherever 768 is named)")
    a = ap.parse_args()
    parts = set(a.parts.split(","))
    sizes = [int(v) for v in a.sizes.split(",") if v]
    rows = []

    def dump():
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    if a.write_models:
        write_models(a.write_models)
        write_mlp_models(a.write_models)
        write_amax_models(a.write_models)
        write_int8_models(a.write_models)
        return
    print("| M x N x K | tilefuse FP8 promoted µs (TF/s) | tilefuse FP8 fast accum | tilefuse bf16 | cuBLAS FP8 promoted | cuBLAS FP8 fast | cuBLAS bf16 | FP8 vs cuBLAS FP8 (same accumulation) | FP8 vs tilefuse bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, n, k in shapes() if "products" in parts else []:
        if m == n == k and n not in sizes or m != n and 768 not in sizes:
            continue
        fp8 = os.path.join(a.models, model_name("e4m3", m, n, k) + ".onnx")
        if not os.path.exists(fp8):
            print(f"| {m}x{n}x{k} | no model: write them with --write-models |", flush=True)
            continue
        ours = {"promoted": tilefuse_us(a.tilefuse, fp8), "promoted tail": tilefuse_us(a.tilefuse, fp8, "--gemm-form", "tail"),
                "fast": tilefuse_us(a.tilefuse, fp8, "--precision", "high"),
                "bf16": tilefuse_us(a.tilefuse, os.path.join(a.models, model_name("bf16", m, n, k) + ".onnx"))}
        p = peers(m, n, k)
        flops = 2 * m * n * k

        def cell(us):
            return f"{us:.0f} ({flops / us / 1e6:.0f})" if us else "failed"
        us = {k: v[0] for k, v in ours.items()}
        ratio = lambda peer, mine: f"{peer / mine:.2f}x" if mine else "-"
        print(f"| {m}x{n}x{k} | {cell(us['promoted'])} (tail {cell(us['promoted tail'])}) | {cell(us['fast'])} | {cell(us['bf16'])} | {cell(p['_scaled_mm fast_accum=False'])} | "
              f"{cell(p['_scaled_mm fast_accum=True'])} | {cell(p['mm bf16'])} | "
              f"{ratio(p['_scaled_mm fast_accum=False'], us['promoted'])} / {ratio(p['_scaled_mm fast_accum=True'], us['fast'])} | "
              f"{ratio(us['bf16'] or 0, us['promoted'])} / {ratio(us['bf16'] or 0, us['fast'])} |", flush=True)
        for form, (_, report) in ours.items():
            if report:
                print(f"  {m}x{n}x{k} {form}: {report['groups'][0]['strategy']}", file=sys.stderr, flush=True)
        rows.append({"shape": [m, n, k], "tilefuse_us": us, "peers_us": p, "reports": {key: v[1] for key, v in ours.items()}})
        dump()
    # Block scales: the template scales each K step (the default); TILEFUSE_FP8_BLOCK_SCALES=0
    # computes the product as written, dequantized. Issue 50's bar: 1.4x tilefuse's bf16.
    # (weight_blocks: DeepGEMM's 128x128 weight blocks, one scale a tile's 128 columns.)
    for n in sizes if "blocks" in parts else []:
        for kind in ("e4m3_blocks", "e4m3_weight_blocks"):
            blocked = os.path.join(a.models, model_name(kind, n, n, n) + ".onnx")
            if not os.path.exists(blocked):
                continue
            scaled = tilefuse_us(a.tilefuse, blocked)
            os.environ["TILEFUSE_FP8_BLOCK_SCALES"] = "0"
            as_written = tilefuse_us(a.tilefuse, blocked)[0]
            del os.environ["TILEFUSE_FP8_BLOCK_SCALES"]
            bf16 = next((r["tilefuse_us"]["bf16"] for r in rows if r.get("shape") == [n, n, n]), None)
            label = "x 1x128, w 128x128 blocks" if kind == "e4m3_weight_blocks" else "x 1x128, w 128x1"
            print(f"block-scaled e4m3 {n}^3, {label} (tilefuse, µs): {scaled[0] or 0:.0f} ({2 * n ** 3 / (scaled[0] or 1) / 1e6:.0f} TF/s); "
                  f"as written {as_written or 0:.0f}; bf16 {bf16 or 0:.0f}; bf16 / block-scaled "
                  f"{(bf16 or 0) / (scaled[0] or 1):.2f}x", flush=True)
            if scaled[1]:
                print(f"  {n}^3 {kind}: {scaled[1]['groups'][0]['strategy']}", file=sys.stderr, flush=True)
            rows.append({kind: n, "tilefuse_us": {"block_scaled": scaled[0], "as_written": as_written, "bf16": bf16}})
            dump()
    # The LM head in the rule's form (the epilogue in the tail, 128x192) and overlapped (128x128,
    # the store by the threads beside the next tile's steps).
    m, n, k = LM_HEAD
    head = {form: os.path.join(a.models, model_name(form, m, n, k) + ".onnx") for form in ("e4m3", "bf16")}
    if "head" in parts and all(os.path.exists(p) for p in head.values()):
        lm = {"e4m3": tilefuse_us(a.tilefuse, head["e4m3"]), "e4m3 overlapped": tilefuse_us(a.tilefuse, head["e4m3"], "--gemm-form", "overlap"),
              "bf16": tilefuse_us(a.tilefuse, head["bf16"])}
        print(f"LM head {m}x{n}x{k} (tilefuse, µs): " + ", ".join(f"{key} {v[0] or 0:.0f}" for key, v in lm.items()), flush=True)
        for key, (_, report) in lm.items():
            if report:
                print(f"  LM head {key}: {report['groups'][0]['strategy']}", file=sys.stderr, flush=True)
        rows.append({"lm_head": [m, n, k], "tilefuse_us": {key: v[0] for key, v in lm.items()}})
        dump()
    # The amax in the product's epilogue (the default) against its own reduction kernel
    # (TILEFUSE_AMAX_IN_EPILOGUE=0: y stored in f32 and read back) and the product without it.
    for n in sizes if "amax" in parts else []:
        path = lambda kind: os.path.join(a.models, model_name(f"e4m3_{kind}", n, n, n) + ".onnx")  # noqa: E731
        if not os.path.exists(path("amax")):
            continue
        folded = tilefuse_us(a.tilefuse, path("amax"))
        os.environ["TILEFUSE_AMAX_IN_EPILOGUE"] = "0"
        apart = tilefuse_us(a.tilefuse, path("amax"))[0]
        del os.environ["TILEFUSE_AMAX_IN_EPILOGUE"]
        without = tilefuse_us(a.tilefuse, path("quantized"))[0]
        p = amax_peers(n)
        print(f"e4m3 {n}^3 quantized with its amax (µs): in the epilogue {folded[0] or 0:.0f}, its own kernel {apart or 0:.0f}, "
              f"no amax {without or 0:.0f}; PyTorch eager {p['eager']:.0f}, torch.compile {p['torch.compile']:.0f}", flush=True)
        if folded[1]:
            print(f"  {n}^3 amax: {folded[1]['groups'][0]['strategy']}", file=sys.stderr, flush=True)
        rows.append({"amax": n, "tilefuse_us": {"in_epilogue": folded[0], "own_kernel": apart, "no_amax": without}, "peers_us": p})
        dump()
    # int8 (symmetric) products on the int8 tensor cores against cuBLAS's (torch._int_mm), beside
    # tilefuse's e4m3 and bf16 products of the same size.
    for n in sizes if "int8" in parts else []:
        path = os.path.join(a.models, model_name("i8", n, n, n) + ".onnx")
        if not os.path.exists(path):
            continue
        ours = tilefuse_us(a.tilefuse, path)
        u8_path = os.path.join(a.models, model_name("u8", n, n, n) + ".onnx")
        u8 = tilefuse_us(a.tilefuse, u8_path) if os.path.exists(u8_path) else (None, None)
        fp8 = tilefuse_us(a.tilefuse, os.path.join(a.models, model_name("e4m3", n, n, n) + ".onnx"))[0]
        bf16 = tilefuse_us(a.tilefuse, os.path.join(a.models, model_name("bf16", n, n, n) + ".onnx"))[0]
        p = int8_peers(n)
        tops = lambda us: 2 * n ** 3 / us / 1e6 if us else 0  # noqa: E731
        print(f"int8 {n}^3 (µs): tilefuse {ours[0] or 0:.0f} ({tops(ours[0]):.0f} TOPS), uint8 with a zero point {u8[0] or 0:.0f}, "
              f"e4m3 {fp8 or 0:.0f}, bf16 {bf16 or 0:.0f}; "
              f"torch._int_mm {p['_int_mm']:.0f} ({tops(p['_int_mm']):.0f} TOPS), scaled to bf16 eager {p['scaled eager']:.0f}, "
              f"torch.compile {p['scaled torch.compile']:.0f}", flush=True)
        for label, run in (("int8", ours), ("uint8", u8)):
            if run[1]:
                print(f"  {n}^3 {label}: " + "; ".join(g["strategy"] for g in run[1]["groups"]), file=sys.stderr, flush=True)
        rows.append({"int8": n, "tilefuse_us": {"int8": ours[0], "uint8_zero_point": u8[0], "e4m3": fp8, "bf16": bf16}, "peers_us": p})
        dump()
    for m, h, f in MLPS if "mlp" in parts else []:
        path = lambda kind: os.path.join(a.models, f"mlp_{kind}_{m}x{h}x{f}.onnx")
        if not os.path.exists(path("e4m3")):
            print(f"MLP block {m}x{h}x{f}: no model: write them with --write-models", flush=True)
            continue
        mlp = {kind: tilefuse_us(a.tilefuse, path(kind))[0] for kind in ("e4m3", "bf16")}
        mlp["e4m3 fast"] = tilefuse_us(a.tilefuse, path("e4m3"), "--precision", "high")[0]
        mlp["e4m3 ping-pong"] = tilefuse_us(a.tilefuse, path("e4m3"), "--gemm-form", "pingpong")[0]
        mlp["e4m3 tail"] = tilefuse_us(a.tilefuse, path("e4m3"), "--gemm-form", "tail")[0]
        mlp["e4m3 overlapped"] = tilefuse_us(a.tilefuse, path("e4m3"), "--gemm-form", "overlap")[0]
        print(f"MLP block {m}x{h}x{f} (tilefuse, µs): e4m3 {mlp['e4m3'] or 0:.1f} (epilogues in the tail {mlp['e4m3 tail'] or 0:.1f}, "
              f"overlapped {mlp['e4m3 overlapped'] or 0:.1f}), e4m3 fast accumulation {mlp['e4m3 fast'] or 0:.1f}, "
              f"e4m3 ping-pong consumers {mlp['e4m3 ping-pong'] or 0:.1f}, bf16 {mlp['bf16'] or 0:.1f}", flush=True)
        rows.append({"mlp": [m, h, f], "tilefuse_us": mlp})
        dump()


if __name__ == "__main__":
    main()

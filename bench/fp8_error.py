#!/usr/bin/env python3
"""The error an FP8-quantized MLP block makes against the f32 block (issue 50), as a
quantization tool's per-tensor e4m3 recipe gives it, run through tilefuse.

y = GELU(x · W1ᵀ + b1) · W2ᵀ + b2 (tanh GELU, GPT-2's MLP sizes by default) with random weights
(fixed seed), in f32 and quantized as tools write it: x quantized to e4m3 (QuantizeLinear with a
scale from its absolute maximum / 448), both weights stored e4m3 with per-tensor scales, the
GELU's output quantized again before the second product (its scale calibrated on the f32 run),
every quantized value dequantized before its product. Both models take the same f32 x; the
error is reported norm-wise, ‖y_q − y_f32‖ / ‖y_f32‖, and as the largest element's error over
the largest |y_f32|.

On the CUDA backend the quantized products run as FP8 GEMMs (passes/fp8_products.h), whose
outputs `tilefuse run --check` holds to the quantized graph's f64 evaluation; on the CPU the
same graph computes the dequantized products in f32, so the CPU's error is the quantization's.

    PYTHONPATH=build/python python3 bench/fp8_error.py [--backend cpu|cuda] [--json FILE]
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

E4M3_MAX = 448.0


def models(tokens, hidden, inner, folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2026)
    w1 = (rng.standard_normal((inner, hidden)) / np.sqrt(hidden)).astype(np.float32)
    w2 = (rng.standard_normal((hidden, inner)) / np.sqrt(inner)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(inner)).astype(np.float32)
    b2 = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
    x = rng.standard_normal((tokens, hidden)).astype(np.float32)
    h = x @ w1.T + b1
    g = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    scale = lambda a: np.float32(np.abs(a).max() / E4M3_MAX)  # noqa: E731
    info = helper.make_tensor_value_info
    const = numpy_helper.from_array

    def f8(name, values):
        return helper.make_tensor(name, TensorProto.FLOAT8E4M3FN, list(values.shape), values.ravel().tolist())

    def linear(x_name, w_name, b_name, out):
        return [helper.make_node("Transpose", [w_name], [w_name + "t"], perm=[1, 0]),
                helper.make_node("MatMul", [x_name, w_name + "t"], [out + "p"]), helper.make_node("Add", [out + "p", b_name], [out])]

    gelu = helper.make_node("Gelu", ["h"], ["g"], approximate="tanh")
    f32_nodes = linear("x", "w1", "b1", "h") + [gelu] + linear("g", "w2", "b2", "y")
    f32 = helper.make_graph(f32_nodes, "mlp_f32", [info("x", TensorProto.FLOAT, [tokens, hidden])],
                            [info("y", TensorProto.FLOAT, [tokens, hidden])],
                            [const(w1, "w1"), const(w2, "w2"), const(b1, "b1"), const(b2, "b2")])
    # Quantized: x and g through QuantizeLinear / DequantizeLinear, the weights stored in e4m3.
    s = {"sx": scale(x), "s1": scale(w1), "sg": scale(g), "s2": scale(w2)}
    q_nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zero"], ["xq"]), helper.make_node("DequantizeLinear", ["xq", "sx"], ["xd"]),
               helper.make_node("DequantizeLinear", ["w1q", "s1"], ["w1d"]), helper.make_node("DequantizeLinear", ["w2q", "s2"], ["w2d"])]
    q_nodes += linear("xd", "w1d", "b1", "h") + [gelu]
    q_nodes += [helper.make_node("QuantizeLinear", ["g", "sg", "zero"], ["gq"]), helper.make_node("DequantizeLinear", ["gq", "sg"], ["gd"])]
    q_nodes += linear("gd", "w2d", "b2", "y")
    inits = [f8("w1q", w1 / s["s1"]), f8("w2q", w2 / s["s2"]), const(b1, "b1"), const(b2, "b2"), f8("zero", np.zeros((), np.float32))]
    inits += [const(np.array(v, np.float32), k) for k, v in s.items()]
    quantized = helper.make_graph(q_nodes, "mlp_e4m3", [info("x", TensorProto.FLOAT, [tokens, hidden])],
                                  [info("y", TensorProto.FLOAT, [tokens, hidden])], inits)
    paths = []
    for graph in (f32, quantized):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        onnx.checker.check_model(model)
        paths.append(os.path.join(folder, graph.name + ".onnx"))
        onnx.save(model, paths[-1])
    return paths, x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--inner", type=int, default=3072)
    ap.add_argument("--json")
    a = ap.parse_args()
    import tilefuse
    with tempfile.TemporaryDirectory() as folder:
        (f32_path, q_path), x = models(a.tokens, a.hidden, a.inner, folder)
        y32 = np.asarray(tilefuse.compile(f32_path, backend=a.backend)(x)[0], np.float64)
        quantized = tilefuse.compile(q_path, backend=a.backend)
        yq = np.asarray(quantized(x)[0], np.float64)
    result = {"backend": a.backend, "tokens": a.tokens, "hidden": a.hidden, "inner": a.inner,
              "relative_error": float(np.linalg.norm(yq - y32) / np.linalg.norm(y32)),
              "max_error_to_scale": float(np.abs(yq - y32).max() / np.abs(y32).max()),
              "kernels": [f"{k.name}: {k.mode}" for k in quantized.kernels]}
    print(f"e4m3 MLP {a.tokens}x{a.hidden}x{a.inner} on {a.backend}: error against f32 {result['relative_error']:.2e} "
          f"(norm-wise), largest {result['max_error_to_scale']:.2e} of the output's scale", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

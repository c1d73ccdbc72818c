"""Writes the FP8 GEMM correctness models into tests/gemm (binary ONNX: the ONNX text parser
of the system's onnx 1.12 has no 8-bit float types). Quantized products as quantization tools
write them: DequantizeLinear on each operand, a product in f32 (or bf16), then the ops after.
Pass fp8-products turns each into one FP8 product with its scales in the GEMM template's
epilogue. Weights are random (fixed seed), made e4m3/e5m2 by onnx's own rounding.

    build/venv/bin/python tests/gemm/make_fp8_models.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
E4M3, E5M2 = TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2


def f8_initializer(name, values, elem_type):
    """`values` (float) rounded to the 8-bit float `elem_type`, as an initializer."""
    saturate = True
    raw = [onnx.helper.float32_to_float8e4m3(v, saturate=saturate) if elem_type == E4M3 else
           onnx.helper.float32_to_float8e5m2(v, saturate=saturate) for v in values.astype(np.float32).ravel()]
    t = TensorProto(name=name, data_type=elem_type, dims=list(values.shape))
    t.raw_data = bytes(bytearray(raw))
    return t


def save(name, nodes, inputs, outputs, initializers=(), doc=""):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers), doc_string=doc)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(HERE, name + ".onnx"))


def linear_xwt():
    """x · wᵀ with w an input [N][K] (read K-major as it is), per-tensor scale for x and one per
    output channel for w, bias and tanh-GELU, the result returned in bf16 and quantized to e4m3."""
    m, k, n = 512, 1024, 384
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0),
        helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["xd", "wt"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["s"]),
        helper.make_node("Gelu", ["s"], ["g"], approximate="tanh"),
        helper.make_node("Cast", ["g"], ["y"], to=TensorProto.BFLOAT16),
        helper.make_node("QuantizeLinear", ["g", "sy", "zy"], ["q"]),  # the zero point's type is q's
    ]
    inputs = [helper.make_tensor_value_info("x", E4M3, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("w", E4M3, [n, k]), helper.make_tensor_value_info("sw", TensorProto.FLOAT, [n]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [n])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n]), helper.make_tensor_value_info("q", E4M3, [m, n])]
    save("gemm_fp8_e4m3_xwt_bias_gelu", nodes, inputs, outputs,
         [numpy_helper.from_array(np.array(0.05, np.float32), "sy"), f8_initializer("zy", np.zeros(()), E4M3)], linear_xwt.__doc__)


def constant_weight(elem_type, suffix):
    """A constant weight [K][N] (stored K-major at compile time) with a scale per output column,
    x with a per-tensor scale; the product in bf16 (the dequantized values cast to it) plus a
    residual. 2048 rows, N = 768 over K = 512."""
    m, k, n = 2048, 512, 768
    rng = np.random.default_rng(7)
    w = f8_initializer("w", rng.uniform(-2, 2, (k, n)), elem_type)
    sw = numpy_helper.from_array(rng.uniform(0.01, 0.05, n).astype(np.float32), "sw")
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1),
        helper.make_node("Cast", ["xd"], ["xh"], to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["wd"], ["wh"], to=TensorProto.BFLOAT16),
        helper.make_node("MatMul", ["xh", "wh"], ["p"]),
        helper.make_node("Add", ["p", "r"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", elem_type, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("r", TensorProto.BFLOAT16, [m, n])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])]
    save(f"gemm_fp8_{suffix}_constant_weight_residual", nodes, inputs, outputs, [w, sw], constant_weight.__doc__)


def quantized_activation(m, n, name):
    """As onnxruntime's quantizer writes a linear layer (QDQ): x (f32) quantized to e4m3 and
    dequantized in the graph, a constant weight [K][N] e4m3 with a per-tensor scale, the product
    and its bias in f32, returned in f32 and quantized again for the next layer. K = 768
    (GPT-2's width); m rows (few: split over K), n columns (odd: stored by the threads)."""
    k = 768
    rng = np.random.default_rng(11)
    w = f8_initializer("w", rng.uniform(-448, 448, (k, n)), E4M3)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["y"]),
        helper.make_node("QuantizeLinear", ["y", "sy", "zx"], ["q"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n]), helper.make_tensor_value_info("q", E4M3, [m, n])]
    scalar = lambda v, nm: numpy_helper.from_array(np.array(v, np.float32), nm)  # noqa: E731
    inits = [w, scalar(1 / 448, "sx"), scalar(2e-4, "sw"), scalar(0.02, "sy"), f8_initializer("zx", np.zeros(()), E4M3),
             f8_initializer("zw", np.zeros(()), E4M3), numpy_helper.from_array(rng.uniform(-1, 1, n).astype(np.float32), "b")]
    save(name, nodes, inputs, outputs, inits, quantized_activation.__doc__)


def block_scales(weight_blocks=False):
    """DeepGEMM's scaling as ONNX's blocked DequantizeLinear writes it: x [M][K] e4m3 with a scale
    per row and 128 columns of K, a constant weight [K][N] e4m3 with one per 128 rows of K and
    column; the product in bf16. weight_blocks: the weight's scales one per 128x128 block
    (DeepGEMM's weights), repeated over the block's columns, N = 320 ending in a short block."""
    m, k, n = (320, 512, 320) if weight_blocks else (256, 512, 384)
    rng = np.random.default_rng(13)
    w = f8_initializer("w", rng.uniform(-2, 2, (k, n)), E4M3)
    scales = rng.uniform(0.01, 0.05, (k // 128, n)).astype(np.float32)
    if weight_blocks:
        scales = np.repeat(rng.uniform(0.01, 0.05, (k // 128, (n + 127) // 128)).astype(np.float32), 128, axis=1)[:, :n]
    sw = numpy_helper.from_array(np.ascontiguousarray(scales), "sw")
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"], axis=1, block_size=128),
        helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0, block_size=128),
        helper.make_node("MatMul", ["xd", "wd"], ["p"]),
        helper.make_node("Cast", ["p"], ["y"], to=TensorProto.BFLOAT16),
    ]
    inputs = [helper.make_tensor_value_info("x", E4M3, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, [m, k // 128])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])]
    save("gemm_fp8_e4m3_weight_block_scales" if weight_blocks else "gemm_fp8_e4m3_block_scales", nodes, inputs, outputs, [w, sw],
         block_scales.__doc__)


def amax_of_output(m, n, name, of_cast):
    """Delayed scaling's amax of a product's output (ReduceMax(Abs(y)) over all of y), the output
    quantized to e4m3 by a given scale: x and a constant weight [K][N] e4m3 with per-tensor
    scales, K = 768, the product plus a bias in f32. of_cast: the amax of y cast to bf16 (a graph
    output, so still stored) widened to f32 after the ReduceMax; else of y itself in f32, which
    only the amax and the quantization read (the template then does not store it). m rows (not a
    multiple of the tiles), n columns (odd: element by element)."""
    k = 768
    rng = np.random.default_rng(17)
    w = f8_initializer("w", rng.uniform(-448, 448, (k, n)), E4M3)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["y"]),
        helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["q"]),
    ]
    outputs = [helper.make_tensor_value_info("q", E4M3, [m, n]), helper.make_tensor_value_info("amax", TensorProto.FLOAT, [])]
    if of_cast:
        nodes += [helper.make_node("Cast", ["y"], ["yh"], to=TensorProto.BFLOAT16), helper.make_node("Abs", ["yh"], ["a"]),
                  helper.make_node("ReduceMax", ["a"], ["amax_h"], keepdims=0),
                  helper.make_node("Cast", ["amax_h"], ["amax"], to=TensorProto.FLOAT)]
        outputs.append(helper.make_tensor_value_info("yh", TensorProto.BFLOAT16, [m, n]))
    else:
        nodes += [helper.make_node("Abs", ["y"], ["a"]), helper.make_node("ReduceMax", ["a"], ["amax"], keepdims=0)]
    inputs = [helper.make_tensor_value_info("x", E4M3, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, [])]
    scalar = lambda v, nm: numpy_helper.from_array(np.array(v, np.float32), nm)  # noqa: E731
    inits = [w, scalar(2e-4, "sw"), scalar(0.05, "sy"), f8_initializer("zy", np.zeros(()), E4M3),
             numpy_helper.from_array(rng.uniform(-1, 1, n).astype(np.float32), "b")]
    save(name, nodes, inputs, outputs, inits, amax_of_output.__doc__)


def int8_linear(constant_weight):
    """Symmetric int8 quantization (zero points 0), as quantization tools write it with
    symmetric activations: DequantizeLinear on x (per-tensor scale) and on the weight, the
    product in f32; the int8 tensor cores sum it in int32. constant_weight: w [K][N] a constant
    with a scale per output column (stored K-major at compile time), a bias, the result in bf16
    (quantized to int8 again, its ties moved by f32's rounding would fail an exact check), 1000
    rows (ragged), K = 512; else w an input [N][K] (read
    K-major as it is) with a scale per row, the result in f32, K = 4096 (sums past 2^24: f32
    holds them rounded), N = 1001 (odd: the threads store the rows)."""
    rng = np.random.default_rng(19)
    I8 = TensorProto.INT8
    if constant_weight:
        m, k, n = 1000, 512, 768
        w = numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w")
        sw = numpy_helper.from_array(rng.uniform(0.001, 0.01, n).astype(np.float32), "sw")
        nodes = [
            helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
            helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1),
            helper.make_node("MatMul", ["xd", "wd"], ["p"]),
            helper.make_node("Add", ["p", "b"], ["s"]),
            helper.make_node("Cast", ["s"], ["y"], to=TensorProto.BFLOAT16),
        ]
        inputs = [helper.make_tensor_value_info("x", I8, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, [])]
        outputs = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [m, n])]
        inits = [w, sw, numpy_helper.from_array(rng.uniform(-1, 1, n).astype(np.float32), "b")]
        save("gemm_int8_constant_weight_per_column", nodes, inputs, outputs, inits, int8_linear.__doc__)
    else:
        m, k, n = 256, 4096, 1001
        nodes = [
            helper.make_node("DequantizeLinear", ["x", "sx"], ["xd"]),
            helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0),
            helper.make_node("Transpose", ["wd"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["xd", "wt"], ["y"]),
        ]
        inputs = [helper.make_tensor_value_info("x", I8, [m, k]), helper.make_tensor_value_info("sx", TensorProto.FLOAT, []),
                  helper.make_tensor_value_info("w", I8, [n, k]), helper.make_tensor_value_info("sw", TensorProto.FLOAT, [n])]
        outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])]
        save("gemm_int8_xwt_per_row_odd_n", nodes, inputs, outputs, [], int8_linear.__doc__)


def uint8_activation_linear():
    """Static quantization as onnxruntime writes it by default (QDQ, QUInt8 activations with a
    zero point, QInt8 weights symmetric, zero points written out as initializers): x quantized
    to uint8 with its zero point (131) and dequantized, the constant int8 weight dequantized with
    a scale per output column and a zero point of zeros, the product in f32, a bias. Pass
    fp8-products shifts x into int8 (q - 128) and takes (131 - 128) · Σ_k w_k off after the int8
    sum; 1000 rows (ragged), K = 768."""
    rng = np.random.default_rng(23)
    m, k, n = 1000, 768, 768
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=1),
        helper.make_node("MatMul", ["xd", "wd"], ["p"]),
        helper.make_node("Add", ["p", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "sx"), numpy_helper.from_array(np.array(131, np.uint8), "zx"),
             numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w"),
             numpy_helper.from_array(rng.uniform(0.001, 0.01, n).astype(np.float32), "sw"),
             numpy_helper.from_array(np.zeros(n, np.int8), "zw"), numpy_helper.from_array(rng.uniform(-1, 1, n).astype(np.float32), "b")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])]
    save("gemm_uint8_activation_zero_point", nodes, inputs, outputs, inits, uint8_activation_linear.__doc__)


def dynamic_quantized_linear():
    """Dynamic quantization as onnxruntime's quantize_dynamic writes it: x quantized to uint8 at
    run time (DynamicQuantizeLinear: its scale and zero point from x's range), MatMulInteger with
    the constant int8 weight (symmetric: no zero point), the int32 sums cast to f32 and scaled by
    both scales. Pass fp8-products makes the f64 product the importer writes an int8 product,
    x shifted into int8 and (z - 128) · Σ_k w_k taken off after the sum (z known at run time);
    200 rows, K = 768, N = 512."""
    rng = np.random.default_rng(29)
    m, k, n = 200, 768, 512
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xs", "ws"], ["s"]),
        helper.make_node("Mul", ["accf", "s"], ["y"]),
    ]
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(0.004, np.float32), "ws")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])]
    save("gemm_dynamic_quantized_matmulinteger", nodes, inputs, outputs, inits, dynamic_quantized_linear.__doc__)


if __name__ == "__main__":
    block_scales()
    block_scales(weight_blocks=True)
    quantized_activation(128, 768, "gemm_fp8_e4m3_qdq_linear_128_rows")
    quantized_activation(4096, 768, "gemm_fp8_e4m3_qdq_linear_4096_rows")
    quantized_activation(128, 1001, "gemm_fp8_e4m3_qdq_linear_odd_n")
    linear_xwt()
    constant_weight(E4M3, "e4m3")
    constant_weight(E5M2, "e5m2")
    amax_of_output(1000, 1024, "gemm_fp8_e4m3_amax_of_unstored_output", of_cast=False)
    amax_of_output(333, 1001, "gemm_fp8_e4m3_amax_of_cast_output_odd_n", of_cast=True)
    int8_linear(constant_weight=True)
    int8_linear(constant_weight=False)
    uint8_activation_linear()
    dynamic_quantized_linear()

#!/usr/bin/env python3
"""Writes small f32 linear layers (constant weights) whose shapes are MobileNetV3-small's 1x1
convolutions and squeeze-excitation products, for `tilefuse run --precision high --check` on a
GPU: which shape the TF32 GEMM template gets wrong. Usage: tf32_small_shapes.py DIR"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPES = [(256, 16, 48), (1, 48, 12), (1, 12, 48), (256, 48, 16), (256, 64, 64), (200, 40, 24), (256, 32, 48), (1, 64, 64)]
folder = Path(sys.argv[1])
folder.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
for m, k, n in SHAPES:
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["p"]), helper.make_node("Add", ["p", "b"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / f"linear_m{m}_k{k}_n{n}.onnx")

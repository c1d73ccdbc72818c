#!/usr/bin/env python3
"""Writes ResNet's stem at batch 32 in f32 as ONNX (conv 7x7 stride 2 from 3 channels with bias,
ReLU, 3x3 max pool; weights as initializers), for the stem experiments on a machine with a GPU.

    python3 bench/experiments/stem_model.py OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w = numpy_helper.from_array((rng.standard_normal((64, 3, 7, 7)) * 0.1).astype(np.float32), "w")
bias = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "bias")
nodes = [helper.make_node("Conv", ["x", "w", "bias"], ["c"], kernel_shape=[7, 7], strides=[2, 2], pads=[3, 3, 3, 3]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
graph = helper.make_graph(nodes, "stem32", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 3, 224, 224])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [32, 64, 56, 56])], [w, bias])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])

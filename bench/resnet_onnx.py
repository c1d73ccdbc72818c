#!/usr/bin/env python3
"""Writes a ResNet-18 or ResNet-50 shaped ONNX graph (224x224 input, BatchNorm folded into the
convolutions' biases as torch.onnx's exporter does in eval mode, weights as graph inputs so the file
stays small) in bf16 or f32, for timing compiles without torch or torchvision:

    python3 bench/resnet_onnx.py 50 --batch 32 --dtype bf16 -o /tmp/resnet50_b32_bf16.onnx
    python3 bench/cold_compile.py --bin after=build/tilefuse /tmp/resnet50_b32_bf16.onnx

Needs the onnx package only.
"""
import argparse

import onnx
from onnx import TensorProto, helper


def build(depth, batch, dtype):
    nodes, inputs = [], []

    def value(name, shape):
        inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    count = [0]

    def conv(x, cin, cout, k, stride, relu=True, residual=None):
        count[0] += 1
        i = count[0]
        w, b = value(f"w{i}", [cout, cin, k, k]), value(f"b{i}", [cout])
        y = f"conv{i}"
        nodes.append(helper.make_node("Conv", [x, w, b], [y], kernel_shape=[k, k], strides=[stride] * 2, pads=[k // 2] * 4))
        if residual:
            nodes.append(helper.make_node("Add", [y, residual], [f"add{i}"]))
            y = f"add{i}"
        if relu:
            nodes.append(helper.make_node("Relu", [y], [f"relu{i}"]))
            y = f"relu{i}"
        return y

    y = conv(value("x", [batch, 3, 224, 224]), 3, 64, 7, 2)
    nodes.append(helper.make_node("MaxPool", [y], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    y, cin = "pool", 64
    stages = [(64, 3), (128, 4), (256, 6), (512, 3)] if depth == 50 else [(64, 2), (128, 2), (256, 2), (512, 2)]
    for s, (width, blocks) in enumerate(stages):
        for j in range(blocks):
            stride = 2 if s > 0 and j == 0 else 1
            cout = width * 4 if depth == 50 else width
            shortcut = conv(y, cin, cout, 1, stride, relu=False) if stride != 1 or cin != cout else y
            if depth == 50:  # bottleneck: 1x1, 3x3 (strided), 1x1
                h = conv(conv(y, cin, width, 1, 1), width, width, 3, stride)
                y = conv(h, width, cout, 1, 1, residual=shortcut)
            else:  # basic block: two 3x3
                y = conv(conv(y, cin, width, 3, stride), width, width, 3, 1, residual=shortcut)
            cin = cout
    nodes.append(helper.make_node("GlobalAveragePool", [y], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    nodes.append(helper.make_node("Gemm", ["flat", value("fc_w", [1000, cin]), value("fc_b", [1000])], ["logits"], transB=1))
    graph = helper.make_graph(nodes, f"resnet{depth}", inputs, [helper.make_tensor_value_info("logits", dtype, [batch, 1000])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("depth", type=int, choices=[18, 50])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    dtype = {"bf16": TensorProto.BFLOAT16, "f16": TensorProto.FLOAT16, "f32": TensorProto.FLOAT}[args.dtype]
    onnx.save(build(args.depth, args.batch, dtype), args.output)


if __name__ == "__main__":
    main()

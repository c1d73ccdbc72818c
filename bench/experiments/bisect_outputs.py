#!/usr/bin/env python3
"""Cuts an ONNX model after each node (onnx.utils.Extractor) and runs each cut through
`tilefuse run --check` with the given flags: the first node whose output fails is where a
kernel goes wrong. Usage: bisect_outputs.py TILEFUSE MODEL.onnx DIR [tilefuse run flags...]"""
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import shape_inference, utils

tilefuse, model_path, folder, flags = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
folder.mkdir(parents=True, exist_ok=True)
model = shape_inference.infer_shapes(onnx.load(model_path))
inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
extractor = utils.Extractor(model)
for index, node in enumerate(model.graph.node):
    for output in node.output:
        cut = folder / f"cut{index:03d}.onnx"
        try:
            onnx.save(extractor.extract_model(inputs, [output]), cut)
        except Exception as e:  # noqa: BLE001
            print(f"{index} {node.op_type} {output}: not extracted ({e})")
            continue
        r = subprocess.run([tilefuse, "run", str(cut), "--random", "1", "--check", *flags], capture_output=True, text=True)
        verdict = "PASS" if r.returncode == 0 else "FAIL"
        print(f"{index} {node.op_type} {output}: {verdict}", flush=True)
        if verdict == "FAIL":
            print(r.stdout[-1500:], r.stderr[-800:])
            sys.exit(0)

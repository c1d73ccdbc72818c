#!/usr/bin/env bash
# ResNet's stem in f32 on TF32 (fifty-eighth session, 2026-12-07). Its weight [147][64] (K = 3·7·7
# unaligned) was padded by a concat of zeros, a computed B the TF32 template refused (it reads B
# K-major only), so the stem ran as its im2col prologue, cuBLASLt and two pointwise kernels:
# ResNet-50 f32 at batch 32, kernel by kernel, 298 + 112 + 62 + 47 µs (H200) against
# torch.compile's 274 for the whole stem. Now the padded weight is a constant stored K-major.
#   1. the stem graphs and the f32 convolution graphs of tests/conv --check under --precision high
#   2. a batch-32 stem (conv with bias, ReLU, max pool; weights as initializers): tilefuse bench
#   3. graph_profile.py with programmatic launches off (kernels' own durations): RUNS
# Usage: bash bench/experiments/stem_tf32.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle stem-tf32.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
python3 - "$OUT/stem32.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
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
PY
check_forms "$OUT/stem32.onnx" "--precision high" "--precision high --gemm-form tail" ""
for m in tests/conv/stem_maxpool_f32.onnxtxt tests/conv/residual_block_f32.onnxtxt tests/conv/conv_bn_relu_f32.onnxtxt tests/conv/layout_edges_ragged_f32.onnxtxt; do
  check_forms "$m" "--precision high"
done
memcheck "$OUT/stem32.onnx" --precision high
for p in high highest; do
  echo "stem32 --precision $p: $("$B/tilefuse" bench "$OUT/stem32.onnx" --backend cuda --precision $p --repeats 20 --warmup 5 --json 2>&1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.1f} us;\", '; '.join(g['strategy'] for g in d['groups']))" 2>&1 | tail -1)" | tee -a "$log"
done
RUNS=${RUNS:-"resnet50:f32:32"} TILEFUSE_PDL=0 TAG=nopdl LIMIT=${LIMIT:-150} OUT=$OUT PROFILE_ARGS=${PROFILE_ARGS:---peer} \
  bash "$(dirname "$0")/graph_profile.sh" > "$OUT/profiles.txt" 2>&1
grep "^==" "$OUT/profiles.txt" | tee -a "$log"

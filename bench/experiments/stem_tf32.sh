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
python3 "$(dirname "$0")/stem_model.py" "$OUT/stem32.onnx"
check_forms "$OUT/stem32.onnx" "--precision high" "--precision high --gemm-form tail" ""
for m in tests/conv/stem_maxpool_f32.onnxtxt tests/conv/residual_block_f32.onnxtxt tests/conv/conv_bn_relu_f32.onnxtxt tests/conv/layout_edges_ragged_f32.onnxtxt; do
  check_forms "$m" "--precision high"
done
memcheck "$OUT/stem32.onnx" --precision high
for p in high highest; do
  echo "stem32 --precision $p: $(bench_forms "$OUT/stem32.onnx" "--precision $p")" | tee -a "$log"
done
RUNS=${RUNS:-"resnet50:f32:32"} TILEFUSE_PDL=0 TAG=nopdl LIMIT=${LIMIT:-150} OUT=$OUT PROFILE_ARGS=${PROFILE_ARGS:---peer} \
  bash "$(dirname "$0")/graph_profile.sh" > "$OUT/profiles.txt" 2>&1
grep "^==" "$OUT/profiles.txt" | tee -a "$log"

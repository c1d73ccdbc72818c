#!/usr/bin/env bash
# The im2col prologue of ResNet's stem (fifty-eighth session, 2026-12-07): 311 µs of ResNet-50
# bf16's 1341 at batch 32 (H200, programmatic launches off), 298 µs in f32. Its output rows
# are K = 147 padded to 148 (f32) or 152 (bf16) by a zero column: a concat the vector loop could
# not branch on (the cut at 147 inside a vector), so every element computed its row's
# decomposition and tested its part: 108 instructions an element (SASS, f32). Now a vector
# holding the cut is a part of its own, and the period (148) takes vectors of 4: 52. Expected:
# the prologue about twice as fast (~150 µs), ResNet-50 at batch 32 ~150 µs faster in both types.
#   1. the stem graphs, the conv graphs and the rotary graphs (the concat-part form) --check
#   2. the stem at batch 32 alone in f32 (TF32 and exact) and the GEMM's forms
#   3. graph_profile.py (programmatic launches on) for RUNS, peers in the same process
# Usage: bash bench/experiments/stem_prologue.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle stem-prologue.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
check_forms tests/gemm/gemm_conv_stem_constant_weight_f32.onnxtxt "" "--precision high" "--precision high --gemm-form tail"
for m in tests/conv/stem_maxpool_f32.onnxtxt tests/conv/resnet_downsample_bf16.onnxtxt tests/conv/residual_block_bf16.onnxtxt \
         tests/conv/conv_bias_relu_stride2_bf16.onnxtxt tests/gemm/gemm_rotary_qk_attention_ragged_bf16.onnxtxt; do
  check_forms "$m" ""
done
memcheck tests/gemm/gemm_conv_stem_constant_weight_f32.onnxtxt --precision high
stem=$(mktemp -d)/stem32.onnx
python3 "$(dirname "$0")/stem_model.py" "$stem"
check_forms "$stem" "--precision high"
for flags in "--precision high" "--precision high --gemm-form tail" "--precision high --gemm-form overlap" "--precision high --gemm library" "--precision highest"; do
  echo "stem32 $flags: $(bench_forms "$stem" "$flags")" | tee -a "$log"
done
RUNS=${RUNS:-"resnet50:bf16:32 resnet50:f32:32"} LIMIT=${LIMIT:-150} OUT=$OUT PROFILE_ARGS=${PROFILE_ARGS:---peer} \
  bash "$(dirname "$0")/graph_profile.sh" > "$OUT/profiles.txt" 2>&1
grep -E "^== |prologue" "$OUT/profiles.txt" | tee -a "$log"

#!/usr/bin/env bash
# The tile edges of unaligned rows (GPT-2's 50257-word logits) written a lane an edge as at most
# four aligned stores of 2, 4 or 8 bytes, where they went element by element over eight passes
# (gemm_sm90_epilogue.cuh: GemmEdgeColumns, GemmStoreEdge; 2026-12-07, fifty-fifth session). Why:
# the stall profile of the bf16 LM head (4096x50257x768, H100) put ~11% of its warps' samples
# in the edges, and the FP8 head's store path 40%. Expected: the bf16 head 606 -> ~560-575 µs on
# an H100, the FP8 head (input scales) 659 -> ~630. On a machine with a GPU:
#   1. DeviceEdgeStoreTest: every lead, valid count and edge against the host's columns
#   2. unaligned_rows.sh: the unaligned-vocabulary and weight-gradient graphs in the template's
#      forms against the reference and under memcheck, then bench/lm_head.py against PyTorch
#   3. the FP8 and bf16 heads of bench/cases/fp8 timed (tilefuse bench)
# Usage: bash bench/experiments/edge_stores.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle edge-stores.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
GTEST='DeviceEdgeStore*' gtest_first
bash "$(dirname "$0")/unaligned_rows.sh" "$B" "$OUT"
for model in gemm_bf16 gemm_e4m3; do
  echo "$model LM head: $(bench_us "bench/cases/fp8/${model}_4096x50257x768.onnx")" | tee -a "$log"
done

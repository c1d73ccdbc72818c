#!/usr/bin/env bash
# What the amax in the epilogue costs (2026-12-07, fifty-sixth session): its first GPU run put
# the 8192^3 e4m3 product quantized with its amax at 887 µs against 809 without the amax, in
# separate processes (+9.6%), where the kernels' main loops are the same SASS and the amax adds
# ~300 instructions a tile (~1% expected). Here the two interleaved, three times each, after the
# amax's running max became one FMNMX.NAN an element (max.NaN, |u| as its operand's modifier),
# and GpuAmaxTest again for that form.
# Usage: bash bench/experiments/amax_cost.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle amax-cost.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for round in 1 2 3; do
  for kind in quantized amax; do
    echo "round $round $kind 8192^3: $(bench_us "bench/cases/fp8/gemm_e4m3_${kind}_8192.onnx")" | tee -a "$log"
  done
done
GTEST='GpuAmax*' gtest_first

#!/usr/bin/env bash
# Issue 50: the amax of a product's output computed in its epilogue (codegen/gemm_amax.h,
# FoldAmaxesIntoProducts; 2026-12-07, fifty-sixth session). Each consumer thread keeps the bits
# of its largest |u|, a warp's largest goes into scratch memory by an atomic max, and the grid's
# last warp writes the amax and zeroes the words. Before: ReduceMax(Abs(u)) ran as a reduction
# kernel of its own reading u back (with the product's scales and quantization, where the planner
# grouped them there), u written in f32 only for it. Expected at 8192^3 e4m3 with its output
# quantized: the amax costs ~nothing over the quantized product alone (~745 µs on an H100), where
# its own kernel adds the f32 y's write and read (2 x 256 MB, ~0.16 ms at ~3.3 TB/s).
#   1. GpuAmaxTest: three runs of one compiled model against the reference (the words' reset)
#   2. the CI graphs with an amax (tests/gemm/*amax*) against the reference in the template's
#      forms, the fold switched off for comparison, compute-sanitizer's memcheck, a tuned run
#   3. bench/fp8_gemm.py --parts amax: in the epilogue, its own kernel, no amax, PyTorch's
# Usage: bash bench/experiments/amax_epilogue.sh BUNDLE_DIR OUT_DIR   (STAGES="checks time")
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-checks time}
source "$(dirname "$0")/template_checks.sh"
open_bundle amax-epilogue.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [[ " $STAGES " == *" checks "* ]]; then
  GTEST='GpuAmax*' gtest_first
  for m in tests/gemm/*amax*; do
    check_forms "$m" "" "--gemm-form tail" "--gemm-form overlap" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-cluster 2"
  done
  TILEFUSE_AMAX_IN_EPILOGUE=0 check_forms tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt ""
  for m in tests/gemm/*amax*; do memcheck "$m"; done
  memcheck tests/gemm/gemm_fp8_e4m3_amax_of_cast_output_odd_n.onnx --gemm-form overlap
  memcheck tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt --gemm-form pingpong
  if o=$(TILEFUSE_CACHE_DIR=/tmp/tfc-amax-tune timeout 300 "$B/tilefuse" run tests/gemm/gemm_splitk_tanh_amax_bf16.onnxtxt --backend cuda --check --tune 2>&1); then
    echo "PASS tuned (every variant launched many times on one scratch memory), then checked" | tee -a "$log"
  else
    echo "FAIL tuned run" | tee -a "$log"; echo "$o" | tail -12 | tee -a "$log"
  fi
fi
if [[ " $STAGES " == *" time "* ]]; then
  timeout 400 python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --parts amax --sizes 8192,4096 --json "$OUT/amax.json" 2>&1 | tail -8 | tee -a "$log"
fi

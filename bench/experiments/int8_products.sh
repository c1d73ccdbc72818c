#!/usr/bin/env bash
# Issue 50: symmetric int8 products on the int8 tensor cores (2026-12-07, fifty-sixth session).
# DequantizeLinear of int8 values with zero points 0 on both operands of a product becomes one
# int8 product (passes/fp8_products: the exact int32 sums rounded to f32, the scales in the
# epilogue), wgmma .s32.s8.s8 into int32 accumulators that the epilogue reads as f32 values (no
# promotion: the sums are exact). Before: such a product computed dequantized, in f32 (3xTF32).
# Expected at 8192^3: near FP8 with the tensor cores' own accumulation (the same rate, no
# promotion: ~705 µs on an H100), ahead of torch._int_mm.
#   1. the int8 CI graphs (tests/gemm/gemm_int8_*) against the reference in the template's
#      forms, compute-sanitizer's memcheck
#   2. bench/fp8_gemm.py --parts int8: tilefuse's int8, e4m3 and bf16 products, torch._int_mm
# Usage: bash bench/experiments/int8_products.sh BUNDLE_DIR OUT_DIR   (STAGES="checks time")
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-checks time}
source "$(dirname "$0")/template_checks.sh"
open_bundle int8-products.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [[ " $STAGES " == *" checks "* ]]; then
  for m in tests/gemm/gemm_int8_*.onnx; do
    check_forms "$m" "" "--gemm-form tail" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-cluster 2"
    memcheck "$m"
  done
fi
if [[ " $STAGES " == *" time "* ]]; then
  timeout 400 python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --parts int8 --sizes 8192,4096 --json "$OUT/int8.json" 2>&1 | tail -6 | tee -a "$log"
fi

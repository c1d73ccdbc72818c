#!/usr/bin/env bash
# uint8 activations with a zero point (onnxruntime's default QDQ quantization: QUInt8
# activations, QInt8 symmetric weights) on the int8 tensor cores (fifty-seventh session,
# 2026-12-07). passes/fp8_products shifts A into int8 (q - 128, exact) and takes
# (z - 128) · Σ_k b_k off after the int32 sum; before, such a product computed dequantized in f32
# (3xTF32). Expected at 8192³ with w an input (its row sums a reduction kernel of 64 MB, x's shift
# a pointwise kernel of 64 MB + 64 MB): the int8 product's 660 µs plus ~60 µs, about 2x bf16.
#   1. tests/gemm/gemm_uint8_activation_zero_point.onnx (x quantized to uint8 in the graph, a
#      constant weight) in the template's forms, bench/cases/fp8/gemm_u8_4096.onnx, memcheck
#   2. bench/fp8_gemm.py --parts int8: the uint8 product beside int8, e4m3, bf16, torch._int_mm
#   The dynamic quantization's graph (DynamicQuantizeLinear + MatMulInteger) is checked too.
# Usage: bash bench/experiments/uint8_activations.sh BUNDLE_DIR OUT_DIR   (STAGES="checks quick time")
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-checks time}
source "$(dirname "$0")/template_checks.sh"
open_bundle uint8-activations.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [[ " $STAGES " == *" checks "* ]]; then
  check_forms tests/gemm/gemm_uint8_activation_zero_point.onnx "" "--gemm-form tail" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-cluster 2"
  check_forms bench/cases/fp8/gemm_u8_4096.onnx ""
  check_forms tests/gemm/gemm_dynamic_quantized_matmulinteger.onnx "" "--gemm-form streamk"
  check_forms tests/gemm/gemm_int8_constant_weight_per_column.onnx ""
  memcheck tests/gemm/gemm_uint8_activation_zero_point.onnx
  memcheck tests/gemm/gemm_dynamic_quantized_matmulinteger.onnx
fi
if [[ " $STAGES " == *" quick "* ]]; then  # tilefuse alone, the uint8 product beside the int8 one
  for n in 8192 4096; do
    for kind in u8 i8; do echo "$kind $n^3: $(bench_us "bench/cases/fp8/gemm_${kind}_$n.onnx")" | tee -a "$log"; done
  done
fi
if [[ " $STAGES " == *" time "* ]]; then
  timeout 300 python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --parts int8 --sizes 8192,4096 --json "$OUT/int8.json" 2>&1 | tail -8 | tee -a "$log"
fi

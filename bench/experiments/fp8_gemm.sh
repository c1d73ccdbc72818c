#!/usr/bin/env bash
# FP8 products on a machine with a GPU (issue 50): the quantized GEMM graphs of tests/gemm
# checked against the reference in every form the template runs them in (promoted sums, the
# tensor cores' own accumulation under --precision high, ping-pong and cooperative consumers),
# then compute-sanitizer; then bench/fp8_gemm.py against torch._scaled_mm and bf16.
#
#   bench/experiments/fp8_gemm.sh BUNDLE OUT   (BUNDLE build-gpu/bundle: unpacked from
#                                               build-gpu/bundle.tar.xz where it is not yet)
set -u
B=$1 OUT=$2
[ -x "$B/tilefuse" ] || tar -C "$(dirname "$B")" -xJf "$(dirname "$B")/bundle.tar.xz"
export LD_LIBRARY_PATH="$(realpath "$B")/lib:${LD_LIBRARY_PATH:-}"
source "$(dirname "$0")/template_checks.sh"
mkdir -p "$OUT"
log="$OUT/fp8-gemm.log"
: >"$log"
for m in tests/gemm/gemm_fp8_*.onnx; do
  check_forms "$m" "" "--precision high" "--gemm-form pingpong" "--gemm-form tail --precision high" "--gemm-form streamk"
  memcheck "$m"
done
# Block scales on the template: every form, clusters sharing B too.
check_forms tests/gemm/gemm_fp8_e4m3_block_scales.onnx "" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-form tail" "--gemm-cluster 2"
memcheck tests/gemm/gemm_fp8_e4m3_block_scales.onnx
python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --json "$OUT/fp8-gemm.json" 2>&1 | tail -20 | tee -a "$log"

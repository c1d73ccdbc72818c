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
source "$(dirname "$0")/template_checks.sh"
open_bundle fp8-gemm.log
# (The rule keeps FP8 epilogues in the tail; tail and overlap name both forms outright.)
for m in tests/gemm/gemm_fp8_*.onnx; do
  check_forms "$m" "" "--gemm-form tail" "--precision high" "--gemm-form overlap --precision high" "--gemm-form pingpong" \
    "--gemm-form tail --precision high" "--gemm-form streamk"
  memcheck "$m"
done
# Single models beside the bench (FP8_EXTRA: "MODEL|FLAGS" pairs): timed in the forms given.
for case in ${FP8_EXTRA:-}; do
  m=${case%%|*} flags=${case#*|}
  { echo "== $m ${flags//,/ }"; "$B/tilefuse" bench "$m" --backend cuda --repeats 30 --warmup 5 ${flags//,/ } 2>&1 | tail -6; } | tee -a "$log"
done
# Block scales on the template: every form, clusters sharing B too.
check_forms tests/gemm/gemm_fp8_e4m3_block_scales.onnx "" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-form tail" "--gemm-cluster 2"
memcheck tests/gemm/gemm_fp8_e4m3_block_scales.onnx
python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --json "$OUT/fp8-gemm.json" 2>&1 | tail -20 | tee -a "$log"

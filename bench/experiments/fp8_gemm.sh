#!/usr/bin/env bash
# FP8 products on a machine with a GPU (issue 50): the quantized GEMM graphs of tests/gemm
# checked against the reference in every form the template runs them in (promoted sums, the
# tensor cores' own accumulation under --precision high, ping-pong and cooperative consumers),
# then compute-sanitizer; then bench/fp8_gemm.py against torch._scaled_mm and bf16.
#
#   bench/experiments/fp8_gemm.sh BUNDLE OUT
set -u
B=$1 OUT=$2
mkdir -p "$OUT"
log="$OUT/fp8-gemm.log"
: >"$log"
for m in tests/gemm/gemm_fp8_*.onnx; do
  for form in "" "--precision high" "--gemm-form pingpong" "--gemm-form tail --precision high"; do
    if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check --gemm template $form 2>&1); then
      echo "PASS $m $form: $(echo "$o" | grep -o 'gemm template [^;]*' | head -1)" | tee -a "$log"
      echo "$o" | grep -iE "error|tolerance|worst" | head -4 | tee -a "$log"
    else
      echo "FAIL $m $form" | tee -a "$log"; echo "$o" | tail -14 | tee -a "$log"
    fi
  done
  if o=$(timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda --gemm template 2>&1); then
    echo "CLEAN $m" | tee -a "$log"
  else
    echo "MEMCHECK FAIL $m" | tee -a "$log"; echo "$o" | grep -v '^=========  ' | tail -15 | tee -a "$log"
  fi
done
python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --json "$OUT/fp8-gemm.json" 2>&1 | tail -20 | tee -a "$log"

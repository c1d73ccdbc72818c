#!/usr/bin/env bash
# On a machine with a GPU, the quick form of scripts/gpu-check.sh's template stages: every
# graph of tests/gemm, tests/conv and tests/attention and the benchmark cases' check twins,
# run by the templates in their forms (GEMM: the rule's, the epilogue in the tail, ping-pong,
# clusters of two; attention: its three loops; depthwise on and off) and checked against the
# f64 reference with poisoned outputs; memcheck on one graph of each template. Binary:
# $B/tilefuse (default build-gpu/bundle). Writes $OUT/template-check.log; exits 1 on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tilefuse-gpu-out}
B=${B:-build-gpu/bundle}
mkdir -p "$OUT"
log="$OUT/template-check.log"
: >"$log"
failures=0
memcheck() {
  if out=$(timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$@" --backend cuda 2>&1); then echo "CLEAN $*" >>"$log"
  else echo "MEMCHECK FAIL $*" | tee -a "$log"; echo "$out" | grep -v '^=========  ' | tail -8 | tee -a "$log"; failures=$((failures + 1)); fi
}
# The checks, one a line, run 8 at a time (small graphs: the reference and NVRTC's compiles
# are the time, not the GPU).
jobs="$OUT/template-check.jobs"
: >"$jobs"
for m in tests/gemm/*.onnxtxt tests/gemm/*.onnx bench/cases/check/gemm_*.onnxtxt bench/cases/check/mlp_block*.onnxtxt; do
  for form in rule tail pingpong streamk; do echo "$m --gemm template --gemm-form $form" >>"$jobs"; done
  echo "$m --gemm template --gemm-cluster 2" >>"$jobs"
done
for m in tests/conv/*.onnxtxt; do
  for depthwise in on off 8x2; do echo "$m --gemm template --depthwise $depthwise" >>"$jobs"; done
done
for m in tests/attention/*.onnxtxt $(ls bench/cases/check/*.onnxtxt | grep -E 'attention|gpt_block'); do
  for loop in template overlap serial; do echo "$m --attention $loop" >>"$jobs"; done
done
export B
xargs -P 8 -L 1 -a "$jobs" sh -c 'if o=$(timeout 200 "$B/tilefuse" run "$@" --backend cuda --check 2>&1); then echo "PASS $*"; else echo "FAIL $*"; echo "$o" | tail -6; fi' check \
  >>"$log" 2>&1
passes=$(grep -c '^PASS ' "$log")
failures=$(grep -c '^FAIL ' "$log")
grep -A6 '^FAIL ' "$log"
memcheck tests/gemm/gemm_residual_many_tiles_bf16.onnxtxt --gemm template
memcheck tests/gemm/gemm_splitk_ragged_tanh_residual_bf16.onnxtxt --gemm template --gemm-cluster 2
memcheck tests/conv/convnext_dw_bf16.onnxtxt --gemm template
memcheck tests/attention/attention_causal_d128_bf16.onnxtxt
echo "template checks: $passes passed, $failures failed" | tee -a "$log"
exit $((failures > 0))

#!/usr/bin/env bash
# The decode step's layer norms computed in the skinny products that read them, with the norm's
# row, scale and bias held in registers (one memory round trip: gemm_skinny_sm90.cuh's
# SkinnyNormedA), against their own kernels; and the step's host path after call_checked reads
# only the pointers that changed. On a GPU:
#   1. every skinny graph with a norm against the f64 reference and under memcheck, norms in the
#      products (cluster form, the default), and the one-row graph in the cluster form;
#   2. the clusters the rule counts on against those the driver says are resident;
#   3. GPT-2's decode step (decode_host_time_probe.py, timeline) with TILEFUSE_SKINNY_NORMS=0 and =1.
# Usage: bash bench/experiments/decode_norms.sh BUNDLE_DIR OUT_DIR   (PROBE=0 skips step 3;
# MODEL=llama probes TinyLlama's shape instead)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle decode_norms.log
for m in tests/gemm/gemm_skinny_layer_norm_*.onnxtxt tests/gemm/gemm_skinny_rms_norm_*.onnxtxt; do
  TILEFUSE_SKINNY_NORMS=1 check_forms "$m" ""
  TILEFUSE_SKINNY_NORMS=1 memcheck "$m"
done
check_forms tests/gemm/gemm_skinny_one_row_bf16.onnxtxt ""
memcheck tests/gemm/gemm_skinny_one_row_bf16.onnxtxt
"$B/tilefuse_tests" --gtest_filter='SkinnyClustersTest.TheRules*' 2>&1 | grep -E "OK \]|FAILED|Failure|Expected|Which" | tee -a "$log"
[ "${PROBE:-1}" = 1 ] || exit 0
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for norms in ${NORMS:-0 1}; do
  echo "== ${MODEL:-gpt2}'s decode step, TILEFUSE_SKINNY_NORMS=$norms" | tee -a "$log"
  TILEFUSE_SKINNY_NORMS=$norms HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 200 python3 bench/experiments/decode_host_time_probe.py \
    --model "${MODEL:-gpt2}" --steps 32 --timeline >"$OUT/timeline-${MODEL:-gpt2}-norms$norms.log" 2>&1
  grep -E "^(generation|  the step|the step|its kernels|timeline)" -A14 "$OUT/timeline-${MODEL:-gpt2}-norms$norms.log" | head -44 | tee -a "$log"
done

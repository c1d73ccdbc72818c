#!/usr/bin/env bash
# The skinny products' split-K summed in a cluster (the default; TILEFUSE_SKINNY_CLUSTERS=0 puts it
# through scratch memory) on a GPU: every skinny test graph against the f64 reference and under
# memcheck in that form (the norms in the products too), the clusters the rule counts on against
# those the driver says are resident, the products timed both ways, and GPT-2's decode step on
# the device's timeline both ways (bench/results/2026-12-05-h200-skinny-clusters.md).
# Usage: bash bench/experiments/skinny_clusters.sh BUNDLE_DIR OUT_DIR   (TIMELINE=0 skips the timelines)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle skinny_clusters.log
"$B/tilefuse_tests" --gtest_filter='SkinnyClusters*:CudaSkinny*' 2>&1 | grep -E "clusters of|OK \]|FAILED|Failure|Expected|Which" | tee -a "$log"
for m in tests/gemm/gemm_skinny_*.onnxtxt; do
  TILEFUSE_SKINNY_CLUSTERS=1 check_forms "$m" ""
  TILEFUSE_SKINNY_CLUSTERS=1 memcheck "$m"
done
for m in tests/gemm/gemm_skinny_layer_norm_*.onnxtxt tests/gemm/gemm_skinny_rms_norm_*.onnxtxt; do
  TILEFUSE_SKINNY_NORMS=1 TILEFUSE_SKINNY_CLUSTERS=1 check_forms "$m" ""
done
for m in tests/gemm/gemm_skinny_gpt2_mlp_decode_bf16.onnxtxt tests/gemm/gemm_skinny_bias_bf16.onnxtxt tests/gemm/gemm_skinny_one_row_bf16.onnxtxt; do
  for clusters in 0 1; do
    { echo "== $m, TILEFUSE_SKINNY_CLUSTERS=$clusters"; TILEFUSE_SKINNY_CLUSTERS=$clusters "$B/tilefuse" bench "$m" --backend cuda --repeats 100 --warmup 20 2>&1 |
        grep -E '^(fused|unfused) '; } | tee -a "$log"
  done
done
[ "${TIMELINE:-1}" = 1 ] || exit 0
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for clusters in 0 1; do
  echo "== GPT-2's decode step, TILEFUSE_SKINNY_CLUSTERS=$clusters" | tee -a "$log"
  TILEFUSE_SKINNY_CLUSTERS=$clusters HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 200 python3 bench/experiments/decode_host_time_probe.py \
    --steps 32 --timeline >"$OUT/timeline-$clusters.log" 2>&1
  grep -E "^(generation|the step|its kernels|timeline)" -A14 "$OUT/timeline-$clusters.log" | head -40 | tee -a "$log"
done

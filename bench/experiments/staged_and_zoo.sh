#!/usr/bin/env bash
# One call on a machine with a GPU (sixtieth session), carrying build-gpu/bundle.tar.xz: the staged
# f32 store's checks and A/B (tf32_staged_store.sh), the LLaMA-style model at 1x128 kernel by
# kernel beside torch.compile's (issue 45's bar there: 1.5x, measured 1.43x), the small stems'
# checks (SKIP_STAGED=1 SKIP_PROFILE=1 leave the first two out), then the first zoo
# rows (bench/zoo.py; by default ResNet-50 at batch 32, bf16 and f32 with TF32, channels-last),
# cut at ZOO_LIMIT seconds (rows finished by then are in zoo.json).
# Usage: bash bench/experiments/staged_and_zoo.sh OUT_DIR [ZOO_ARGS...]
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?output folder}
shift
ZOO_ARGS=("$@")
[ ${#ZOO_ARGS[@]} -gt 0 ] || ZOO_ARGS=(--models resnet50 --shapes 32)
SKIP_STAGED=${SKIP_STAGED:-0}
[ "$SKIP_STAGED" = 1 ] || bash bench/experiments/tf32_staged_store.sh "$OUT/staged"
B=build-gpu/bundle
X=/tmp/tilefuse-python
source bench/experiments/template_checks.sh
open_bundle zoo.log
export HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tilefuse-cache}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
# Stems of 3 channels, their im2col padded whatever the product's size (passes/pad_gemm_depth.h):
# the GEMM template in every form against the reference, and under memcheck.
check_forms tests/conv/stem_small_k_bf16.onnxtxt "" "--gemm-form pingpong" "--gemm-form tail"
check_forms tests/conv/stem_small_k_f32.onnxtxt "" "--precision high"
check_forms tests/conv/stem_maxpool_f32.onnxtxt "" "--precision high"
memcheck tests/conv/stem_small_k_bf16.onnxtxt
memcheck tests/conv/stem_small_k_f32.onnxtxt --precision high
[ "${SKIP_PROFILE:-0}" = 1 ] || {
  PYTHONPATH="$X" timeout 150 python3 bench/experiments/graph_profile.py --model llama --shape 1x128 --peer --top 30 --first 40 \
    > "$OUT/llama-1x128-profile.txt" 2>&1
  echo "== llama 1x128 profile: exit $?" | tee -a "$log"
  grep -E "^== " "$OUT/llama-1x128-profile.txt" | tee -a "$log"
  # Programmatic launches off: each kernel's own duration (with them on, a kernel's includes its wait).
  TILEFUSE_PDL=0 PYTHONPATH="$X" timeout 90 python3 bench/experiments/graph_profile.py --model llama --shape 1x128 --top 30 --first 40 \
    > "$OUT/llama-1x128-profile-nopdl.txt" 2>&1
  echo "== llama 1x128 profile, programmatic launches off: exit $?" | tee -a "$log"
  grep -E "^== " "$OUT/llama-1x128-profile-nopdl.txt" | tee -a "$log"
}
PYTHONPATH="$X" timeout ${ZOO_LIMIT:-330} python3 bench/zoo.py --json "$OUT/zoo.json" --markdown "$OUT/zoo.md" \
  --row-timeout 200 "${ZOO_ARGS[@]}" 2>&1 | tee "$OUT/zoo-run.log" | grep -E "^(==|\|)" | tee -a "$log"

#!/usr/bin/env bash
# The decode step's kernels on a GPU after a change to them: the decode-form attention and skinny
# product graphs against the reference and under memcheck, a symbolic CUDA fuzz, the step's
# device timeline (bench/experiments/decode_host_time_probe.py --timeline), then GPT-2's greedy
# decoding against eager and torch.compile (bench/decode.py through decode.sh, skinny norms on
# and off).
# Usage: bash bench/experiments/decode_step_check.sh BUNDLE_DIR OUT_DIR   (MODES=..., FUZZ_COUNT=30,
#        DECODE=0 skips the end-to-end decoding)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle checks.log
# ptxas's report as NVRTC gives it on this machine (StagedCopiesTest found it empty here).
"$B/tilefuse" compile tests/gemm/gemm_skinny_one_row_bf16.onnxtxt --backend cuda 2>&1 | grep -E "registers|spills|NVRTC" | head -4 | tee -a "$log"
for m in tests/attention/attention_decode_*.onnxtxt tests/gemm/gemm_skinny_*.onnxtxt; do
  check_forms "$m" ""
  memcheck "$m"
done
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 "$B/tilefuse" fuzz --symbolic --backend cuda --seed 0 --count "${FUZZ_COUNT:-30}" 2>&1 |
  grep -E "^(mismatch|error|fuzz):" | tee -a "$log"
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 150 python3 bench/experiments/decode_host_time_probe.py --steps 32 --timeline >"$OUT/timeline.log" 2>&1
grep -E "^(generation|the step|timeline)" -A12 "$OUT/timeline.log" | head -30 | tee -a "$log"
[ "${DECODE:-1}" = 1 ] || exit 0
NORMS=1 FUZZ=0 CHECKS=0 MODELS=gpt2 MODES=${MODES:-tilefuse,eager-static,compile} ARGS="--repeats 2" LIMIT=150 \
  timeout 300 bash bench/experiments/decode.sh "$B" "$OUT/decode" 2>&1 | grep -E "ms a token|ratio|failed" | tee -a "$log"

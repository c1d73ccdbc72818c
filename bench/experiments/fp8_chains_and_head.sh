#!/usr/bin/env bash
# Issue 50 on a GPU, two changes of 2026-12-07 and one question:
#   blocks: block-scaled FP8 steps read their scales once (as the first half is added) and hand
#           their slot back as an unscaled step does; B's scales shared by the tile take chains
#           of 4 at 192 columns (they took 2). fp8_weight_blocks.sh whole: the CI graph in the
#           template's forms against the f64 reference, memcheck, 4096^3 and 8192^3 beside the
#           per-column block scales, per-tensor FP8 and tilefuse's bf16. Expected: 8192^3 with
#           weight blocks 1069 -> ~900 µs (per-tensor, chains of 4: 822), 1.28x -> >= 1.4x bf16.
#   head:   GPT-2's LM head (4096 x 50257 x 768, bf16 logits in unaligned rows, stored by the
#           threads) in FP8 in each form: the rule's tail epilogue measured 567 µs in GPT-2,
#           where bf16's overlapped epilogue takes 561; the FP8 main loop is half as long, so the
#           tail's store is exposed. Expected: the overlapped form (--gemm-form overlap, 128x128
#           tiles, f32 sums held) well below 567 µs; if so, it becomes the rule for such products.
# Measured (H100, 2026-12-07, bench/results/2026-12-07-h100-fp8-chains-and-head.md): all checks
# pass; 8192^3 1026 µs, 1.33x bf16; the LM head overlapped 792 µs against the tail's 665 (kept).
#   (and the per-column block scales' CI graph in its forms and under memcheck: its path changed too)
# Usage: bash bench/experiments/fp8_chains_and_head.sh BUNDLE_DIR OUT_DIR   (STAGES="blocks head")
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-blocks head}
source "$(dirname "$0")/template_checks.sh"
open_bundle fp8-head.log
if [[ " $STAGES " == *" blocks "* ]]; then
  bash "$(dirname "$0")/fp8_weight_blocks.sh" "$B" "$OUT"
  m=tests/gemm/gemm_fp8_e4m3_block_scales.onnx  # the per-column block scales, whose slot is still held
  check_forms "$m" "" "--gemm-form streamk" "--gemm-form pingpong"
  for bn in 128 192; do TILEFUSE_GEMM_BLOCK_N=$bn check_forms "$m" "--gemm-form tail"; done
  memcheck "$m"
fi
if [[ " $STAGES " == *" head "* ]]; then
  for run in "gemm_e4m3:" "gemm_e4m3:--gemm-form overlap" "gemm_e4m3:--gemm-form pingpong" "gemm_e4m3:--gemm-form tail" \
             "gemm_e4m3:--precision high" "gemm_e4m3:--precision high --gemm-form overlap" "gemm_bf16:"; do
    model=${run%%:*} flags=${run#*:}
    r=$("$B/tilefuse" bench "bench/cases/fp8/${model}_4096x50257x768.onnx" --backend cuda --repeats 20 --warmup 5 $flags --json 2>&1)
    echo "$model LM head (${flags:-the rule}): $(echo "$r" | python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.1f} us\", d['groups'][0]['strategy'])" 2>&1 | tail -1)" | tee -a "$log"
  done
  check_forms tests/gemm/gemm_fp8_e4m3_qdq_linear_odd_n.onnx "--gemm-form overlap"
fi

#!/usr/bin/env bash
# Issue 50 on a GPU, the change of 2026-12-07 (fifty-fifth session): promoted FP8 sums added into
# accumulators cleared at a unit's start (one FMA or add an element, where the unit's first-step
# flag made a predicated pair or a select an element), and B's block scales over two runs (192
# columns, runs of 128) chosen once a step per zone of the tile's columns, not by a select per
# column group. The main loop's SASS for sm_90a (128x192 tiles, chains of 4): weight blocks 323
# -> 205 instructions a step, per tensor 221 -> 197, where the tensor cores take ~768 cycles a
# step and each scheduler issues for two consumer warps. Expected: 8192^3 with weight blocks
# 1026 µs -> ~850 (per tensor's 814 on the H100: >= 1.4x bf16); per tensor a few % faster.
# Measured (H100, 2026-12-07, bench/results/2026-12-07-h100-fp8-promote-fma.md): every check
# passes, memcheck clean; weight blocks 880 µs (1.54x bf16), per tensor 760 (1.02x torch._scaled_mm
# in a later call), the peers stage cut by its 300 s limit before the MLP blocks.
#   1. the weight-block CI graph against the reference by the rule and at 192 columns; 8192^3
#      and 4096^3 timed in fp8_weight_blocks.sh's cases
#   2. bench/fp8_gemm.py: per tensor against torch._scaled_mm, GPT-2's shapes, its LM head, the MLP
#   3. every FP8 CI graph in the template's forms, the 3xTF32 graphs (whole steps, the same
#      promotion) by the rule, memcheck
# Usage: bash bench/experiments/fp8_promote_fma.sh BUNDLE_DIR OUT_DIR   (STAGES="time peers checks")
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-time peers checks}
source "$(dirname "$0")/template_checks.sh"
open_bundle fp8-promote.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
if [[ " $STAGES " == *" time "* ]]; then
  m=tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx
  check_forms "$m" ""
  TILEFUSE_GEMM_BLOCK_N=192 check_forms "$m" "--gemm-form tail"
  for n in 8192 4096; do
    for run in gemm_e4m3_weight_blocks:0 gemm_e4m3_weight_blocks:128 gemm_e4m3_blocks:0 gemm_e4m3:0 gemm_bf16:0; do
      model=${run%:*} bn=${run#*:}
      r=$(TILEFUSE_GEMM_BLOCK_N=$bn "$B/tilefuse" bench "bench/cases/fp8/${model}_$n.onnx" --backend cuda --repeats 20 --warmup 5 --json 2>&1)
      echo "$model $n (block_n ${bn/#0/by the rule}): $(echo "$r" | python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.0f} us\", d['groups'][0]['strategy'])" 2>&1 | tail -1)" | tee -a "$log"
    done
  done
fi
if [[ " $STAGES " == *" peers "* ]]; then
  timeout 300 python3 bench/fp8_gemm.py --models bench/cases/fp8 --tilefuse "$B/tilefuse" --json "$OUT/fp8-gemm.json" 2>&1 | tail -24 | tee -a "$log"
fi
if [[ " $STAGES " == *" checks "* ]]; then
  for m in tests/gemm/gemm_fp8_*.onnx; do
    check_forms "$m" "" "--gemm-form overlap" "--gemm-form pingpong" "--gemm-form streamk" "--precision high"
  done
  TILEFUSE_GEMM_BLOCK_N=128 check_forms tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx "--gemm-form tail"
  for m in tests/gemm/gemm_3xtf32_*.onnxtxt; do check_forms "$m" ""; done
  memcheck tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx
  TILEFUSE_GEMM_BLOCK_N=192 memcheck tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx
  memcheck tests/gemm/gemm_fp8_e4m3_qdq_linear_odd_n.onnx --gemm-form overlap
  memcheck tests/gemm/gemm_3xtf32_many_tiles_f32.onnxtxt
fi

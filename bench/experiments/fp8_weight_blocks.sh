#!/usr/bin/env bash
# Issue 50 on a GPU: block-scaled FP8 products whose weight carries one scale per 128x128 block
# (DeepGEMM's weights; ONNX writes the scale repeated over the block's columns), read by the
# template once a tile and step: the CI graph against the reference in the template's forms and
# under compute-sanitizer, then 4096^3 and 8192^3 timed beside the per-column block scales, the
# per-tensor FP8 product and tilefuse's bf16 (`tilefuse bench`, median of 20).
#   bench/experiments/fp8_weight_blocks.sh BUNDLE OUT
set -u
B=$1 OUT=$2
source "$(dirname "$0")/template_checks.sh"
open_bundle fp8-weight-blocks.log
m=tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx
# (TILEFUSE_GEMM_BLOCK_N: the tiles' width; 192 reads two runs of B's scales a tile.)
check_forms "$m" "" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-form tail" "--gemm-cluster 2"
for bn in 64 128 192; do TILEFUSE_GEMM_BLOCK_N=$bn check_forms "$m" "--gemm-form tail"; done
memcheck "$m"
TILEFUSE_GEMM_BLOCK_N=192 memcheck "$m"
for n in 4096 8192; do
  for run in gemm_e4m3_weight_blocks:0 gemm_e4m3_weight_blocks:128 gemm_e4m3_weight_blocks:192 gemm_e4m3_blocks:0 gemm_e4m3:0 gemm_bf16:0; do
    model=${run%:*} bn=${run#*:}
    r=$(TILEFUSE_GEMM_BLOCK_N=$bn "$B/tilefuse" bench "bench/cases/fp8/${model}_$n.onnx" --backend cuda --repeats 20 --warmup 5 --json 2>&1)
    echo "$model $n (block_n ${bn/#0/by the rule}): $(echo "$r" | python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.0f} us\", d['groups'][0]['strategy'])" 2>&1 | tail -1)" | tee -a "$log"
  done
done

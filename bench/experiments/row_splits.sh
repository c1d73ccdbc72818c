#!/usr/bin/env bash
# A few long rows split over blocks (codegen/cuda/cuda_row_splits.h), in one call on a machine
# with a GPU (fifty-seventh session, 2026-12-07). Before: a row kernel gave each row one block,
# and ReduceMax(Abs(x)) of 8192² f32 values took 16 ms on an H100. Expected with the split:
# 264 blocks over 132 SMs read the 256 MB at about the copy rate, ~85-100 µs (≥160x), at or ahead
# of torch.compile (Inductor splits such reductions in two kernels). Also runs the amax-cost A/B
# left from the fifty-sixth session (bench/experiments/amax_cost.sh: its GpuAmaxTest is in GTEST).
# Usage: bash bench/experiments/row_splits.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle row-splits.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
GTEST='GpuRowSplits*:GpuAmax*:*CudaLongRow*:CudaClusterExchange*' gtest_first
CASES=amax_f32_8192x8192,mse_loss_bf16_8192x8192
for c in ${CASES//,/ }; do
  if o=$(timeout 300 "$B/tilefuse" run "bench/cases/$c.onnxtxt" --backend cuda --check 2>&1); then echo "PASS $c" | tee -a "$log"
  else echo "FAIL $c" | tee -a "$log"; echo "$o" | tail -8 | tee -a "$log"; fi
done
memcheck bench/cases/mse_loss_bf16_8192x8192.onnxtxt
for round in 1 2; do
  for split in 1 0; do
    for c in ${CASES//,/ }; do
      echo "round $round split $split $c: $(TILEFUSE_ROW_SPLITS=$split bench_us "bench/cases/$c.onnxtxt")" | tee -a "$log"
    done
  done
done
timeout 300 python3 bench/peers.py --cases "$CASES" --peers eager,library,compile --json "$OUT/peers.json" 2>&1 | grep -v Warn | tail -12 | tee -a "$log"
bash "$(dirname "$0")/amax_cost.sh" "$B" "$OUT/amax-cost" 2>&1 | tail -8

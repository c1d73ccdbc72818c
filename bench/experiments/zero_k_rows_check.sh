#!/usr/bin/env bash
# The zero rows of K an MN-major B's prologue appends, read as the weight itself (TMA's
# out-of-bounds fill): tests/gemm/gemm_zero_padded_k_rows_bf16.onnxtxt against the reference
# with poisoned outputs, under compute-sanitizer's memcheck, then GPT-2's training step
# (training_step.sh, MODELS default gpt2). On a machine with a GPU; carries
# build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/zero-k-rows-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
m=tests/gemm/gemm_zero_padded_k_rows_bf16.onnxtxt
for form in rule streamk; do
  TILEFUSE_CACHE_DIR=/tmp/tfc-zk "$B/tilefuse" run "$m" --backend cuda --random 3 --check --gemm-form $form > "$OUT/check-$form.log" 2>&1
  echo "check $form (rc $?): $(grep -iE 'pass|fail|error' "$OUT/check-$form.log" | tail -2 | tr '\n' ' ')"
done
TILEFUSE_CACHE_DIR=/tmp/tfc-zk compute-sanitizer --tool memcheck "$B/tilefuse" run "$m" --backend cuda --random 1 --check > "$OUT/memcheck.log" 2>&1
echo "memcheck (rc $?): $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log")"
MODELS=${MODELS:-gpt2} PROFILE=${PROFILE:-30} HOST_PROFILE=${HOST_PROFILE:-0} bash bench/experiments/training_step.sh

#!/usr/bin/env bash
# The GEMM template's epilogue without a branch around each column pair (where its functor
# writes nothing itself, a pair past the product's edge computes a clamped pair's values that
# the staged store drops): every tests/gemm graph against the reference (poisoned outputs) in
# the rule's form, the main loop's tail, ping-pong tiles and clusters of two, 12 runs at a time;
# memcheck on the ragged ones; then vit_gemms.sh (ViT-B's products at batch 32 tuned, fc1's erf
# GELU under Nsight Compute). On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/epilogue-branches-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-epilogue}
log="$OUT/checks.log"
: > "$log"
for m in tests/gemm/*.onnxtxt; do
  for form in "" "--gemm-form tail" "--gemm-form pingpong" "--gemm-cluster 2"; do echo "$m|$form"; done
done | xargs -P 12 -I{} bash -c 'm=${1%%|*}; form=${1#*|}
  if o=$(timeout 300 '"$B"'/tilefuse run "$m" --backend cuda --check --gemm template $form 2>&1); then echo "PASS $m $form"
  else echo "FAIL $m $form"; echo "$o" | tail -8; fi' _ {} | tee -a "$log" | grep -v "^PASS"
echo "checks: $(grep -c '^PASS' "$log") passed, $(grep -c '^FAIL' "$log") failed"
. bench/experiments/template_checks.sh
for m in tests/gemm/gemm_bias_relu_ragged_bf16.onnxtxt tests/gemm/gemm_overlap_bias_tanh_ragged_bf16.onnxtxt \
         tests/gemm/gemm_192_bias_tanh_ragged_bf16.onnxtxt tests/gemm/gemm_unaligned_vocab_ragged_rows_bf16.onnxtxt; do
  memcheck "$m"
done
OUT=$OUT/vit NCU_GRAPHS=vit_fc1_bias_gelu bash bench/experiments/vit_gemms.sh

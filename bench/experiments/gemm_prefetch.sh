#!/usr/bin/env bash
# B prefetched into L2 ahead of the GEMM template's ring (2026-12-02): products of few tiles
# (every unit in one round of the grid) ask L2 for up to 128 KiB of B beyond their ring, the
# first of it before the wait for the kernel ahead. The few-tile graphs of tests/gemm and
# tests/conv and a few models against the reference (poisoned outputs), memcheck; then models
# through torch.compile (MODELS) with the prefetches and, tilefuse alone, without
# (TILEFUSE_GEMM_PREFETCH=0) in the same call. On a machine with a GPU; carries
# build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/prefetch-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-prefetch}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in tests/gemm/gemm_3xtf32_small_m_splitk_bias_residual_f32.onnxtxt tests/gemm/gemm_grouped_qkv_ragged_bf16.onnxtxt \
           tests/gemm/gemm_swiglu_gated_rows128_bf16.onnxtxt tests/gemm/gemm_swiglu_gated_splitk_ragged_bf16.onnxtxt \
           tests/gemm/gemm_splitk_ragged_tanh_residual_bf16.onnxtxt tests/gemm/gemm_padded_logits_five_rows_bf16.onnxtxt \
           tests/gemm/gemm_unaligned_vocab_five_rows_bf16.onnxtxt tests/gemm/gemm_grouped_qkv_3xtf32_bias_f32.onnxtxt \
           tests/gemm/bmm_splitk_f16.onnxtxt tests/gemm/gemm_cluster_ragged_bf16.onnxtxt; do
    check_forms "$m" "" "--gemm-form streamk" "--gemm-cluster 2"
  done
  memcheck tests/gemm/gemm_swiglu_gated_splitk_ragged_bf16.onnxtxt
  memcheck tests/gemm/gemm_grouped_qkv_ragged_bf16.onnxtxt
  for m in tests/conv/*.onnxtxt; do check_forms "$m" ""; done 2>/dev/null | grep -c PASS | sed 's/^/conv graphs passing: /'
  grep -c "^FAIL" "$log" | sed 's/^/failures so far: /'
  for m in tests/models/llama_2layer/ tests/models/gpt2_sdpa_dynamo/ tests/models/resnet_tiny_dynamo/ tests/models/vit_tiny_dynamo/; do
    if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check 2>&1); then echo "PASS $m" | tee -a "$log"
    else echo "FAIL $m" | tee -a "$log"; echo "$o" | tail -12 | tee -a "$log"; fi
  done
fi
MODELS=${MODELS:-llama:bf16:1x128}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
  if [ -z "${SKIP_OFF:-}" ]; then
    mkdir -p "$OUT/off"
    OUT=$OUT/off BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_GEMM_PREFETCH=0 torch_frontend_runs $MODELS
  fi
fi

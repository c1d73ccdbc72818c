#!/usr/bin/env bash
# Rotary embeddings in their products' epilogues (2026-12-02): q's and k's rotated halves read
# from the same thread's accumulators (codegen/gemm_partner_columns.h), the KV cache's
# transposed outputs stored from the epilogue. The rotary graph of tests/gemm and the models
# whose plans changed (LLaMA-style ONNX exports, the dynamo exports the heads' transposes reach)
# against the reference (poisoned outputs) and under memcheck; then models through
# torch.compile (MODELS, default the LLaMA-style model in bf16 at 1x128 and 8x512) as by
# default, and tilefuse alone with the rotary epilogues (TILEFUSE_ROTARY_EPILOGUES=1, not the
# default: slower end to end at 1x128), in the same call. GTEST: a filter of
# tilefuse_tests run first. On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/rotary-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-rotary}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
gtest_first
if [ -z "${SKIP_CHECKS:-}" ]; then
  TILEFUSE_ROTARY_EPILOGUES=1 check_forms tests/gemm/gemm_rotary_qk_attention_ragged_bf16.onnxtxt "" "--gemm-form pingpong" "--gemm-form tail" "--gemm-form overlap" \
    "--gemm-form streamk" "--stand-ins" "--gemm-cluster 2"
  TILEFUSE_ROTARY_EPILOGUES=1 memcheck tests/gemm/gemm_rotary_qk_attention_ragged_bf16.onnxtxt
  # (Grouped products call a tile's part's epilogue directly since the same day.)
  for m in tests/gemm/gemm_grouped_qkv_ragged_bf16.onnxtxt tests/gemm/gemm_grouped_qkv_3xtf32_bias_f32.onnxtxt; do
    check_forms "$m" "" "--gemm-form tail" "--stand-ins"
  done
  for m in tests/models/llama_2layer/ tests/models/llama_2layer_legacy/ tests/models/gpt2_sdpa_dynamo/ tests/models/bert_sdpa_dynamo/ \
           tests/models/t5_tiny_dynamo/ tests/models/attention_block/; do
    if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check 2>&1); then echo "PASS $m" | tee -a "$log"
    else echo "FAIL $m" | tee -a "$log"; echo "$o" | tail -12 | tee -a "$log"; fi
  done
  memcheck tests/models/llama_2layer/
fi
MODELS=${MODELS:-llama:bf16:1x128,8x512}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
  if [ -z "${SKIP_ROTARY:-}" ]; then
    mkdir -p "$OUT/rotary"
    OUT=$OUT/rotary BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_ROTARY_EPILOGUES=1 torch_frontend_runs $MODELS
  fi
fi

#!/usr/bin/env bash
# Products grouped over N (2026-12-02): products of one A by several weights, each of few output
# tiles (a layer's q, k and v at batch 1), as one GEMM template kernel. The grouped graphs of
# tests/gemm against the reference (poisoned outputs) and under memcheck; then models through
# torch.compile (MODELS, default the LLaMA-style model in bf16 and BERT in f32 at 1x128) with
# grouping and, tilefuse alone, without it (TILEFUSE_GEMM_GROUP_N=0), in the same call. On a
# machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/grouped-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-grouped}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in tests/gemm/gemm_grouped_*.onnxtxt; do check_forms "$m" ""; done
  memcheck tests/gemm/gemm_grouped_qkv_ragged_bf16.onnxtxt
fi
MODELS=${MODELS:-llama:bf16:1x128 bert:f32:1x128}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
  if [ -z "${SKIP_UNGROUPED:-}" ]; then
    mkdir -p "$OUT/ungrouped"
    OUT=$OUT/ungrouped BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_GEMM_GROUP_N=0 torch_frontend_runs $MODELS
  fi
fi

#!/usr/bin/env bash
# Gated products (2026-12-02): a product only another's epilogue reads, element by element
# (SwiGLU's gate), computed in that product's tiles. The gated graphs of tests/gemm against the
# reference (poisoned outputs) and under memcheck; the LLaMA-style gate and up at TUNE_ROWS rows
# (default 128) tuned, gated and not (every form the search space holds); then models through torch.compile (MODELS,
# default the LLaMA-style model in bf16 at 1x128 and 8x512) gated and, tilefuse alone, not
# (TILEFUSE_GEMM_GATES=0), in the same call. GTEST: a filter of tilefuse_tests run first (GPU
# tests not yet run). On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gated-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-gated}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
gtest_first
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in tests/gemm/gemm_*gated*.onnxtxt tests/gemm/gemm_swiglu_bf16.onnxtxt; do
    check_forms "$m" "" "--gemm-form pingpong" "--gemm-form tail" "--gemm-form overlap" "--gemm-form streamk" "--stand-ins" "--gemm-cluster 2"
    case $m in *f32*) check_forms "$m" "--precision high" "--precision high --gemm-form pingpong" "--precision high --gemm-cluster 2" ;; esac
  done
  memcheck tests/gemm/gemm_swiglu_gated_rows128_bf16.onnxtxt
  memcheck tests/gemm/gemm_geglu_gated_bias_many_tiles_ragged_bf16.onnxtxt
fi
if [ -z "${SKIP_TUNE:-}" ]; then
  for rows in ${TUNE_ROWS:-128}; do
    m=$OUT/swiglu_rows$rows.onnxtxt
    sed "s/\[1,128,/[1,$rows,/g" tests/gemm/gemm_swiglu_gated_rows128_bf16.onnxtxt > "$m"
    for gates in 1 0; do
      name=swiglu_rows$rows-gates$gates
      TILEFUSE_GEMM_GATES=$gates timeout 200 "$B/tilefuse" tune "$m" --backend cuda --json > "$OUT/$name-tune.json" 2> "$OUT/$name-tune.err"
      tune_report "$OUT/$name-tune.json" "$name"
    done
  done 2>&1 | tee -a "$log"
fi
MODELS=${MODELS:-llama:bf16:1x128,8x512}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
  if [ -z "${SKIP_UNGATED:-}" ]; then
    mkdir -p "$OUT/ungated"
    OUT=$OUT/ungated BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_GEMM_GATES=0 torch_frontend_runs $MODELS
  fi
fi

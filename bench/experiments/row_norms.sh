#!/usr/bin/env bash
# RMS norms in their products (2026-12-03; off by default, TILEFUSE_GEMM_ROW_NORMS=1): a norm
# only one product kernel reads, as its A, computed in that kernel (A normed by rows in the
# consumers' registers). The norm graphs of
# tests/gemm against the reference (poisoned outputs) in the forms the norm takes, and under
# memcheck; the products at TUNE_ROWS rows (default 128) tuned, normed and not (every form the
# search space holds); then models through torch.compile (MODELS, default the LLaMA-style model
# in bf16 at 1x128 and 8x512) normed and, tilefuse alone, not (TILEFUSE_GEMM_ROW_NORMS=0), in the
# same call; PROFILE=1 adds each LLaMA-style forward's kernels one by one, normed and not
# (graph_profile.sh, programmatic launches off). GTEST: a filter of tilefuse_tests run first. On
# a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/row-norms-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-row-norms}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
gtest_first
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in tests/gemm/gemm_rms_norm_*.onnxtxt; do
    TILEFUSE_GEMM_ROW_NORMS=1 check_forms "$m" "" "--gemm-form pingpong" "--gemm-form overlap" "--gemm-cluster 2" "--stand-ins"
    check_forms "$m" ""
    TILEFUSE_GEMM_ROW_NORMS=1 memcheck "$m"
  done
  for m in tests/models/llama_2layer; do TILEFUSE_GEMM_ROW_NORMS=1 check_forms "$m" ""; done
fi
if [ -z "${SKIP_TUNE:-}" ]; then
  for rows in ${TUNE_ROWS:-128}; do
    for base in gemm_rms_norm_swiglu_gated_rows128_bf16; do
      m=$OUT/${base}_rows$rows.onnxtxt
      sed "s/\[1,128,/[1,$rows,/g" tests/gemm/$base.onnxtxt > "$m"
      for norms in 1 0; do
        name=${base}_rows$rows-norms$norms
        TILEFUSE_GEMM_ROW_NORMS=$norms timeout 200 "$B/tilefuse" tune "$m" --backend cuda --json > "$OUT/$name-tune.json" 2> "$OUT/$name-tune.err"
        tune_report "$OUT/$name-tune.json" "$name" 4
      done
    done
  done 2>&1 | tee -a "$log"
fi
MODELS=${MODELS:-llama:bf16:1x128,8x512}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  TILEFUSE_GEMM_ROW_NORMS=1 torch_frontend_runs $MODELS
  if [ -z "${SKIP_UNNORMED:-}" ]; then
    mkdir -p "$OUT/unnormed"
    OUT=$OUT/unnormed BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_GEMM_ROW_NORMS=0 torch_frontend_runs $MODELS
  fi
fi
if [ -n "${PROFILE:-}" ]; then
  for norms in 1 0; do
    TILEFUSE_PDL=0 TILEFUSE_GEMM_ROW_NORMS=$norms OUT=$OUT/profile TAG=norms$norms RUNS=llama:bf16:1x128 PROFILE_ARGS="--first 40" \
      bash bench/experiments/graph_profile.sh | head -60
  done
fi

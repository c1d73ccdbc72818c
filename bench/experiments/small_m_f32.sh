#!/usr/bin/env bash
# f32 at batch 1 (2026-12-02): 3xTF32 products of few output tiles on the GEMM template's small-M
# tiles (64 rows, split-K), where cuBLASLt's f32 had run them. The f32 graphs of tests/gemm against
# the reference (poisoned outputs) in the rule's form, memcheck on the small-M one; GPT-2's four
# layer products at 128 rows in f32 tuned beside PyTorch's exact f32 (small_m_gemms.sh); then
# models through torch.compile (MODELS, default GPT-2 and BERT in f32 at 1x128; none when
# MODELS is "none"). On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/small-m-f32-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-small-m-f32}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in tests/gemm/*f32*.onnxtxt; do check_forms "$m" ""; done
  memcheck tests/gemm/gemm_3xtf32_small_m_splitk_bias_residual_f32.onnxtxt
fi
if [ -z "${SKIP_TUNE:-}" ]; then
  OUT=$OUT/gpt2 GRAPHS=bench/experiments/gpt2_gemms ROWS=128 DTYPE=f32 TUNE_LIMIT=${TUNE_LIMIT:-90} \
    bash bench/experiments/small_m_gemms.sh 2>&1 | tee "$OUT/gpt2.txt"
fi
MODELS=${MODELS:-gpt2:f32:1x128 bert:f32:1x128}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
fi

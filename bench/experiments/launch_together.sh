#!/usr/bin/env bash
# Independent pointwise kernels launched together (2026-12-02): the models and examples whose
# plans launch kernels together `--check`ed against the reference (poisoned outputs), one under
# memcheck; then models through torch.compile (MODELS, default the LLaMA-style model in bf16 at
# 1x128) with and, tilefuse alone, without it (TILEFUSE_LAUNCH_TOGETHER=0), in the same call.
# On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/together-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-together}
log="$OUT/checks.log"
: > "$log"
. bench/experiments/template_checks.sh
if [ -z "${SKIP_CHECKS:-}" ]; then
  for m in examples/*.onnxtxt tests/models/*/ tests/attention/exports/*.onnx; do
    # (grep -c, not -q: under pipefail grep -q's early exit fails the pipeline.)
    if [ "$("$B/tilefuse" compile "$m" --backend cuda 2>&1 | grep -c "launched together")" -gt 0 ]; then
      if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check 2>&1); then echo "PASS $m" | tee -a "$log"
      else echo "FAIL $m" | tee -a "$log"; echo "$o" | tail -12 | tee -a "$log"; fi
    fi
  done
  memcheck tests/models/llama_2layer/
fi
MODELS=${MODELS:-llama:bf16:1x128}
if [ "$MODELS" != none ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  torch_frontend_runs $MODELS
  if [ -z "${SKIP_APART:-}" ]; then
    mkdir -p "$OUT/apart"
    OUT=$OUT/apart BENCH_ARGS="--tilefuse-only ${BENCH_ARGS:-}" TILEFUSE_LAUNCH_TOGETHER=0 torch_frontend_runs $MODELS
  fi
fi

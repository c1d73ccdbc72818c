#!/usr/bin/env bash
# The small-M rule's 128-column tiles (2026-12-01): the LLaMA-style layer products at ROWS rows
# checked against the reference in the rule's form, then models through torch.compile against
# torch.compile's own modes (MODELS: "model:dtype:shape,shape ..."). On a machine with a GPU;
# carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/small-m-rule-out}
ROWS=${ROWS:-128}
mkdir -p "$OUT/graphs"
log="$OUT/checks.log"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-rule}
. bench/experiments/template_checks.sh
for f in bench/experiments/llama_gemms/*.onnxtxt; do
  g="$OUT/graphs/$(basename "$f" .onnxtxt)-$ROWS.onnxtxt"
  sed "s/4096/$ROWS/g" "$f" > "$g"
  check_forms "$g" ""
done
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
torch_frontend_runs ${MODELS:-llama:bf16:1x128 vit:bf16:1}

#!/usr/bin/env bash
# Issue 45's models through torch.compile(backend="tilefuse") against torch.compile's own modes
# (bench/torch_frontend.py), bf16 at 1x128 and 8x512, on a machine with a GPU: where the frontend
# stands. BERT first: its attention kept whole (tilefuse.fx.whole_attention, 2026-11-30) had not
# yet run on a GPU. MODELS: "model:dtype:shape,shape ..." runs.
# Usage: bash bench/experiments/frontend_status.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
X=/tmp/tilefuse-python
source "$(dirname "$0")/template_checks.sh"
open_bundle frontend-status.log
export HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
LIMIT=${LIMIT:-200} torch_frontend_runs ${MODELS:-bert:bf16:1x128,8x512 gpt2:bf16:1x128,8x512 llama:bf16:1x128,8x512} | tee -a "$log"

#!/usr/bin/env bash
# Greedy decoding with a static KV cache on a GPU: bench/decode.py's modes (eager, torch.compile's
# modes, tilefuse) for GPT-2 small and a LLaMA-style model, and tilefuse's decode step under the
# profiler.
# Usage: bash bench/experiments/decode.sh BUNDLE_DIR OUT_DIR   (MODELS="gpt2 llama", MODES=..., ARGS=...)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle decode.log
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for model in ${MODELS:-gpt2 llama}; do
  HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout ${LIMIT:-500} python3 bench/decode.py --model "$model" --json "$OUT/decode-$model.json" \
    ${MODES:+--modes $MODES} ${ARGS:-} 2>&1 | grep -Ev 'Warning|warn\(' | tee -a "$log"
done

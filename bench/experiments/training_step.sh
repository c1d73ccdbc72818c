#!/usr/bin/env bash
# Where a training step's time goes now (issue 46): GPT-2 small and the LLaMA-style model, bf16,
# 8x512, with PyTorch's fused AdamW, beside eager and torch.compile in the same process
# (bench/torch_training.py), each step's costliest kernels (PROFILE, default 25) and the host's
# side of a step (HOST_PROFILE, default 3). MODELS: default "gpt2 llama". EXTRA: more arguments
# for torch_training.py. PRE: a command run first (e.g. a check of the last device change). On a
# machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/training-step-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-training}
[ -n "${PRE:-}" ] && bash -c "$PRE"
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for model in ${MODELS:-gpt2 llama}; do
  PYTHONPATH="$X" timeout 500 python3 bench/torch_training.py --model "$model" --shape 8x512 --dtype bf16 \
    --backward tilefuse --inductor --optimizer --profile "${PROFILE:-25}" --host-profile "${HOST_PROFILE:-3}" \
    --json "$OUT/$model.json" ${EXTRA:-} > "$OUT/$model.log" 2>&1
  echo "== $model (rc $?)"
  grep -vi "warn" "$OUT/$model.log" | cut -c1-220 | tail -${TAIL:-70}
done

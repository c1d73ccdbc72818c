#!/usr/bin/env bash
# Fifty-ninth session (2026-12-07), one call on a machine with a GPU; carries
# build-gpu/bundle.tar.xz.
#   1. stem_prologue.sh: the stem's prologue changes of the fifty-eighth session checked
#      (--check, memcheck) and timed, ResNet-50 bf16 and f32 at batch 32 against torch.compile.
#   2. ResNet-50 f32 (TF32) at batch 32, programmatic launches off, every kernel listed with
#      the plan (--explain): which TF32 products lose to cuDNN's (about 2.5x bf16's time where
#      cuDNN takes 1.5x).
#   3. LLaMA-style bf16 8x512, programmatic launches off: q, k and v as the rule has them
#      (three kernels) and grouped over N (TILEFUSE_GEMM_GROUP_N_ANY=1), with and without the
#      rotary embeddings in the epilogues. Expected: grouped ~69 µs a layer against 77.
# Usage: bash bench/experiments/tf32_and_grouping.sh OUT_DIR [STAGES]
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?output folder}
STAGES=${2:-"stem tf32 grouping"}
mkdir -p "$OUT"
if [[ " $STAGES " == *" stem "* ]]; then
  RUNS="resnet50:bf16:32 resnet50:f32:32" LIMIT=150 bash bench/experiments/stem_prologue.sh build-gpu/bundle "$OUT/stem"
fi
X=/tmp/tilefuse-python; B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tilefuse-cache}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
profile() {  # NAME ENV... -- ARGS...: graph_profile.py with ENV set, its table in OUT/NAME.txt
  local name=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" PYTHONPATH="$X" timeout 150 python3 bench/experiments/graph_profile.py "$@" > "$OUT/$name.txt" 2>&1
  echo "== $name: exit $?"
  grep -E "^== " "$OUT/$name.txt"
}
if [[ " $STAGES " == *" tf32 "* ]]; then
  profile resnet50-f32-32-nopdl TILEFUSE_PDL=0 -- --model resnet50 --dtype f32 --shape 32 --top 70 --first 80 \
    --explain "$OUT/resnet50-f32-32-explain.json"
  profile resnet50-bf16-32-nopdl TILEFUSE_PDL=0 -- --model resnet50 --dtype bf16 --shape 32 --top 70 --first 80 \
    --explain "$OUT/resnet50-bf16-32-explain.json"
fi
if [[ " $STAGES " == *" grouping "* ]]; then
  profile llama-rule TILEFUSE_PDL=0 -- --model llama --dtype bf16 --shape 8x512 --top 20
  profile llama-grouped TILEFUSE_PDL=0 TILEFUSE_GEMM_GROUP_N_ANY=1 -- --model llama --dtype bf16 --shape 8x512 --top 20
  profile llama-grouped-rotary TILEFUSE_PDL=0 TILEFUSE_GEMM_GROUP_N_ANY=1 TILEFUSE_ROTARY_EPILOGUES=1 -- --model llama --dtype bf16 --shape 8x512 --top 20
  profile llama-grouped-pdl TILEFUSE_GEMM_GROUP_N_ANY=1 -- --model llama --dtype bf16 --shape 8x512 --top 20 --peer
fi

#!/usr/bin/env bash
# bench/torch_frontend.py over a list of models, each in its own process under a time limit, on
# a machine with a GPU; carries build-gpu/bundle.tar.xz. RUNS: "model:dtype:shape,shape ..."
# (default: the vision models in bf16 at batches 1 and 32, and the language models in f32).
# BENCH_ARGS go to every run (e.g. --max-autotune); LIMIT is each run's limit in seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/torch-zoo-out}
mkdir -p "$OUT"
X=/tmp/tilefuse-python; B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
RUNS=${RUNS:-"resnet50:bf16:1,32 vit:bf16:1,32 gpt2:f32:8x512,1x128"}
for run in $RUNS; do
  IFS=: read -r model dtype shapes <<< "$run"
  args=""
  for s in ${shapes//,/ }; do args="$args --shape $s"; done
  name="$model-$dtype${TAG:+-$TAG}"
  PYTHONPATH="$X" timeout "${LIMIT:-300}" python3 bench/torch_frontend.py --model "$model" --dtype "$dtype" $args ${BENCH_ARGS:-} \
    --json "$OUT/torch-frontend-$name.json" > "$OUT/torch-frontend-$name.log" 2>&1
  echo "== $name: exit $?"
  grep -E '^\{|Error|error' "$OUT/torch-frontend-$name.log" | cut -c1-1500 | head -8
done

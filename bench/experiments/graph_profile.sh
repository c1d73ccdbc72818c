#!/usr/bin/env bash
# bench/experiments/graph_profile.py over a list of models, each in its own process, on a
# machine with a GPU; carries build-gpu/bundle.tar.xz. RUNS: "model:dtype:shape ..." (default:
# the batch-1 cases issue 45 measures). PROFILE_ARGS go to every run.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/graph-profile-out}
mkdir -p "$OUT"
X=/tmp/tilefuse-python; B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tilefuse-cache}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
RUNS=${RUNS:-"gpt2:bf16:1x128 bert:bf16:1x128 resnet50:bf16:1"}
for run in $RUNS; do
  IFS=: read -r model dtype shape <<< "$run"
  name="$model-$dtype-$shape${TAG:+-$TAG}"
  PYTHONPATH="$X" timeout "${LIMIT:-240}" python3 bench/experiments/graph_profile.py --model "$model" --dtype "$dtype" \
    --shape "$shape" ${PROFILE_ARGS:---peer} > "$OUT/profile-$name.txt" 2>&1
  echo "== $name: exit $?"
  grep -v Warning "$OUT/profile-$name.txt" | grep -v _warn_once | head -80
done

#!/usr/bin/env bash
# tilefuse's compile of GPT-2 small (bf16, transformers, random weights) through tilefuse.fx, a
# process per compile sharing one cache folder: the first cold, the next ones as a second
# process meets them (kernel cache, attention mask answers, compiled-model cache); then the
# checks against the reference (attention by default), and the torch.compile bench. On a machine with a GPU;
# carries build-gpu/bundle.tar.xz. Stages (STAGES, default "cross checks bench").
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/torch-compile-time-out}
mkdir -p "$OUT"
X=/tmp/tilefuse-python; B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1
STAGES=${STAGES:-cross checks bench}
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
if has cross; then
  echo "== cross-process compiles of GPT-2 (one cache folder, a process each)"
  for shape in ${SHAPES:-8x512}; do
    rm -rf /tmp/tfc-x
    for i in 1 2 3; do
      TILEFUSE_CACHE_DIR=/tmp/tfc-x PYTHONPATH=$X python3 bench/experiments/torch_plan_dump.py --shape "$shape" --compiles 1 2>&1 |
        grep "^compile" | sed "s/^/$shape process $i: /"
    done
  done | tee "$OUT/cross-process.txt"
fi
if has checks; then
  echo "== checks against the reference"
  # CHECKS: the models checked (default: the attention graphs and a GPT-2).
  ls -d ${CHECKS:-tests/attention/*.onnxtxt bench/cases/check/attention*.onnxtxt tests/models/gpt2_2layer} > "$OUT/jobs.txt"
  export B
  TILEFUSE_CACHE_DIR=/tmp/tfc-chk xargs -P 8 -L 1 -a "$OUT/jobs.txt" sh -c \
    'if o=$(timeout 200 "$B/tilefuse" run "$1" --backend cuda --check --strict 2>&1); then echo "PASS $1"; else echo "FAIL $1"; echo "$o" | tail -5; fi' check \
    > "$OUT/checks.log" 2>&1
  echo "checks: $(grep -c ^PASS "$OUT/checks.log") passed, $(grep -c ^FAIL "$OUT/checks.log") failed"
  grep -A5 ^FAIL "$OUT/checks.log" | head -20
fi
if has bench; then
  shapes=""
  for s in ${BENCH_SHAPES:-8x512 1x128}; do shapes="$shapes --shape $s"; done
  for m in ${MODELS:-gpt2}; do
    HF_HUB_OFFLINE=1 PYTHONPATH="$X" python3 bench/torch_frontend.py --model "$m" $shapes --dtype bf16 ${BENCH_ARGS:-} \
      --json "$OUT/torch-frontend-$m-bf16.json" > "$OUT/torch-frontend-$m.log" 2>&1
    grep '^{' "$OUT/torch-frontend-$m.log"
  done
fi

#!/usr/bin/env bash
# torch.compile(backend="tilefuse") with weights read as inputs (the default on the GPU) against
# weights folded as constants, on a machine with a GPU. Carries build-gpu/bundle.tar.xz.
# Stages (STAGES, default "python bench"):
#   python  the Python package's torch tests on the GPU (its extension built here for this Python)
#   bench   bench/torch_frontend.py, --weights auto and fold, on MODELS (default gpt2) at SHAPES
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/torch-weights-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
nproc | tee -a "$OUT/device.txt"
STAGES=${STAGES:-python bench}
has() { [[ " $STAGES " == *" $1 "* ]]; }
X=/tmp/tilefuse-python
scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/python-ext.log" 2>&1 || tail -20 "$OUT/python-ext.log"
if has python; then
  HF_HUB_OFFLINE=1 PYTHONPATH="$X:$B/python/pytest-lib" TILEFUSE_CLI="$B/tilefuse" TILEFUSE_CACHE_DIR=/tmp/tf-cache-py \
    timeout ${PYTEST_TIMEOUT:-300} python3 -m pytest -q -rs -p no:cacheprovider ${TESTS:-python/tests/test_torch_weights.py python/tests/test_torch_compile.py} \
    >"$OUT/python-tests.log" 2>&1
  tail -5 "$OUT/python-tests.log"
fi
if has bench; then
  shapes=""
  for s in ${SHAPES:-8x512 1x128}; do shapes="$shapes --shape $s"; done
  for m in ${MODELS:-gpt2}; do
    HF_HUB_OFFLINE=1 PYTHONPATH="$X" python3 bench/torch_frontend.py --model "$m" $shapes --dtype ${DTYPE:-bf16} \
      ${WEIGHTS:---weights auto --weights fold} ${BENCH_ARGS:-} --json "$OUT/torch-frontend-$m-${DTYPE:-bf16}.json" 2>&1 | tee -a "$OUT/torch-frontend.log"
  done
fi

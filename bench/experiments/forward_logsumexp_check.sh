#!/usr/bin/env bash
# The training forward's attention on the template, writing its logsumexp (issue 46), checked on
# a machine with a GPU before its steps are timed: the attention graphs that return the rows'
# logsumexp against the f64 reference (the template's three loops), memcheck on one, the attention
# backward's own tests, and test_cuda.py's training-step attention (forward and backward graphs
# whole, the output and gradients against f32 autograd). Carries build-gpu/bundle.tar.xz; leaves
# the Python extension in /tmp/tilefuse-python for bench/experiments/training_step.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/forward-logsumexp-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-training}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for m in tests/attention/attention_logsumexp_causal_bf16.onnxtxt; do
  for loop in template overlap serial; do
    timeout 200 "$B/tilefuse" run "$m" --backend cuda --check --attention "$loop" > "$OUT/check-$loop.log" 2>&1
    echo "== run --check --attention $loop (rc $?)"; grep -E "output|result|kernel " "$OUT/check-$loop.log" | cut -c1-200
  done
  timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda > "$OUT/memcheck.log" 2>&1
  echo "== memcheck (rc $?)"; grep -E "ERROR SUMMARY|result" "$OUT/memcheck.log"
done
"$B/tilefuse_tests" --gtest_filter='AttentionBackwardTest.*:CudaProgramAttentionBackwardTest.*' > "$OUT/gtest.log" 2>&1
echo "== attention backward tests (rc $?)"; grep -E '^\[ *(FAILED|PASSED|SKIPPED) ' "$OUT/gtest.log" | head
PYTHONPATH="$X:$B/python/pytest-lib" TILEFUSE_CLI="$B/tilefuse" timeout 300 python3 -m pytest -q -rs -p no:cacheprovider \
  python/tests/test_cuda.py -k "training_steps_attention or attention" > "$OUT/pytest.log" 2>&1
echo "== test_cuda.py attention (rc $?)"; tail -15 "$OUT/pytest.log" | cut -c1-300

#!/usr/bin/env bash
# Background compiles behind quick stand-ins (issue 44's NVRTC time), on a machine with a GPU.
# Carries build-gpu/bundle.tar.xz. Stages (STAGES, default "tests python nvrtc first"):
#   tests   the GPU unit tests of runs on device memory, the swap of a stand-in included
#   standins  every tests/gemm, tests/attention graph and block check twin run with --stand-ins
#           against the f64 reference (poisoned outputs)
#   python  the Python package's CUDA tests (its extension built here for this Python)
#   nvrtc   cold NVRTC compiles of every template form and stand-in (TemplateSkeletonsTest)
#   first   time to the first result, cold, with and without background compiles (bench/first_result.py)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/background-compile-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
nproc | tee -a "$OUT/device.txt"
STAGES=${STAGES:-tests standins python nvrtc first}
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has tests; then
  "$B/tilefuse_tests" --gtest_filter='*GpuRunOnDevice*' >"$OUT/gpu-unit-tests.log" 2>&1
  grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) ' "$OUT/gpu-unit-tests.log" | tail -12
fi
if has standins; then
  jobs="$OUT/standins.jobs"
  : >"$jobs"
  for m in tests/gemm/*.onnxtxt tests/attention/*.onnxtxt tests/attention/exports/*.onnx bench/cases/check/attention*.onnxtxt \
           bench/cases/check/mlp_block*.onnxtxt bench/cases/check/gpt_block*.onnxtxt; do
    echo "$m --stand-ins" >>"$jobs"
  done
  export B
  TILEFUSE_CACHE_DIR=/tmp/tf-cache-standins xargs -P 8 -L 1 -a "$jobs" sh -c \
    'if o=$(timeout 200 "$B/tilefuse" run "$@" --backend cuda --check 2>&1); then echo "PASS $*"; else echo "FAIL $*"; echo "$o" | tail -6; fi' check \
    >"$OUT/standins.log" 2>&1
  echo "stand-in checks: $(grep -c '^PASS ' "$OUT/standins.log") passed, $(grep -c '^FAIL ' "$OUT/standins.log") failed"
  grep -A6 '^FAIL ' "$OUT/standins.log" | head -40
fi
X=/tmp/tilefuse-python
if has python || has first; then
  scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/python-ext.log" 2>&1 || tail -20 "$OUT/python-ext.log"
fi
if has python; then
  PYTHONPATH="$X:$B/python/pytest-lib" TILEFUSE_CLI="$B/tilefuse" TILEFUSE_CACHE_DIR=/tmp/tf-cache-py \
    python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_cuda.py python/tests/test_compile.py >"$OUT/python-tests.log" 2>&1
  tail -3 "$OUT/python-tests.log"
fi
if has nvrtc; then
  "$B/tilefuse_tests" --gtest_filter='TemplateSkeletonsTest.*' >"$OUT/nvrtc.log" 2>&1
  grep -E 'nvrtc|OK|FAILED' "$OUT/nvrtc.log" | tail -80
fi
if has first; then
  PYTHONPATH="$X" python3 bench/first_result.py --rounds ${ROUNDS:-2} --json "$OUT/first-result.json" \
    bench/cases/gemm_bias_gelu_bf16_16384x4096x1024.onnxtxt bench/cases/gemm_bf16_8192.onnxtxt \
    bench/cases/gemm_residual_bf16_16384x4096x1024.onnxtxt bench/cases/attention_causal_bf16_b4h16n4096d128.onnxtxt \
    bench/cases/attention_bf16_b4h16n4096d128.onnxtxt bench/cases/attention_causal_bf16_b4h16n4096d64.onnxtxt \
    bench/cases/mlp_block_bf16_8x2048x1024.onnxtxt bench/cases/gpt_block_bf16_b8t2048d1024h16.onnxtxt \
    2>&1 | tee "$OUT/first-result.md"
fi

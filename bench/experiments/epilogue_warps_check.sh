#!/usr/bin/env bash
# The GEMM template's overlapped epilogue in a form that NVRTC compiles fast (issue
# 44's NVRTC time), on a machine with a GPU. Carries build-gpu/bundle.tar.xz (the new binary)
# and build-gpu/cmp.tar.xz (old and new). Stages (STAGES, default "check compare nvrtc"):
#   check   every tests/gemm graph and GEMM check twin in the rule's form and the overlapped
#           one, against the f64 reference with poisoned outputs; memcheck, racecheck and
#           synccheck on an overlapped residual and a bias+GELU graph
#   compare old against new on the GEMM benchmark cases and the blocks (scripts/gpu-compare.sh)
#   nvrtc   cold NVRTC compiles of the template forms (TemplateSkeletonsTest prints each time)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/epilogue-warps-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
STAGES=${STAGES:-check compare nvrtc}
if [[ " $STAGES " == *" check "* ]]; then
  jobs="$OUT/check.jobs"
  : >"$jobs"
  for m in tests/gemm/*.onnxtxt bench/cases/check/gemm_*.onnxtxt bench/cases/check/mlp_block*.onnxtxt bench/cases/check/gpt_block*.onnxtxt; do
    for form in rule overlap; do echo "$m --gemm template --gemm-form $form" >>"$jobs"; done
  done
  export B
  TILEFUSE_CACHE_DIR=/tmp/tf-cache-check xargs -P 8 -L 1 -a "$jobs" sh -c \
    'if o=$(timeout 200 "$B/tilefuse" run "$@" --backend cuda --check 2>&1); then echo "PASS $*"; else echo "FAIL $*"; echo "$o" | tail -6; fi' check \
    >"$OUT/check.log" 2>&1
  echo "checks: $(grep -c '^PASS ' "$OUT/check.log") passed, $(grep -c '^FAIL ' "$OUT/check.log") failed" | tee -a "$OUT/check.log"
  grep -A6 '^FAIL ' "$OUT/check.log" | head -60
  for tool in memcheck racecheck synccheck; do
    for m in tests/gemm/gemm_overlap_residual_ragged_bf16.onnxtxt tests/gemm/gemm_many_tiles_bf16.onnxtxt; do
      if o=$(timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda --gemm template --gemm-form overlap 2>&1); then
        echo "CLEAN $tool $m" | tee -a "$OUT/check.log"
      else echo "FAIL $tool $m" | tee -a "$OUT/check.log"; echo "$o" | grep -v '^=========  ' | tail -8 | tee -a "$OUT/check.log"; fi
    done
  done
fi
if [[ " $STAGES " == *" compare "* ]]; then
  CASES=${CASES:-gemm_bf16_4096,gemm_bias_relu_bf16_4096,gemm_bias_gelu_bf16_4096,gemm_residual_bf16_4096,gemm_bf16_16384x4096x1024,gemm_bias_relu_bf16_16384x4096x1024,gemm_bias_gelu_bf16_16384x4096x1024,gemm_residual_bf16_16384x4096x1024,gemm_bias_gelu_bf16_8192,gemm_bf16_8192,mlp_block_bf16_8x2048x1024,gpt_block_bf16_b8t2048d1024h16,gpt_block_bf16_b4t4096d2048h16} \
    OUT="$OUT" SECOND_ROUND_BEFORE_S=${SECOND_ROUND_BEFORE_S:-200} scripts/gpu-compare.sh > "$OUT/compare.stdout" 2>&1
  cat "$OUT/compare.md"
fi
if [[ " $STAGES " == *" nvrtc "* ]]; then
  TILEFUSE_CACHE_DIR=/tmp/tf-cache-nvrtc-$$ "$B/tilefuse_tests" --gtest_filter='*TemplateSkeletons*' >"$OUT/nvrtc.log" 2>&1
  grep -iE "nvrtc|ms|OK|FAIL" "$OUT/nvrtc.log" | head -80
fi

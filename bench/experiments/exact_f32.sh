#!/usr/bin/env bash
# f32 products at f32's accuracy on the GEMM template (3xTF32, --precision highest), on a
# machine with a GPU; carries build-gpu/bundle.tar.xz. STEPS (default all, in this order):
#   unit    the GPU unit test: 3xTF32 within 1e-5 of the output's scale, TF32 not
#   check   tests/gemm's 3xTF32 graphs (CHECK_MODELS) against the reference (poisoned outputs)
#           in the template's forms, then under compute-sanitizer's memcheck (MEMCHECK_MODELS)
#   forms   the linear cases of bench/tf32_gemm.py in 128- and 256-column tiles
#           (tilefuse_bench_gpu_cases, whole CUDA graph, median)
#   bench   bench/tf32_gemm.py: tilefuse's 3xTF32 against PyTorch's exact f32 (eager, torch.compile)
#   models  bench/torch_frontend.py over f32 models (RUNS, torch_zoo.sh's form)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/exact-f32-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-exact-f32} HF_HUB_OFFLINE=1
STEPS=${STEPS:-"unit check forms bench models"}
log="$OUT/checks.log"
. bench/experiments/template_checks.sh
has() { [[ " $STEPS " == *" $1 "* ]]; }

if has unit; then
  timeout 300 "$B/tilefuse_tests" --gtest_filter='Gemm3xTf32*' 2>&1 | tail -12 | tee "$OUT/unit.txt"
fi
if has check; then
  for m in ${CHECK_MODELS:-tests/gemm/gemm_3xtf32_*.onnxtxt tests/gemm/gemm_bias_f32.onnxtxt tests/gemm/linear_nhwc_gelu_f32.onnxtxt}; do
    check_forms "$m" "" "--gemm-form tail" "--gemm-cluster 2"
  done
  for m in ${MEMCHECK_MODELS:-tests/gemm/gemm_3xtf32_*.onnxtxt}; do memcheck "$m"; done
fi
if has forms; then
  X=/tmp/tilefuse-python
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  root="$OUT/cases-root"
  PYTHONPATH="$X" python3 bench/tf32_gemm.py --write-cases "$root"
  for width in ${WIDTHS:-0 128 256}; do
    extra=(); [ "$width" = 0 ] || extra=(--gemm-block-n "$width")
    timeout 300 "$B/tilefuse_bench_gpu_cases" --root "$root" "${extra[@]}" --json "$OUT/forms-$width.json" \
      > "$OUT/forms-$width.txt" 2>&1
    echo "== block_n $width (0: the rule)"; grep -vE '^\s*$' "$OUT/forms-$width.txt" | tail -8
  done
fi
if has bench; then
  X=/tmp/tilefuse-python
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  PYTHONPATH="$X" timeout 500 python3 bench/tf32_gemm.py --peers "${PEERS:-tilefuse_exact,eager_exact,compile_exact,tilefuse_tf32,compile_tf32}" \
    --repeats 20 --json "$OUT/tf32-gemm.json" 2> "$OUT/tf32-gemm.err" | tee "$OUT/tf32-gemm.md"
  tail -3 "$OUT/tf32-gemm.err"
fi
if has models; then
  OUT="$OUT" RUNS=${RUNS:-"bert:f32:8x512,1x128 llama:f32:8x512"} LIMIT=${LIMIT:-300} bench/experiments/torch_zoo.sh
fi

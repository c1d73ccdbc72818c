#!/usr/bin/env bash
# Stream-K in the GEMM template (2026-12-01): the tiles of a partial last round shared by every
# SM as one run of K steps; 192-row tiles on three consumers. Every tests/gemm graph against the
# reference (poisoned outputs) in the streamk form and the rule's, and every tests/conv graph in
# the rule's, 12 runs at a time; memcheck on six graphs in the streamk form (ragged, residual
# staged, 3xTF32, parts spanning several CTAs, three consumers); ViT-B's layer products at 6304 rows
# (and GPT-2's at GPT2_ROWS) tuned (the search space holds the stream-K and 192-row forms)
# beside cuBLAS; then models through
# torch.compile (MODELS, as small_m_rule.sh takes them; none when empty). On a machine with a
# GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/stream-k-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-stream-k}
log="$OUT/checks.log"
: > "$log"
if [ -z "${SKIP_CHECKS:-}" ]; then
  { for m in tests/gemm/*.onnxtxt tests/gemm/*.onnx; do
      for form in "--gemm-form streamk" ""; do echo "$m|$form"; done
    done
    for m in tests/conv/*.onnxtxt; do echo "$m|"; done; } | xargs -P 12 -I{} bash -c 'm=${1%%|*}; form=${1#*|}
    if o=$(timeout 300 '"$B"'/tilefuse run "$m" --backend cuda --check --gemm template $form 2>&1); then
      echo "PASS $m $form: $(echo "$o" | grep -o "stream-K[^,;]*" | head -1)"
    else echo "FAIL $m $form"; echo "$o" | tail -8; fi' _ {} | tee -a "$log" | grep -v "^PASS"
  echo "checks: $(grep -c '^PASS' "$log") passed ($(grep '^PASS' "$log" | grep -c 'stream-K') with stream-K), $(grep -c '^FAIL' "$log") failed"
  . bench/experiments/template_checks.sh
  for m in tests/gemm/gemm_192_residual_ragged_bf16.onnxtxt tests/gemm/gemm_3xtf32_many_tiles_f32.onnxtxt \
           tests/gemm/gemm_overlap_one_step_f32_out_f16.onnxtxt tests/gemm/gemm_bias_erf_gelu_ragged_bf16.onnxtxt \
           tests/gemm/gemm_three_consumers_residual_ragged_bf16.onnxtxt tests/gemm/gemm_three_consumers_erf_gelu_ragged_bf16.onnxtxt; do
    if o=$(timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda --gemm template --gemm-form streamk 2>&1); then
      echo "CLEAN $m streamk" | tee -a "$log"
    else
      echo "MEMCHECK FAIL $m streamk" | tee -a "$log"; echo "$o" | grep -v '^=========  ' | tail -15 | tee -a "$log"
    fi
  done
fi
if [ -z "${SKIP_TUNE:-}" ]; then
  OUT=$OUT/vit GRAPHS=bench/experiments/vit_gemms ROWS=6304 TUNE_LIMIT=200 bash bench/experiments/small_m_gemms.sh 2>&1 | tee "$OUT/vit.txt"
  [ -n "${GPT2_ROWS:-}" ] && OUT=$OUT/gpt2 GRAPHS=bench/experiments/gpt2_gemms ROWS=$GPT2_ROWS TUNE_LIMIT=200 \
    bash bench/experiments/small_m_gemms.sh 2>&1 | tee "$OUT/gpt2.txt"
fi
if [ -n "${MODELS:-}" ]; then
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  . bench/experiments/template_checks.sh
  torch_frontend_runs $MODELS
fi

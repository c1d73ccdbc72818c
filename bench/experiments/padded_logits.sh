#!/usr/bin/env bash
# The padded logits and the flattened merged heads (2026-12-01): their GEMM graphs checked in
# each template form and under memcheck, the GPU Python tests that cover them, then GPT-2 and
# BERT through torch.compile against torch.compile's own modes, on a machine with a GPU;
# carries build-gpu/bundle.tar.xz. MODELS: "model:dtype:shape,shape ..." for the last step.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/padded-logits-out}
mkdir -p "$OUT"
log="$OUT/checks.log"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-pl}
. bench/experiments/template_checks.sh
for m in tests/gemm/gemm_padded_logits_bf16.onnxtxt tests/gemm/gemm_padded_logits_five_rows_bf16.onnxtxt tests/gemm/gemm_merged_heads_flat_bf16.onnxtxt \
         tests/gemm/gemm_merged_heads_d64_bf16.onnxtxt tests/gemm/gemm_unaligned_vocab_bf16.onnxtxt; do
  check_forms "$m" "" "--gemm-form tail" "--gemm-form pingpong"
done
memcheck tests/gemm/gemm_padded_logits_bf16.onnxtxt
memcheck tests/gemm/gemm_merged_heads_flat_bf16.onnxtxt
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
PYTHONPATH="$X" TILEFUSE_CLI="$B/tilefuse" timeout 300 python3 -m pytest -q python/tests/test_cuda.py -p no:cacheprovider \
  -k "${TESTS:-lm_head or gemm_option or bert_style or f32_linear}" 2>&1 | tail -6 | tee -a "$log"
torch_frontend_runs ${MODELS:-gpt2:bf16:8x512,1x128}

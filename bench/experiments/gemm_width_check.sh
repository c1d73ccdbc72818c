#!/usr/bin/env bash
# The GEMM template's tile widths chosen by rounds of the grid (cuda_gemm_config.cc), on a
# machine with a GPU; carries build-gpu/bundle.tar.xz. Every tests/gemm graph with the
# template against the reference (poisoned outputs), the attention and model checks, then
# GPT-2 and BERT (8x512, 1x128) and ViT (batch 32) against torch.compile in one process each.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gemm-width-out}
mkdir -p "$OUT"
B=build-gpu/bundle; X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 B
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1
ls tests/gemm/*.onnxtxt > "$OUT/jobs.txt"
TILEFUSE_CACHE_DIR=/tmp/tfc-gemm xargs -P 8 -L 1 -a "$OUT/jobs.txt" sh -c \
  'if o=$(timeout 200 "$B/tilefuse" run "$1" --backend cuda --check --strict --gemm template 2>&1); then echo "PASS $1"; else echo "FAIL $1"; echo "$o" | tail -4; fi' check \
  > "$OUT/gemm-checks.log" 2>&1
echo "gemm checks: $(grep -c ^PASS "$OUT/gemm-checks.log") passed, $(grep -c ^FAIL "$OUT/gemm-checks.log") failed"
grep -A4 ^FAIL "$OUT/gemm-checks.log" | head -20
STAGES="checks bench" OUT="$OUT/models" MODELS="${MODELS:-gpt2 bert}" BENCH_SHAPES="8x512 1x128" \
  CHECKS="tests/attention/*.onnxtxt bench/cases/check/*.onnxtxt tests/models/gpt2_2layer tests/models/bert_sdpa tests/models/llama_2layer" \
  bench/experiments/torch_compile_time.sh 2>&1 | tail -12
OUT="$OUT/zoo" RUNS="${RUNS:-vit:bf16:32}" bench/experiments/torch_zoo.sh 2>&1 | tail -3

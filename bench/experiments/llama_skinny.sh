#!/usr/bin/env bash
# Whether a LLaMA-style decode step's products (TinyLlama's shape, one row: gate/up 2048 -> 5632,
# down 5632 -> 2048, o_proj 2048 -> 2048, k/v 2048 -> 256) gain from the skinny template's cluster
# form where the rule does not take it (its one-wave estimate is ~3x conservative at one row, and
# their cluster forms stream somewhat more of B an SM): `tilefuse tune` measures every candidate,
# the memory and the cluster forms, and prints the best against the rule's (GPT-2's MLP beside).
# Usage: bash bench/experiments/llama_skinny.sh BUNDLE_DIR OUT_DIR
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle llama_skinny.log
for f in bench/experiments/llama_skinny/*.onnxtxt tests/gemm/gemm_skinny_gpt2_mlp_decode_bf16.onnxtxt; do
  TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 100 "$B/tilefuse" tune "$f" --backend cuda --budget 40 --json >"$OUT/$(basename "$f" .onnxtxt).json" 2>/dev/null
  TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 100 "$B/tilefuse" tune "$f" --backend cuda --budget 40 2>/dev/null | tail -3 | tee -a "$log"
done

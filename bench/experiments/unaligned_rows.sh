#!/usr/bin/env bash
# Products over a vocabulary whose rows are not 16-byte aligned (GPT-2's 50257), on a machine
# with a GPU: the GEMM template's 16-byte store of unaligned rows and pass pad-gemm-depth's
# shared padding of a transposed left operand, checked against the reference (every form the
# template runs them in, then compute-sanitizer), and the LM heads timed beside PyTorch.
#
#   bench/experiments/unaligned_rows.sh BUNDLE OUT
set -u
B=$1 OUT=$2
source "$(dirname "$0")/template_checks.sh"
mkdir -p "$OUT"
log="$OUT/unaligned-rows.log"
: >"$log"
for m in tests/gemm/gemm_unaligned_vocab*.onnxtxt tests/gemm/gemm_weight_gradient_unaligned*.onnxtxt; do
  check_forms "$m" "" "--gemm-form tail" "--gemm-form pingpong" "--stand-ins"
  memcheck "$m"
done
python3 bench/lm_head.py --write-models /tmp/lm-heads >/dev/null
python3 bench/lm_head.py --models /tmp/lm-heads --tilefuse "$B/tilefuse" --json "$OUT/lm-head.json" 2>&1 | tail -20 | tee -a "$log"

#!/usr/bin/env bash
# GPT-2 small's LM-head products of a training step at 8x512 tokens (bench/experiments/
# lm_head_products/: the forward x·wᵀ over 50257 words, the input gradient g·w and the weight
# gradient gᵀ·x, the logits and their gradient dense with unaligned rows), each as its own graph:
# tilefuse by its rule, in the GEMM forms FORMS names (default "streamk pingpong"), and tuned
# (`tilefuse bench --tune`, the tuner's budget TUNE_BUDGET seconds a kernel, default 40), against
# cuBLAS through torch.mm on the same layouts, in one call on a machine with a GPU; carries
# build-gpu/bundle.tar.xz. In the step (bench/results/2026-12-03-h200-training-graph-attention.md)
# tilefuse's three took 568 + 678 + 494 µs against torch.compile's 449 + 400 + 392.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/lm-head-products-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=/tmp/tfc-lm-head
summary() {  # the bench's JSON as one line: time, rate, and each kernel's strategy
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); f=j['fused']; \
print(sys.argv[2], '%.1f us %.0f TF/s' % (f['ms']*1e3, f['tflops']), ' | '.join('%s %.1f us %s' % (g.get('mode',''), g.get('us', 0), g.get('strategy','')[:100]) for g in j.get('groups', [])))" "$@"
}
for f in bench/experiments/lm_head_products/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)
  for form in rule ${FORMS:-streamk pingpong}; do
    timeout 200 "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --gemm-form "$form" --json > "$OUT/$name-$form.json" 2> "$OUT/$name-$form.err"
    summary "$OUT/$name-$form.json" "$name $form" || tail -2 "$OUT/$name-$form.err"
  done
  TILEFUSE_TUNE_BUDGET=${TUNE_BUDGET:-40} timeout 300 "$B/tilefuse" tune "$f" --backend cuda --budget "${TUNE_BUDGET:-40}" > "$OUT/$name-tune.log" 2>&1
  echo "$name tune (rc $?): $(grep -iE 'best|fastest|winner' "$OUT/$name-tune.log" | head -3 | cut -c1-200)"
  timeout 200 "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --json > "$OUT/$name-tuned.json" 2> "$OUT/$name-tuned.err"
  summary "$OUT/$name-tuned.json" "$name tuned" || tail -2 "$OUT/$name-tuned.err"
done
PYTHONPATH=bench python3 - <<'PY'
import torch
from lm_head import time_us as timed  # (the LM-head bench's timing: device events, median)
M, V, D = 4096, 50257, 768
x = torch.randn(M, D, device="cuda", dtype=torch.bfloat16)
w = torch.randn(V, D, device="cuda", dtype=torch.bfloat16)
g = torch.randn(M, V, device="cuda", dtype=torch.bfloat16)
flops = 2 * M * V * D
for name, fn in (("fwd x·wT", lambda: x @ w.t()), ("dx g·w", lambda: g @ w), ("dw gT·x", lambda: g.t() @ x)):
    us = timed(fn)
    print(f"gpt2_lm {name} cuBLAS {us:.1f} us ({flops / us / 1e6:.0f} TF/s)")
PY

#!/usr/bin/env bash
# GPT-2 small's eight backward products at 8x512 tokens (bench/experiments/gpt2_backward_gemms/:
# each linear's input gradient dy·wᵀ and weight gradient xᵀ·dy, as a training step's backward
# graph has them), each as its own graph: tilefuse's GEMM template by its rule and in the forms
# FORMS names (default "streamk pingpong"; `tilefuse bench --backend cuda`: device events,
# median) against cuBLAS through torch.mm on the same layouts, in one call on a machine with a
# GPU; carries build-gpu/bundle.tar.xz. Where the training step's GPU time goes beside
# torch.compile's: its products (bench/results/2026-12-03-h200-training-graph-attention.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpt2-backward-gemms-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
for f in bench/experiments/gpt2_backward_gemms/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)
  for form in rule ${FORMS:-streamk pingpong}; do
    TILEFUSE_CACHE_DIR=/tmp/tfc-gbg "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --gemm-form "$form" --json \
      > "$OUT/$name-$form.json" 2> "$OUT/$name-$form.err"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); g=j['groups'][0] if j.get('groups') else {}; \
print(sys.argv[2], sys.argv[3], '%.1f us %.0f TF/s' % (j['fused']['ms']*1e3, j['fused']['tflops']), g.get('strategy', '')[:110])" \
      "$OUT/$name-$form.json" "$name" "$form" || tail -2 "$OUT/$name-$form.err"
  done
done
PYTHONPATH=bench python3 - <<'PY'
import torch
from lm_head import time_us as timed  # (the LM-head bench's timing: device events, median)
M = 4096
for name, i, o in [("qkv", 768, 2304), ("proj", 768, 768), ("fc", 768, 3072), ("fc2", 3072, 768)]:
    x, dy = torch.randn(M, i, device="cuda", dtype=torch.bfloat16), torch.randn(M, o, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(i, o, device="cuda", dtype=torch.bfloat16)
    dx, dw = timed(lambda: dy @ w.t()), timed(lambda: x.t() @ dy)
    flops = 2 * M * i * o
    print(f"gpt2_dx_{name} cuBLAS {dx:.1f} us ({flops / dx / 1e6:.0f} TF/s); gpt2_dw_{name} cuBLAS {dw:.1f} us ({flops / dw / 1e6:.0f} TF/s)")
PY

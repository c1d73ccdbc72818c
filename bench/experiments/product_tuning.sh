#!/usr/bin/env bash
# How far the GEMM template's rule is from its own best configuration on a training step's
# products: each graph of FILES (default: GPT-2's LM-head products over an aligned vocabulary,
# bench/experiments/lm_head_aligned/, and its MLP's four backward products) timed by the rule
# (`tilefuse bench`: device events, median), tuned (`tilefuse tune --budget TUNE_BUDGET`, default
# 20 s a kernel: every configuration of the search space it reaches, the best kept in the cache)
# and timed again, against cuBLAS through torch.mm on the same layouts. One call on a machine with
# a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/product-tuning-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=/tmp/tfc-product-tuning
FILES=${FILES:-"bench/experiments/lm_head_aligned/*.onnxtxt bench/experiments/gpt2_backward_gemms/gpt2_d?_fc*.onnxtxt"}
summary() {  # one line: the graph's time and rate, its product's configuration
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); g=(j.get('groups') or [{}])[0]; \
print(sys.argv[2], '%.1f us %.0f TF/s' % (j['fused']['ms']*1e3, j['fused']['tflops']), g.get('strategy', '')[:130])" "$@"
}
for f in $FILES; do
  name=$(basename "$f" .onnxtxt)
  timeout 120 "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --json > "$OUT/$name-rule.json" 2> "$OUT/$name-rule.err"
  summary "$OUT/$name-rule.json" "$name rule " || tail -2 "$OUT/$name-rule.err"
  timeout 240 "$B/tilefuse" tune "$f" --backend cuda --budget "${TUNE_BUDGET:-20}" > "$OUT/$name-tune.log" 2>&1
  grep -E "gemm +[0-9]+ configs" "$OUT/$name-tune.log" | sed "s/^ */$name tune: /" | cut -c1-330
  timeout 120 "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --json > "$OUT/$name-tuned.json" 2> "$OUT/$name-tuned.err"
  summary "$OUT/$name-tuned.json" "$name tuned" || tail -2 "$OUT/$name-tuned.err"
done
PYTHONPATH=bench python3 - <<'PY'
import torch
from lm_head import time_us as timed  # (the LM-head bench's timing: device events, median)
M, V, D = 4096, 50304, 768
x, w, g = (torch.randn(*s, device="cuda", dtype=torch.bfloat16) for s in ((M, D), (V, D), (M, V)))
for name, fn, flops in (("gpt2_lm_fwd_aligned", lambda: x @ w.t(), 2 * M * V * D), ("gpt2_lm_dx_aligned", lambda: g @ w, 2 * M * V * D),
                        ("gpt2_lm_dw_aligned", lambda: g.t() @ x, 2 * M * V * D)):
    us = timed(fn)
    print(f"{name} cuBLAS {us:.1f} us ({flops / us / 1e6:.0f} TF/s)")
for name, i, o in [("fc", 768, 3072), ("fc2", 3072, 768)]:
    x, dy = torch.randn(M, i, device="cuda", dtype=torch.bfloat16), torch.randn(M, o, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(i, o, device="cuda", dtype=torch.bfloat16)
    dx, dw = timed(lambda: dy @ w.t()), timed(lambda: x.t() @ dy)
    flops = 2 * M * i * o
    print(f"gpt2_dx_{name} cuBLAS {dx:.1f} us ({flops / dx / 1e6:.0f} TF/s); gpt2_dw_{name} cuBLAS {dw:.1f} us ({flops / dw / 1e6:.0f} TF/s)")
PY

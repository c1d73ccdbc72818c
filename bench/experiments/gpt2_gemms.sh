#!/usr/bin/env bash
# GPT-2 small's four layer products at 8x512 tokens (bench/experiments/gpt2_gemms/), each as its
# own graph: tilefuse's GEMM template (`tilefuse bench --backend cuda`: the whole CUDA graph,
# device events, median) against PyTorch's cuBLAS product with the same epilogue in eager ops
# (CUDA events, median), in one call on a machine with a GPU; carries build-gpu/bundle.tar.xz.
# TUNE=1 also times each after `tilefuse bench --tune` (the tuner's pick).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpt2-gemms-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
for f in bench/experiments/gpt2_gemms/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)
  TILEFUSE_CACHE_DIR=/tmp/tfc-gg "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); g=j['groups'][0] if j.get('groups') else {}; \
print(sys.argv[2], 'tilefuse %.1f us %.0f TF/s' % (j['fused']['ms']*1e3, j['fused']['tflops']), g.get('strategy', '')[:120])" "$OUT/$name.json" "$name"
  if [ "${TUNE:-0}" = 1 ]; then
    TILEFUSE_CACHE_DIR=/tmp/tfc-gg timeout "${TUNE_LIMIT:-150}" "$B/tilefuse" bench "$f" --backend cuda --repeats 30 --tune --json > "$OUT/$name-tuned.json" 2> "$OUT/$name-tuned.err"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); g=j['groups'][0] if j.get('groups') else {}; \
print(sys.argv[2], 'tuned %.1f us %.0f TF/s' % (j['fused']['ms']*1e3, j['fused']['tflops']), g.get('strategy', '')[:120])" "$OUT/$name-tuned.json" "$name" || tail -3 "$OUT/$name-tuned.err"
  fi
done
python3 - <<'PY'
import statistics, torch
import torch.nn.functional as F
def timed(fn, calls=20, repeats=15):
    for _ in range(3): fn()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(calls): fn()
        e.record(); torch.cuda.synchronize(); times.append(s.elapsed_time(e) * 1e3 / calls)
    return statistics.median(times)
M = 4096
for name, k, n, ep in [("qkv_bias", 768, 2304, "bias"), ("proj_bias_residual", 768, 768, "residual"),
                       ("fc_bias_gelu", 768, 3072, "gelu"), ("fc2_bias_residual", 3072, 768, "residual")]:
    x, w = torch.randn(M, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    b, r = torch.randn(n, device="cuda", dtype=torch.bfloat16), torch.randn(M, n, device="cuda", dtype=torch.bfloat16)
    mm = timed(lambda: torch.addmm(b, x, w))
    whole = {"bias": mm, "residual": timed(lambda: torch.addmm(b, x, w).add_(r)),
             "gelu": timed(lambda: F.gelu(torch.addmm(b, x, w), approximate="tanh"))}[ep]
    print(f"gpt2_{name} cuBLAS addmm {mm:.1f} us ({2 * M * n * k / mm / 1e6:.0f} TF/s), with the epilogue in eager ops {whole:.1f} us")
PY

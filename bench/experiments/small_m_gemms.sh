#!/usr/bin/env bash
# A model's layer products (GRAPHS: bench/experiments/gpt2_gemms/ by default, GPT-2 small's four;
# bench/experiments/llama_gemms/ the LLaMA-style model's) at ROWS tokens (default 128: batch 1): `tilefuse tune` times every GEMM template configuration the search space holds for a
# product with few output tiles (and cuBLASLt's own epilogue where it applies), then the tuned
# pick runs with --check against the reference; PyTorch's cuBLAS product with the same epilogue,
# replayed as a CUDA graph, beside it. DTYPE=f32 runs the graphs in f32 (tilefuse's 3xTF32 under
# the default precision; PyTorch's exact f32, TF32 off). On a machine with a GPU; carries
# build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/small-m-gemms-out}
ROWS=${ROWS:-128}
DTYPE=${DTYPE:-bf16}
mkdir -p "$OUT/graphs"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-small-m}
for f in "${GRAPHS:-bench/experiments/gpt2_gemms}"/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)-$ROWS-$DTYPE
  g="$OUT/graphs/$name.onnxtxt"
  if [ "$DTYPE" = f32 ]; then sed "s/4096/$ROWS/g; s/bfloat16/float/g; s/<to = 16>/<to = 1>/g" "$f" > "$g"
  else sed "s/4096/$ROWS/g" "$f" > "$g"; fi
  echo "$name, the rule's form: $("$B/tilefuse" run "$g" --backend cuda --check 2>&1 | grep -E "^result|error" | head -2)"
  timeout "${TUNE_LIMIT:-150}" "$B/tilefuse" tune "$g" --backend cuda --json > "$OUT/$name-tune.json" 2> "$OUT/$name-tune.err"
  python3 - "$OUT/$name-tune.json" "$name" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for k in report["kernels"]:
    rows = sorted((t for t in k["configs"] if "time_us" in t), key=lambda t: t["time_us"])
    print(f"{sys.argv[2]} {k['name']}: rule {k['default_us']:.2f} us, best {k['best_us']:.2f} us, {len(rows)} timed")
    for t in rows[:int(sys.argv[3]) if len(sys.argv) > 3 else 8]:
        c = t["config"]
        print(f"    {t['time_us']:7.2f} us  " + " ".join(f"{key}={c[key]}" for key in sorted(c) if key not in ("group_m", "promote")))
PY
  echo "$name, the tuner's pick: $("$B/tilefuse" run "$g" --backend cuda --tune --check 2>&1 | grep -E "^result|error" | head -2)"
done
python3 - "$ROWS" "${GRAPHS:-bench/experiments/gpt2_gemms}" "$DTYPE" <<'PY'
import glob, os, re, statistics, sys, torch
import torch.nn.functional as F
def graphed(fn, calls=20, repeats=15):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls): fn()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)
M = int(sys.argv[1])
dtype = torch.float32 if sys.argv[3] == "f32" else torch.bfloat16
torch.backends.cuda.matmul.allow_tf32 = False  # f32 as PyTorch's default precision, "highest"
for path in sorted(glob.glob(os.path.join(sys.argv[2], "*.onnxtxt"))):
    # The graph's own shapes: x [rows, K], w [K, N] (or [N, K] read through a Transpose), a bias
    # b [N] and a residual r where it has them, tanh-GELU where it computes a Tanh.
    text = open(path).read()
    shapes = dict((name, [int(d) for d in dims.split(",")]) for dims, name in
                  re.findall(r"bfloat16\[([0-9,]+)\] (\w+)", text.split("=>")[0]))
    transposed = "Transpose" in text
    k = shapes["x"][1]
    n = shapes["w"][0] if transposed else shapes["w"][1]
    x, w = torch.randn(M, k, device="cuda", dtype=dtype), torch.randn(n, k, device="cuda", dtype=dtype)
    b = torch.randn(n, device="cuda", dtype=dtype) if "b" in shapes else None
    r = torch.randn(M, n, device="cuda", dtype=dtype)
    mm = graphed(lambda: F.linear(x, w, b))
    if "r" in shapes:
        whole = graphed(lambda: F.linear(x, w, b).add_(r))
    elif "Tanh" in text:
        whole = graphed(lambda: F.gelu(F.linear(x, w, b), approximate="tanh"))
    elif "Gelu" in text:  # ONNX's Gelu: erf GELU (nn.GELU's default)
        whole = graphed(lambda: F.gelu(F.linear(x, w, b)))
    else:
        whole = mm
    name = os.path.basename(path)[:-len(".onnxtxt")]
    print(f"{name}-{M}-{sys.argv[3]} cuBLAS (F.linear, CUDA graph) {mm:.2f} us, with the epilogue in eager ops {whole:.2f} us")
PY

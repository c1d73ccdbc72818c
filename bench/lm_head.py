"""LM heads of odd and large vocabularies on the GPU: tilefuse against PyTorch (issue 47).

   python3 bench/lm_head.py --write-models DIR      # the ONNX models (stdlib only)
   python3 bench/lm_head.py --models DIR --tilefuse build/tilefuse [--json FILE]

Each model is logits = x · Wᵀ, x bf16 [M, 768], W bf16 [V, 768] (the tied embedding, as
torch.onnx exports the product: MatMul(x, Transpose(W))). W is an input here, so that the files
stay small; an initializer W is stored K-major at compile time (passes/k_major_weights.h) and
reaches the same kernel. V = 50257 (GPT-2, rows not 16-byte
aligned), 32000 (LLaMA-2), 128256 (LLaMA-3); M = 4096 (8x512) and 128. tilefuse: `tilefuse bench
--backend cuda` (the whole CUDA graph, device events, median). PyTorch, same process as this
script: F.linear eager and torch.compile (default mode, CUDA events, median of 30 after
warm-up); for V = 50257 also the padded weight (N = 50264) and the compact copy Inductor-style
padding needs for dense logits.
"""
import argparse
import json
import os
import subprocess
import sys

VOCABS = (50257, 32000, 128256)
ROWS = (4096, 128)
HIDDEN = 768


def model_text(v, m):
    return f"""<
  ir_version: 8,
  opset_import: ["" : 17]
>
lm_head_{v}_{m} (bfloat16[{m},{HIDDEN}] x, bfloat16[{v},{HIDDEN}] w) => (bfloat16[{m},{v}] logits)
{{
  wt = Transpose <perm = [1, 0]> (w)
  logits = MatMul (x, wt)
}}
"""


def write_models(folder):
    os.makedirs(folder, exist_ok=True)
    for v in VOCABS:
        for m in ROWS:
            with open(os.path.join(folder, f"lm_head_{v}_{m}.onnxtxt"), "w") as f:
                f.write(model_text(v, m))


def time_us(fn, repeats=30):
    import torch
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    return times[len(times) // 2]


def peers(v, m):
    import torch
    import torch.nn.functional as F
    x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(v, HIDDEN, device="cuda", dtype=torch.bfloat16) * 0.036
    out = {"eager": time_us(lambda: F.linear(x, w))}
    compiled = torch.compile(lambda a: F.linear(a, w))
    out["torch.compile"] = time_us(lambda: compiled(x))
    if v % 8:
        padded_n = (v + 7) // 8 * 8
        wp = torch.zeros(padded_n, HIDDEN, device="cuda", dtype=torch.bfloat16)
        wp[:v] = w
        out["padded, strided logits"] = time_us(lambda: F.linear(x, wp))
        out["padded + compact copy"] = time_us(lambda: F.linear(x, wp)[:, :v].contiguous())
    return out


def tilefuse_us(binary, path, *flags):
    """`tilefuse bench --backend cuda` of `path` (with `flags`): the median µs and the report."""
    r = subprocess.run([binary, "bench", path, "--backend", "cuda", "--json", "--repeats", "30", "--warmup", "5", *flags],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:], file=sys.stderr)
        return None, None
    report = json.loads(r.stdout)
    return report["fused"]["ms"] * 1e3, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write-models", metavar="DIR")
    ap.add_argument("--models", metavar="DIR")
    ap.add_argument("--tilefuse", default="build/tilefuse")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    if a.write_models:
        write_models(a.write_models)
        return
    rows = []
    print("| V | M | tilefuse µs | TF/s | eager µs | torch.compile µs | other peers µs | tilefuse / best peer |")
    print("|---|---|---|---|---|---|---|---|")
    for v in VOCABS:
        for m in ROWS:
            path = os.path.join(a.models, f"lm_head_{v}_{m}.onnxtxt")
            ours, report = tilefuse_us(a.tilefuse, path)
            p = peers(v, m)
            flops = 2 * m * HIDDEN * v
            best = min(p["eager"], p["torch.compile"])
            others = ", ".join(f"{k} {t:.1f}" for k, t in p.items() if k not in ("eager", "torch.compile"))
            tf = flops / ours / 1e6 if ours else 0
            ratio = f"{best / ours:.2f}x" if ours else "—"
            strategy = report["groups"][0]["strategy"] if report else ""
            print(f"| {v} | {m} | {ours or 0:.1f} | {tf:.0f} | {p['eager']:.1f} | {p['torch.compile']:.1f} | {others} | {ratio} |", flush=True)
            print(f"  {v}x{m}: {strategy}", file=sys.stderr, flush=True)
            rows.append({"vocab": v, "rows": m, "tilefuse_us": ours, "peers_us": p, "tilefuse_report": report})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

"""BERT-base with symbolic batch and sequence dims: one compiled model for every length.

BERT-base (bert_base below: transformers 4.x's BERT, random weights, positions up to 2048,
bf16) is exported once by torch.onnx.export (the legacy exporter,
opset 17) with dynamic axes {0: batch, 1: sequence} on input_ids, attention_mask and
token_type_ids, as a deployment export has them. Then, at batch BATCH, for each length:

  symbolic   `tilefuse run --shape batch=B,sequence=L` (the kernel cache shared by every
             length, as one compiled model's kernels are): how many kernels this length
             compiled; then `tilefuse bench` at that length: the fused model's median time
             (CUDA graph, device events)
  exact      the same with TILEFUSE_SYMBOLIC_SIZES=0: kernels with this length's sizes in
             their text, what a model compiled for the exact shape runs

First a 2-layer export is checked against the f64 reference (--check --strict) at batch 2
and the check lengths. The issue's bar: every length within 10% of the exact-shape model, and
no compile after the first length except the kernels whose code a length changes.

Usage: python3 bench/dynamic_bert.py TILEFUSE_CLI WORKDIR [--batch 8] [--lengths 100,128,...]
       [--layers 12] [--check-lengths 100,333,1024] [--json OUT.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def bert_base(layers):
    """BERT-base as transformers 4.x writes it (its ONNX exports are what deployments run):
    word, position and token-type embeddings and a layer norm; per layer Q, K, V projections
    to 12 heads of 64, scores / 8 plus the extended padding mask (1 - mask[:, None, None, :])
    * finfo.min, softmax, P·V, the output projection, residual and layer norm, a GELU MLP of
    3072, residual and layer norm. (transformers 5's mask helpers do not export with
    torch.onnx's TorchScript exporter.)"""
    import torch
    from torch import nn

    hidden, heads, inner, vocab = 768, 12, 3072, 30522

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(hidden, eps=1e-12), nn.LayerNorm(hidden, eps=1e-12)
            self.up, self.down = nn.Linear(hidden, inner), nn.Linear(inner, hidden)

        def forward(self, x, mask):
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, heads, hidden // heads).transpose(1, 2)
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / 8.0 + mask
            context = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(b, t, hidden)
            x = self.norm1(x + self.o(context))
            return self.norm2(x + self.down(nn.functional.gelu(self.up(x))))

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.words, self.positions, self.types = nn.Embedding(vocab, hidden), nn.Embedding(2048, hidden), nn.Embedding(2, hidden)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))

        def forward(self, input_ids, attention_mask, token_type_ids):
            positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            x = self.norm(self.words(input_ids) + self.positions(positions) + self.types(token_type_ids))
            mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            for layer in self.layers:
                x = layer(x, mask)
            return x

    torch.manual_seed(0)
    return Bert().to(torch.bfloat16).eval()


def export(path, layers):
    import torch

    model = bert_base(layers)
    ids = torch.randint(0, 30522, (2, 64))
    mask = torch.ones(2, 64, dtype=torch.int64)
    types = torch.zeros(2, 64, dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, types), path, input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                        "last_hidden_state": axes})


def inputs(workdir, batch, length):
    """A folder of input_<i>.pb for `run --inputs`: token ids in the vocabulary, a padding mask whose
    second row keeps its first two thirds, token types 0 then 1 (random integers would index past
    the two token types)."""
    import numpy as np
    from onnx import numpy_helper

    folder = os.path.join(workdir, f"inputs_{batch}x{length}")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(length)
    ids = rng.integers(0, 30522, (batch, length), dtype=np.int64)
    mask = np.ones((batch, length), dtype=np.int64)
    mask[1:, 2 * length // 3:] = 0
    types = np.zeros((batch, length), dtype=np.int64)
    types[:, length // 2:] = 1
    for i, t in enumerate([ids, mask, types]):
        with open(os.path.join(folder, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t).SerializeToString())
    return folder


def tilefuse(cli, args, cache, exact):
    env = dict(os.environ, TILEFUSE_CACHE_DIR=cache)
    if exact:
        env["TILEFUSE_SYMBOLIC_SIZES"] = "0"
    p = subprocess.run([cli] + args, capture_output=True, text=True, env=env, timeout=900)
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        raise RuntimeError(f"tilefuse {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("workdir")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lengths", default="100,128,333,512,1000,2048")
    ap.add_argument("--check-lengths", default="100,333,1024", help="checked on a 2-layer export at batch 2 (the f64 reference is slow)")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)

    def model(layers):
        path = os.path.join(a.workdir, f"bert_base_{layers}l_dynamic_bf16.onnx")
        if not os.path.exists(path):
            export(path, layers)
        return path

    checks = []
    small, cache = model(2), tempfile.mkdtemp(prefix="tilefuse-bert-check-")
    for n in [int(x) for x in a.check_lengths.split(",") if x]:
        run = tilefuse(a.cli, ["run", small, "--backend", "cuda", "--json", "--check", "--strict", "--inputs", inputs(a.workdir, 2, n)], cache, False)
        checks.append({"length": n, "status": run["status"], "compiled": run["jit_compiles"]})
        print(f"check bert-base 2 layers bf16 2x{n}: {run['status']}, {run['jit_compiles']} kernels compiled "
              f"{run.get('error', {}).get('message', '')}", flush=True)

    full, shared = model(a.layers), tempfile.mkdtemp(prefix="tilefuse-bert-cache-")  # one cache: the compiled model's kernels
    rows = []
    print(f"bert-base {a.layers} layers bf16, batch {a.batch}; symbolic dims, one kernel cache for every length, "
          f"against kernels compiled with each length's sizes written in")
    print(f"{'length':>7} {'compiled':>9} {'symbolic ms':>12} {'exact ms':>9} {'ratio':>6}")
    for n in [int(x) for x in a.lengths.split(",")]:
        shape = ["--shape", f"batch={a.batch},sequence={n}"]
        run = tilefuse(a.cli, ["run", full, "--backend", "cuda", "--json"] + shape, shared, False)
        bench_args = ["bench", full, "--backend", "cuda", "--json", "--fused-only", "--repeats", str(a.repeats)] + shape
        symbolic = tilefuse(a.cli, bench_args, shared, False)["fused"]["ms"]
        exact = tilefuse(a.cli, bench_args, tempfile.mkdtemp(prefix="tilefuse-bert-exact-"), True)["fused"]["ms"]
        row = {"length": n, "compiled": run["jit_compiles"], "symbolic_ms": symbolic, "exact_ms": exact, "ratio": symbolic / exact}
        rows.append(row)
        print(f"{n:>7} {row['compiled']:>9} {symbolic:>12.3f} {exact:>9.3f} {row['ratio']:>6.3f}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": f"bert-base {a.layers} layers bf16 (random weights), torch.onnx.export legacy opset 17, "
                                "dynamic batch and sequence", "batch": a.batch, "checks": checks, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

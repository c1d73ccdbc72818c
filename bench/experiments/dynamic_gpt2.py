"""GPT-2 small (random weights, bf16) through torch.compile(backend="tilefuse", dynamic=True) at
several sequence lengths: each new length's first call (seconds), the kernels its specialization
compiled (those not found in the kernel cache), its error against eager and its steady time.
On a machine with a GPU: PYTHONPATH=<extension> python3 bench/experiments/dynamic_gpt2.py"""

import argparse
import logging
import time

import torch
import transformers

import tilefuse.torch_backend


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lengths", default="128,256,384,512,200,1000,1024")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config()).cuda().to(torch.bfloat16).eval()
    compiled = torch.compile(model, backend="tilefuse", dynamic=True)
    seen = set()
    with torch.no_grad():
        for length in (int(n) for n in args.lengths.split(",")):
            ids = torch.randint(0, 50257, (args.batch, length), device="cuda")
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = compiled(ids).logits
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            made = [s for g in tilefuse.torch_backend._live_graphs() for s in g.compiled.values()
                    if s is not None and id(s) not in seen]
            seen.update(id(s) for s in made)
            ref = model(ids).logits.float()
            error = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            for _ in range(3):
                compiled(ids)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(10):
                compiled(ids)
            torch.cuda.synchronize()
            steady = (time.perf_counter() - start) / 10
            print(f"gpt2 bf16 {args.batch}x{length}: first call {first:.2f} s, {len(made)} new specializations, "
                  f"{sum(s.jit_compiles for s in made)} kernels compiled, symbols "
                  f"{[dict(s.symbols) for s in made]}, error {error:.4f} of scale, {1e3 * steady:.2f} ms a call", flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One training step (forward, loss, backward) of transformers' GPT-2 small, random weights, through
torch.compile(backend="tilefuse") with the backward graph in PyTorch (the default) and through
tilefuse (options={"backward": "tilefuse"}), beside eager (and with --inductor torch.compile's own
backend), in one process: the step's time (CUDA
events, median), the first step's time, and the gradients' error to eager's relative to their scale.

    python3 bench/torch_training.py --shape 8x512 --dtype bf16 --json out.json
"""
import argparse
import json
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", default="8x512")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backward", action="append", default=[], help="pytorch and/or tilefuse (default both)")
    parser.add_argument("--inductor", action="store_true", help="also time torch.compile's default backend (the peer)")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import transformers
    import tilefuse.torch_backend  # noqa: F401

    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    batch, seq = (int(v) for v in args.shape.split("x"))
    torch.manual_seed(0)
    ids = torch.randint(0, 50257, (batch, seq), device="cuda")
    projection = torch.randn(batch, seq, 50257, device="cuda", dtype=dtype)

    def step(model):
        model.zero_grad(set_to_none=True)
        (model(ids, use_cache=False).logits * projection).float().mean().backward()

    def timed(model):
        for _ in range(2):
            step(model)
        torch.cuda.synchronize()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(model)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        return statistics.median(times)

    config = transformers.GPT2Config(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    reference = transformers.GPT2LMHeadModel(config).to("cuda", dtype).train()
    step(reference)
    expected = {n: p.grad.float().clone() for n, p in reference.named_parameters()}
    row = {"shape": args.shape, "dtype": args.dtype, "device": torch.cuda.get_device_name(), "eager_us": timed(reference)}
    for backward in args.backward or ["pytorch", "tilefuse"]:
        torch._dynamo.reset()
        model = transformers.GPT2LMHeadModel(config).to("cuda", dtype).train()
        model.load_state_dict(reference.state_dict())
        compiled = torch.compile(model, backend="tilefuse", options={"backward": backward})
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(compiled)
        torch.cuda.synchronize()
        row[f"tilefuse_bw_{backward}_first_step_s"] = time.perf_counter() - start
        row[f"tilefuse_bw_{backward}_error_to_scale"] = max(
            ((p.grad.float() - expected[n]).abs().max() / expected[n].abs().max().clamp_min(1e-30)).item()
            for n, p in model.named_parameters())
        row[f"tilefuse_bw_{backward}_us"] = timed(compiled)
        print(json.dumps(row), flush=True)
    if args.inductor:  # the peer: torch.compile's default backend, in the same process
        torch._dynamo.reset()
        model = transformers.GPT2LMHeadModel(config).to("cuda", dtype).train()
        model.load_state_dict(reference.state_dict())
        compiled = torch.compile(model)
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(compiled)
        torch.cuda.synchronize()
        row["inductor_first_step_s"] = time.perf_counter() - start
        row["inductor_us"] = timed(compiled)
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([row], f, indent=1)


if __name__ == "__main__":
    main()

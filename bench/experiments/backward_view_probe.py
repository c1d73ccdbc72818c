#!/usr/bin/env python3
"""A training step of transformers' GPT-2 small through torch.compile(backend="tilefuse") with
the backward in PyTorch, on a machine with a GPU: where the backward graph fails, its line and
the shapes and strides of the tensors that line reads (a layout tilefuse's forward returned
that the backward's views did not expect).

    PYTHONPATH=... python3 bench/experiments/backward_view_probe.py --shape 2x128
"""
import argparse
import linecache
import re
import sys
import traceback

import torch
import transformers

import tilefuse.torch_backend  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--shape", default="2x128")
parser.add_argument("--backward", default="pytorch")
args = parser.parse_args()
batch, seq = (int(v) for v in args.shape.split("x"))
torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
model = transformers.GPT2LMHeadModel(config).to("cuda", torch.bfloat16).train()
ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
compiled = torch.compile(model, backend="tilefuse", options={"backward": args.backward})
try:
    compiled(ids, use_cache=False).logits.float().square().mean().backward()
    torch.cuda.synchronize()
    print("the step ran")
except RuntimeError as error:
    tb = error.__traceback__
    frames = [(f, n) for f, n in traceback.walk_tb(tb) if f.f_code.co_filename.startswith("<eval_with_key>")]
    if not frames:
        raise
    frame, line = frames[-1]
    text = linecache.getline(frame.f_code.co_filename, line).strip()
    print(f"failed: {error}\n  line {line}: {text}")
    for name in sorted(set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text))):
        value = frame.f_locals.get(name)
        if isinstance(value, torch.Tensor):
            print(f"  {name}: {tuple(value.shape)} strides {value.stride()} {value.dtype}")
    for number in range(max(1, line - 12), line):
        print(f"  {number}: {linecache.getline(frame.f_code.co_filename, number).rstrip()[:200]}")
    sys.exit(1)

#!/usr/bin/env python3
"""The CUDA plan of a model's inference forward through torch.compile(backend="tilefuse"), built on a
machine without a GPU: the forward runs on the CPU in PyTorch (the graph refused after it is
captured), then the captured graph is translated with its weights as a GPU takes them (inputs,
but for those folding computes with: a convolution's) and built for sm_90a (NVRTC, no GPU), its kernels listed with their mode and strategy. What runs how
before spending GPU time on it. Models as bench/torch_frontend.py builds them.

    PYTHONPATH=build/python python3 bench/experiments/inference_cuda_plan.py --model bert --dtype f32 --shape 1x128
"""
import argparse
import collections
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import torch_frontend  # noqa: E402
import tilefuse.torch_backend as backend  # noqa: E402
from tilefuse import _tilefuse  # noqa: E402
from tilefuse.fx import Unsupported, folded_weights, translate  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="llama")
parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
parser.add_argument("--shape", default="1x128")
parser.add_argument("--dump", default="", help="the compile stages into DIR (--dump-dir's files)")
parser.add_argument("--conv-tf32", action="store_true",
                    help="f32 convolutions as on a GPU under torch.backends.cudnn.allow_tf32 (tilefuse.fx.nn)")
parser.add_argument("--dynamic", action="store_true",
                    help="torch.compile(dynamic=True): Dynamo's symbolic sizes reach the graph (diff two shapes' --dump kernels.cu "
                         "to see which kernels still hold the shape)")
parser.add_argument("--grep", default="", help="list only kernels whose strategy or name holds this")
args = parser.parse_args()
model, vocab = torch_frontend.build_model(args.model, torch, transformers)
dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
model = model.to(dtype).eval()
ids = torch_frontend.model_input(torch, args.model, args.shape, vocab, dtype, device="cpu")
captured = []


def spy(self, gm, call_args, weights, settings, *more):  # more: all_weights, row_major_outputs
    all_weights = more[0] if more else weights
    captured.append((gm, list(call_args), folded_weights(gm, set(all_weights), "inputs"), more[1] if len(more) > 1 else frozenset()))
    raise Unsupported("captured for the experiment")


backend._Specialization.__init__ = spy
with torch.no_grad():
    torch.compile(model, backend="tilefuse", dynamic=args.dynamic or None)(ids)
if args.conv_tf32:
    import tilefuse.fx.nn as fx_nn
    fx_nn._convolution_tf32 = lambda ctx: torch.backends.cudnn.allow_tf32
for i, (gm, call_args, folded, row_major_outputs) in enumerate(captured):
    translation = translate(gm, call_args, folded, row_major_outputs)
    kernels = _tilefuse.build_graph_for_cuda_arch(translation.graph, dump_dir=args.dump)
    modes = collections.Counter(k["mode"] for k in kernels)
    print(f"== graph {i}: {len(gm.graph.nodes)} FX nodes, {len(kernels)} launches {dict(modes)}")
    for k in kernels:
        if args.grep and args.grep not in k["strategy"] and args.grep not in k["name"]:
            continue
        print(f"  {k['name']:<30} {k['mode']:<16} regs {k['registers']:3d} spills {k['spill_bytes']:5d}  {k['strategy'][:160]}"
              + (f"  [{k['why_host']}]" if k["why_host"] else ""))

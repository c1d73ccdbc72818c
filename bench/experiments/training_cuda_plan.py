#!/usr/bin/env python3
"""The CUDA plan of each graph a GPT-2 small (or LLaMA-style: --model llama) training step hands tilefuse, built on a machine
without a GPU: the step runs on the CPU in PyTorch (every graph refused after it is captured),
then each captured graph is translated and built for sm_90a (NVRTC, no GPU) and its kernels
listed with their mode and strategy. Which products of the backward run how, before spending
GPU time on them.

    PYTHONPATH=build/python python3 bench/experiments/training_cuda_plan.py --shape 2x512
"""
import argparse
import collections

import torch
import transformers

import tilefuse.torch_backend as backend
from tilefuse import _tilefuse
from tilefuse.fx import Unsupported, translate

parser = argparse.ArgumentParser()
parser.add_argument("--shape", default="2x512")
parser.add_argument("--model", default="gpt2", choices=["gpt2", "llama"],
                    help="llama: bench/torch_training.py's LLaMA-style model (grouped-query attention, SwiGLU, RMSNorm)")
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--graphs", default="", help="only these graphs (comma-separated indices)")
parser.add_argument("--dump", default="", help="each graph's compile stages into DIR/graph<i> (--dump-dir's files)")
parser.add_argument("--stand-ins", action="store_true")
parser.add_argument("--split-attention", action="store_true",
                    help="the CPU attention split out as the GPU's is (its logsumexp not computed): the GPU's parts")
parser.add_argument("--gpu-forward", action="store_true",
                    help="the CPU attention's forward written as the GPU's cuDNN call is (its logsumexp from the softmax's "
                         "reductions, tilefuse.fx.attention.attention_saving_logsumexp): the GPU forward graph's plan")
parser.add_argument("--saved-row-major", action="store_true",
                    help="the backward graphs' arguments row-major, as tilefuse's forward writes what only the backward reads "
                         "(the step here runs in PyTorch, whose saved tensors keep eager's layouts)")
args = parser.parse_args()
batch, seq = (int(v) for v in args.shape.split("x"))
torch.manual_seed(0)
if args.model == "gpt2":
    config = transformers.GPT2Config(n_layer=args.layers, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(config).to(torch.bfloat16).train()
else:
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=args.layers,
                                      num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
                                      attention_dropout=0.0)
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16).train()
ids = torch.randint(0, config.vocab_size, (batch, seq))
captured = []


def spy(self, gm, call_args, weights, settings, *more):  # more: all_weights, row_major_outputs
    captured.append((gm, list(call_args), weights, more[1] if len(more) > 1 else frozenset()))
    raise Unsupported("captured for the experiment")


backend._Specialization.__init__ = spy
if args.split_attention:
    from tilefuse.fx import attention
    attention.sdpa_flash_cpu.why_not = lambda node: "split out as the GPU's is"
if args.gpu_forward:
    from tilefuse.fx import HANDLERS
    from tilefuse.fx import attention as fx_attention

    def as_on_gpu(ctx, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
        return fx_attention._saving_logsumexp(ctx, q, k, v, attn_mask, dropout_p, is_causal, scale, ctx.shape_of(q)[:3])[:2]

    HANDLERS["aten._scaled_dot_product_flash_attention_for_cpu.default"] = as_on_gpu
    from tilefuse.fx import attention_backward  # its saved operands row-major, as the GPU call's

    attention_backward.ANY_LAYOUT = attention_backward.ANY_LAYOUT | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
compiled = torch.compile(model, backend="tilefuse", options={"backward": "tilefuse"})
compiled(ids, use_cache=False).logits.float().square().mean().backward()
for i, (gm, call_args, weights, row_major_outputs) in enumerate(captured):
    if args.graphs and str(i) not in args.graphs.split(","):
        continue
    if args.saved_row_major and any(n.op == "placeholder" and n.name.startswith("tangents") for n in gm.graph.nodes):
        call_args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in call_args]
    try:
        translation = translate(gm, call_args, weights, row_major_outputs)
    except Exception as error:  # noqa: BLE001
        print(f"== graph {i}: not translated: {error}")
        continue
    kernels = _tilefuse.build_graph_for_cuda_arch(translation.graph, stand_ins=args.stand_ins,
                                                  dump_dir=f"{args.dump}/graph{i}" if args.dump else "")
    modes = collections.Counter(k["mode"] for k in kernels)
    shapes = [tuple(a.shape) for a in translation.inputs(call_args)][:1]
    print(f"== graph {i}: {len(gm.graph.nodes)} FX nodes, first input {shapes}, {len(kernels)} kernels {dict(modes)}")
    for k in kernels:
        print(f"  {k['name']:<34} {k['mode']:<16} regs {k['registers']:3d} spills {k['spill_bytes']:5d}  "
              f"nvrtc {k['nvrtc_ms']:5.0f} ms  {k['strategy'][:200]}")

"""Exports the small real models tilefuse must import and match, in the ONNX
backend-test layout: NAME/model.onnx + NAME/test_data_set_0/{input,output}_i.pb.

Run on the GPU machine (it has PyTorch, transformers, onnx and onnxruntime):
    python3 tests/models/export_models.py OUT_DIR
Weights are random (fixed seed); expected outputs come from onnxruntime, an
implementation independent of tilefuse. Shapes are static.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import numpy_helper

torch.manual_seed(0)
OPSET = 17


class MlpBlock(torch.nn.Module):
    def __init__(self, d=64, hidden=256):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, hidden)
        self.down = torch.nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln(x))))


class AttentionBlock(torch.nn.Module):
    """Pre-LayerNorm causal self-attention written by hand (matmul, mask, softmax)."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return x + self.proj(y.transpose(1, 2).reshape(b, t, d))


class LogitsOnly(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                     attn_implementation="eager")
    return LogitsOnly(GPT2LMHeadModel(cfg)).eval()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager")
    return LogitsOnly(LlamaForCausalLM(cfg)).eval()


def export(name, model, inputs, input_names, out_dir):
    folder = os.path.join(out_dir, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    with torch.no_grad():
        try:
            torch.onnx.export(model, inputs, path, input_names=input_names, output_names=["output"],
                              opset_version=OPSET, dynamo=False)
        except Exception as e:  # the legacy exporter may be gone: use the dynamo one
            print(f"{name}: legacy exporter failed ({type(e).__name__}: {e}); trying dynamo", flush=True)
            torch.onnx.export(model, inputs, path, input_names=input_names, output_names=["output"],
                              opset_version=18, dynamo=True, external_data=False)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    feeds = {n: t.numpy() for n, t in zip(input_names, inputs)}
    outs = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (n, t) in enumerate(feeds.items()):
        onnx.save_tensor(numpy_helper.from_array(t, n), os.path.join(folder, "test_data_set_0", f"input_{i}.pb"))
    for i, (o, out) in enumerate(zip(m.graph.output, outs)):
        onnx.save_tensor(numpy_helper.from_array(out, o.name),
                         os.path.join(folder, "test_data_set_0", f"output_{i}.pb"))
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"{name}: opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, ops {ops}", flush=True)


def main():
    out_dir = sys.argv[1]
    x = torch.randn(2, 16, 64)
    ids = torch.randint(0, 128, (1, 16), dtype=torch.int64)
    export("mlp_block", MlpBlock().eval(), (x,), ["x"], out_dir)
    export("attention_block", AttentionBlock().eval(), (x,), ["x"], out_dir)
    for name, make in (("gpt2_2layer", gpt2), ("llama_2layer", llama)):
        try:
            export(name, make(), (ids,), ["input_ids"], out_dir)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {e}", flush=True)


if __name__ == "__main__":
    main()

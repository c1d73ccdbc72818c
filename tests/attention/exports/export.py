#!/usr/bin/env python3
"""Exports the attention forms real models have, small, with random weights, as bf16 ONNX:
transformers' GPT-2 (causal, fused QKV projection), BERT (bidirectional, padding-mask path) and
LLaMA (causal, rotary embeddings, grouped-query attention: 4 query heads over 2 K/V heads), one
layer each, head dim 64, 512 tokens, from both torch.onnx exporters (the legacy TorchScript one at
opset 17 and the torch.export-based one at opset 18).

tilefuse must match every one of them as one attention group that the GPU attention template
takes (causal ones with their masked key blocks proven): CudaAttentionExportsTest checks that on
any machine, CudaProgramTest compiles them for sm_90a, and scripts/gpu-check.sh runs them on the
GPU against the reference.

Needs torch and transformers (written with torch 2.15, transformers 5.23; no downloads: the
configs are built here). Run from this folder:  python3 export.py
"""
import torch
import transformers

TOKENS = 512
VOCAB = 512


def patch_for_legacy_export():
    # transformers 5 looks for packed sequences with torch.diff, which the TorchScript
    # exporter cannot trace; with one sequence per row the answer is "none".
    import transformers.masking_utils as mu
    if hasattr(mu, "find_packed_sequence_indices"):
        mu.find_packed_sequence_indices = lambda position_ids: None


def make(name):
    if name == "bert":
        cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=256, attn_implementation="eager")
        return transformers.BertModel(cfg, add_pooling_layer=False), False
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=1, n_head=2, n_positions=1024,
                                      attn_implementation="eager")
        return transformers.GPT2LMHeadModel(cfg), True
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                                   attn_implementation="eager")
    return transformers.LlamaForCausalLM(cfg), True


class Wrapper(torch.nn.Module):
    def __init__(self, model, causal_lm):
        super().__init__()
        self.model, self.causal_lm = model, causal_lm

    def forward(self, input_ids):
        if self.causal_lm:
            return self.model(input_ids=input_ids, use_cache=False, return_dict=False)[0]
        return self.model(input_ids=input_ids, return_dict=False)[0]


def main():
    patch_for_legacy_export()
    for name in ("gpt2", "bert", "llama"):
        torch.manual_seed(0)
        model, causal_lm = make(name)
        wrapped = Wrapper(model.to(torch.bfloat16).eval(), causal_lm).eval()
        ids = torch.randint(0, VOCAB, (1, TOKENS))
        with torch.no_grad():
            torch.onnx.export(wrapped, (ids,), f"{name}_legacy_bf16.onnx", input_names=["input_ids"], output_names=["output"],
                              opset_version=17, dynamo=False, do_constant_folding=True)
            torch.onnx.export(wrapped, (ids,), f"{name}_dynamo_bf16.onnx", input_names=["input_ids"], output_names=["output"],
                              opset_version=18, dynamo=True, external_data=False)
        print("exported", name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a training step through tilefuse first gives NaN: each tilefuse graph's (and split
part's) outputs checked after its run, in call order, the first with a NaN named with its input
shapes and its kernels' modes; then the same step with products on cuBLASLt (gemm="library").

    python3 bench/experiments/training_nan_probe.py [--layers 2]
"""
import argparse

import torch
import transformers

import tilefuse.torch_backend as backend


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=args.layers,
                                      num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
                                      attention_dropout=0.0)
    torch.manual_seed(0)
    reference = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16).train()
    ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")
    projection = torch.randn(8, 512, config.vocab_size, device="cuda", dtype=torch.bfloat16)
    reference.zero_grad(set_to_none=True)
    (reference(ids, use_cache=False).logits * projection).float().mean().backward()
    expected = {n: p.grad.float() for n, p in reference.named_parameters()}
    run = backend.TilefuseGraph.__call__
    for gemm in ("auto", "library"):
        torch._dynamo.reset()
        model = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16).train()
        model.load_state_dict(reference.state_dict())
        compiled = torch.compile(model, backend="tilefuse", options={"gemm": gemm})
        found = []

        def checked(self, call_args):
            outputs = run(self, call_args)
            if self.split is None and not found:
                for i, o in enumerate(outputs):
                    if isinstance(o, torch.Tensor) and o.is_floating_point() and not torch.isfinite(o).all():
                        bad_inputs = [j for j, a in enumerate(call_args) if isinstance(a, torch.Tensor) and
                                      a.is_floating_point() and not torch.isfinite(a).all()]
                        spec = next((s for s in self.compiled.values() if s is not None), None)
                        found.append((i, tuple(o.shape), bad_inputs, spec))
                        break
            return outputs

        backend.TilefuseGraph.__call__ = checked
        try:
            for _ in range(2):
                model.zero_grad(set_to_none=True)
                (compiled(ids, use_cache=False).logits * projection).float().mean().backward()
            torch.cuda.synchronize()
        finally:
            backend.TilefuseGraph.__call__ = run
        bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
        print(f"gemm={gemm}: {len(bad)} gradients with NaN or inf ({bad[:3]})")
        errors = sorted(((((p.grad.float() - expected[n]).abs().max() / expected[n].abs().max().clamp_min(1e-30)).item(), n)
                         for n, p in model.named_parameters()), reverse=True)
        print(f"  worst gradients (error to scale, eager bf16 the reference): {errors[:4]}")
        if found:
            i, shape, bad_inputs, spec = found[0]
            print(f"  first non-finite output: output {i} {shape} of a graph of inputs {spec.input_shapes[:6] if spec else '?'}; "
                  f"non-finite inputs: {bad_inputs}")
            if spec is not None:
                for k in spec.model.kernels:
                    print(f"    {k.name}: {k.mode}: {k.strategy[:150]}")


if __name__ == "__main__":
    main()

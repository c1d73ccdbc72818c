#!/usr/bin/env python3
"""Where a training step through tilefuse first gives NaN: each tilefuse graph's (and split
part's) outputs checked after its run, in call order, the first with a NaN named with its input
shapes and its kernels' modes; then the same step with products on cuBLASLt (gemm="library").

    python3 bench/experiments/training_nan_probe.py [--layers 2]
    python3 bench/experiments/training_nan_probe.py --errors   # each graph against PyTorch running it

--errors: each tilefuse graph's outputs against the same ATen graph run by PyTorch on the same
arguments; the first graph whose error to scale passes 0.1 is named with its plan's kernels,
and compiled again unfused (fuse=False) to tell a fusion's error from an op's.
"""
import argparse

import torch
import transformers

import tilefuse.torch_backend as backend


_save_dir = ""


def _to_cpu(a):
    if isinstance(a, (list, tuple)):
        return type(a)(_to_cpu(x) for x in a)
    return a.cpu() if isinstance(a, torch.Tensor) else a


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--errors", action="store_true")
    parser.add_argument("--save", default="", help="--errors: save the first wrong graph and its arguments in this folder")
    args = parser.parse_args()
    global _save_dir
    _save_dir = args.save
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
    if args.errors:
        return errors_by_graph(config, reference, ids, projection, run)
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


VIEWS = {"view", "_unsafe_view", "reshape", "transpose", "t", "permute", "expand", "unsqueeze", "squeeze", "slice",
         "select", "alias", "clone", "as_strided"}


def first_wrong_node(graph, call_args, error, views=True):
    """The graph again, unfused, with every tensor its ATen nodes compute made an output (views
    too, or not: then chains of views still compose into their readers' indexing): the first
    node (in graph order) whose value is off names the op tilefuse computes wrongly."""
    import copy

    gm = copy.deepcopy(graph.gm)
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)
             and (views or getattr(n.target, "__name__", "").split(".")[0] not in VIEWS)]
    print(f"  {len(nodes)} nodes made outputs{'' if views else ' (views left inside)'}")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.args = (tuple(nodes),)
    gm.recompile()
    expected = backend._as_list(gm(*call_args))
    spec = backend._Specialization(gm, call_args, graph.folded, dict(graph.settings, fuse=False), graph.weights)
    got = spec.run(call_args)
    shown = 0
    for node, o, e in zip(nodes, got, expected):
        if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 0:
            err = error(o, e)
            if not err <= 0.05:
                args = ", ".join(str(a) for a in node.args)[:200]
                print(f"  node {node.name} = {node.target}({args}): error to scale {err:.3g}, "
                      f"got {tuple(o.shape)} {o.stride()}, eager {tuple(e.shape)} {e.stride()}")
                for chain in _inputs_chain(node):
                    print(f"      {chain}")
                shown += 1
                if shown == 6:
                    break
    for n in gm.graph.nodes:
        if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.Tensor):
            v = n.meta["val"]
            print(f"  input {n.name}: traced {tuple(v.shape)} {v.stride()}")
    for i, a in enumerate(call_args):
        items = a if isinstance(a, (list, tuple)) else [a]
        print(f"  argument {i}: " + "; ".join(f"{tuple(t.shape)} {t.stride()}" for t in items if isinstance(t, torch.Tensor)))


def _inputs_chain(node, depth=0, seen=None):
    """The node's inputs back through views, for the report."""
    seen = set() if seen is None else seen
    lines = []
    for a in node.all_input_nodes:
        if a in seen or depth > 6:
            continue
        seen.add(a)
        v = a.meta.get("val")
        shape = f"{tuple(v.shape)} {v.stride()}" if isinstance(v, torch.Tensor) else ""
        lines.append("  " * depth + f"{a.name} = {a.target}({', '.join(str(x) for x in a.args)[:160]}) {shape}")
        if a.op == "call_function" and getattr(a.target, "__name__", "").split(".")[0] in VIEWS:
            lines += _inputs_chain(a, depth + 1, seen)
    return lines


def errors_by_graph(config, reference, ids, projection, run):
    torch._dynamo.reset()
    model = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16).train()
    model.load_state_dict(reference.state_dict())
    compiled = torch.compile(model, backend="tilefuse")
    reported = []

    def error(got, want):
        scale = want.float().abs().max().clamp_min(1e-30)
        return ((got.float() - want.float()).abs().max() / scale).item()

    def checked(self, call_args):
        outputs = run(self, call_args)
        if self.split is not None or reported:
            return outputs
        expected = backend._as_list(self.gm(*call_args))
        errors = [(error(o, e), i) for i, (o, e) in enumerate(zip(outputs, expected))
                  if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 0]
        worst = max(errors, default=(0.0, -1))
        if worst[0] > 0.1:
            spec = next((s for s in self.compiled.values() if s is not None), None)
            names = [n.name for n in self.gm.graph.nodes if n.op == "output"]
            print(f"first graph off: output {worst[1]} error to scale {worst[0]:.3g}; outputs' errors "
                  f"{[round(e, 3) for e, _ in errors]}; inputs {spec.input_shapes if spec else '?'}")
            for k in spec.model.kernels if spec else []:
                print(f"    {k.name}: {k.mode}: {k.strategy[:120]}")
            unfused = backend._Specialization(self.gm, call_args, self.folded, dict(self.settings, fuse=False), self.weights)
            again = unfused.run(call_args)
            print(f"  unfused: outputs' errors {[round(error(o, e), 3) for o, e in zip(again, expected) if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel() > 0]}")
            first_wrong_node(self, call_args, error, views=False)
            if _save_dir:
                torch.save({"gm": self.gm, "args": [_to_cpu(a) for a in call_args], "folded": self.folded,
                            "weights": self.weights}, f"{_save_dir}/wrong_graph.pt")
                with open(f"{_save_dir}/wrong_graph.py", "w") as f:
                    f.write(self.gm.print_readable(print_output=False))
                from tilefuse import _tilefuse
                from tilefuse.fx import translate
                graph = translate(self.gm, call_args, self.folded).graph
                _tilefuse.compile_graph(graph, "cuda", False, False, 0, False, f"{_save_dir}/unfused")
            reported.append(True)
        return outputs

    backend.TilefuseGraph.__call__ = checked
    try:
        model.zero_grad(set_to_none=True)
        (compiled(ids, use_cache=False).logits * projection).float().mean().backward()
        torch.cuda.synchronize()
    finally:
        backend.TilefuseGraph.__call__ = run
    if not reported:
        print("no graph's outputs are off by more than 0.1 of their scale")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where does a training backward graph go wrong on the GPU? (The torch backend refuses
backward="tilefuse" on the GPU: GPT-2's gradients came out wrong there, right on the CPU.)

Captures the ATen backward graphs of a small transformers GPT-2 step through AOTAutograd, with
the inputs of their first call, and runs each through tilefuse on the GPU (fused and unfused)
and on the CPU, against the graph run eagerly by PyTorch on the same inputs. For a wrong output
it then bisects the graph's nodes: the first node whose value, made the graph's only output,
already disagrees with eager.

    PYTHONPATH=<tilefuse package> python3 bench/experiments/backward_gpu_probe.py [--attention eager|sdpa]
"""
import argparse
import copy
import os
import sys

import torch
import torch.fx
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func

import tilefuse.torch_backend as tb


def error(out, ref):
    """max |out - ref| over max |ref| (NaN where out has NaN and ref does not)."""
    out, ref = out.detach().double().cpu(), ref.detach().double().cpu()
    if out.shape != ref.shape:
        return float("inf")
    if torch.isnan(out).any() and not torch.isnan(ref).any():
        return float("nan")
    scale = ref.abs().max().item() or 1.0
    return (out - ref).abs().max().item() / scale


def run_tilefuse(gm, args, backend, fuse):
    settings = dict(tb._DEFAULT_OPTIONS, backend=backend, fuse=fuse, strict=False)
    graph = tb.TilefuseGraph(gm, set(), settings)
    moved = [a.to("cpu" if backend == "cpu" else "cuda") if isinstance(a, torch.Tensor) else a for a in args]
    outs = graph(moved)
    return outs, graph


def only_output(gm, node_name):
    """A copy of `gm` whose single output is node `node_name`'s value."""
    g = copy.deepcopy(gm)
    target = next(n for n in g.graph.nodes if n.name == node_name)
    out = next(n for n in g.graph.nodes if n.op == "output")
    out.args = ((target,),)
    g.graph.eliminate_dead_code()
    g.recompile()
    return g


def bisect(gm, args, tolerance, backend, fuse=False):
    nodes = [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)
             and n.meta["val"].dtype.is_floating_point]
    lo, hi = 0, len(nodes) - 1  # invariant: nodes[hi] is wrong; find the first wrong
    def wrong(i):
        sub = only_output(gm, nodes[i].name)
        ref = sub(*args)[0] if isinstance(sub(*args), (list, tuple)) else sub(*args)
        outs, _ = run_tilefuse(sub, args, backend, fuse)
        e = error(outs[0], ref)
        print(f"    node {i} {nodes[i].name} ({nodes[i].target}): error {e:.3g}", flush=True)
        return not (e <= tolerance)
    if not wrong(hi):
        print("    the last node is right alone: the error needs the whole graph", flush=True)
        return
    while lo < hi:
        mid = (lo + hi) // 2
        if wrong(mid):
            hi = mid
        else:
            lo = mid + 1
    n = nodes[lo]
    print(f"  first wrong node: {n.name} = {n.target}({', '.join(str(a) for a in n.args)})", flush=True)
    for a in n.args:
        if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor):
            v = a.meta["val"]
            print(f"    input {a.name}: {tuple(v.shape)} {v.dtype} stride {v.stride()} ({a.target})", flush=True)


def dump(captured, options):
    from tilefuse import _tilefuse
    from tilefuse.fx import translate
    number, node, folder = int(options.dump[0]), options.dump[1], options.dump[2]
    gm, args = captured[number]
    sub = only_output(gm, node)
    ref = sub(*args)[0]
    target = "cuda" if options.device == "cuda" else "cpu"
    for fuse in (False, True):
        translation = translate(sub, args, set())
        graph = _tilefuse.compile_graph(translation.graph, target, False, fuse, 0, False,
                                        dump_dir=f"{folder}-{'fused' if fuse else 'unfused'}")
        model = tb._wrap(graph, "probe")
        inputs = translation.inputs(args)
        out = model(*inputs)[0]
        again = model(*[t.contiguous().clone() for t in inputs])[0]
        for i, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and not t.is_contiguous():
                print(f"  input {i}: {tuple(t.shape)} stride {t.stride()} offset {t.storage_offset()} (not contiguous)", flush=True)
        last = ref.shape[-1]
        parts = [error(out[..., i * last // 6:(i + 1) * last // 6], ref[..., i * last // 6:(i + 1) * last // 6]) for i in range(6)]
        print(f"{node} fuse={fuse}: error {error(out, ref):.3g}, per sixth of the last axis {[f'{e:.2g}' for e in parts]}, "
              f"inputs made contiguous first: {error(again, ref):.2g}", flush=True)
        for k in model.kernels:
            print(f"  {k}", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--attention", default="eager")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the probe itself on the CPU backend")
    parser.add_argument("--size", default="2,64,2,128,2,32", help="layers,embd,heads,vocab,batch,seq")
    parser.add_argument("--no-cpu", action="store_true", help="skip the CPU backend's run (large sizes)")
    parser.add_argument("--dump", nargs=3, metavar=("GRAPH", "NODE", "DIR"),
                        help="compile backward graph GRAPH up to NODE alone, unfused, every stage written to DIR; "
                             "the error per sixth of the output's last axis")
    options = parser.parse_args()
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    layers, embd, heads, vocab, batch, seq = (int(v) for v in options.size.split(","))
    config = GPT2Config(n_layer=layers, n_embd=embd, n_head=heads, vocab_size=vocab, n_positions=max(64, seq),
                        attn_implementation=options.attention)
    dtype = getattr(torch, options.dtype)
    model = GPT2LMHeadModel(config).to(options.device, dtype).train()
    config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.0
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    captured = []

    def fw(gm, ins):
        return make_boxed_func(gm.forward)

    def bw(gm, ins):
        first = []

        def run(args):
            if not first:
                first.append(True)
                captured.append((gm, [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]))
            return gm.forward(*args)
        run._boxed_call = True
        return run

    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw, decompositions=tb._decompositions(keep_backward_ops=False))
    compiled = torch.compile(model, backend=backend)
    ids = torch.randint(0, vocab, (batch, seq), device=options.device)
    compiled(ids, labels=ids).loss.backward()
    if options.dump:
        return dump(captured, options)
    failures = 0
    for number, (gm, args) in enumerate(captured):
        failures += probe(number, gm, args, dtype, options.device, options.no_cpu)
    return 1 if failures else 0


def probe(number, gm, args, dtype, device, no_cpu=False):
    ref = gm.forward(*args)
    print(f"backward graph {number}: {len(gm.graph.nodes)} nodes, {len(args)} inputs, {len(ref)} outputs", flush=True)
    tolerance = float(os.environ.get("PROBE_TOLERANCE", 1e-3 if dtype == torch.float32 else 3e-2))
    target = "cuda" if device == "cuda" else "cpu"
    runs = ((target, True), (target, False)) if no_cpu else (("cpu", True), (target, True), (target, False))
    for backend_name, fuse in runs:
        outs, graph = run_tilefuse(gm, args, backend_name, fuse)
        errors = [error(o, r) if isinstance(r, torch.Tensor) else 0.0 for o, r in zip(outs, ref)]
        bad = [i for i, e in enumerate(errors) if not (e <= tolerance)]
        print(f"  {backend_name} fuse={fuse}: worst {max(errors):.3g}; wrong outputs {bad}", flush=True)
    for fuse in (False, True):  # unfused first: fewer ops in a kernel to suspect
        outs, _ = run_tilefuse(gm, args, target, fuse)
        errors = [error(o, r) if isinstance(r, torch.Tensor) else 0.0 for o, r in zip(outs, ref)]
        bad = [i for i, e in enumerate(errors) if not (e <= tolerance)]
        if bad:
            break
    if not bad:
        return 0
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    first = out_node.args[0][bad[0]]
    print(f"  bisecting towards output {bad[0]} ({first.name}), fuse={fuse}", flush=True)
    bisect(only_output(gm, first.name), args, tolerance, target, fuse)
    return 1

if __name__ == "__main__":
    sys.exit(main())

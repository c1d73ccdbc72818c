#!/usr/bin/env python3
"""One training step (forward, loss, backward) of transformers' GPT-2 small (or a LLaMA-style model of
its size, --model llama), random weights, through
torch.compile(backend="tilefuse") with the backward graph through tilefuse (the default) and in
PyTorch (options={"backward": "pytorch"}), beside eager (and with --inductor torch.compile's own
backend), in one process: the step's time (CUDA events, median, after the kernels compiling in the
background are in), the first step's time, the gradients' error to eager's relative to their
scale, and the peak memory of the timed steps (with, for tilefuse, what its forwards save).

    python3 bench/torch_training.py --shape 8x512 --dtype bf16 --json out.json

--loss ce trains on the next token's cross-entropy, written as training code writes it (the
chunked linear + cross-entropy takes it through tilefuse); the default, projection, multiplies the
logits by a fixed random tensor.
"""
import argparse
import json
import logging
import statistics
import time


def _cross_entropy_step(torch):
    import torch.nn.functional as F

    class Step(torch.nn.Module):
        """A language model's loss as training code writes it: the base model's last hidden state,
        the LM head, and F.cross_entropy of the next tokens (the logits read by nothing else)."""

        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, ids, labels):
            base = self.lm.transformer if hasattr(self.lm, "transformer") else self.lm.model
            logits = self.lm.lm_head(base(ids, use_cache=False).last_hidden_state)
            return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1))

    return Step


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gpt2", choices=["gpt2", "llama"],
                        help="gpt2: transformers' GPT-2 small; llama: a LLaMA-style model of GPT-2 small's size "
                             "(RMSNorm, rotary, grouped-query attention with 4 key-value heads, SwiGLU; vocabulary 32000)")
    parser.add_argument("--shape", default="8x512")
    parser.add_argument("--loss", default="projection", choices=["projection", "ce"],
                        help="projection: the logits times a fixed random tensor, averaged (every variant's logits "
                             "materialised); ce: the next token's cross-entropy as training code writes it (the last "
                             "hidden state, the LM head, F.cross_entropy: tilefuse's chunked loss takes it)")
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backward", action="append", default=[], help="pytorch and/or tilefuse (default both)")
    parser.add_argument("--inductor", action="store_true", help="also time torch.compile's default backend (the peer)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also list each variant's N costliest GPU kernels a step (torch.profiler)")
    parser.add_argument("--host-profile", type=int, default=0, metavar="N",
                        help="also time the host's side of a step (the time to issue it, not waiting for the GPU) and "
                             "list the N Python functions of tilefuse's steps with the most time (cProfile, 5 steps)")
    parser.add_argument("--optimizer", action="store_true",
                        help="each step also runs PyTorch's fused AdamW over all parameters (the issue's anchors do), "
                             "at learning rate 0 so every variant's weights stay eager's (the same kernels and bytes)")
    parser.add_argument("--max-error", type=float, default=None, metavar="E",
                        help="exit 1 (after the results) when a tilefuse variant's gradients are off eager's by more "
                             "than E of their scale, or NaN (the GPU script: 0.05 for bf16)")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import transformers
    import tilefuse.torch_backend as backend_module

    # The backend's INFO lines (what goes to PyTorch and why: the attention backward's reasons
    # among them) on stderr.
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("tilefuse").setLevel(logging.INFO)

    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    batch, seq = (int(v) for v in args.shape.split("x"))
    torch.manual_seed(0)
    if args.model == "gpt2":
        config = transformers.GPT2Config(attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0)
        make = transformers.GPT2LMHeadModel
    else:
        config = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                                          num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
                                          attention_dropout=0.0)
        make = transformers.LlamaForCausalLM
    if args.loss == "ce":
        lm_class, step_class = make, _cross_entropy_step(torch)
        make = lambda config: step_class(lm_class(config))  # noqa: E731
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    labels = torch.roll(ids, -1, 1)
    labels[:, -1] = -100  # no next token
    projection = torch.randn(batch, seq, config.vocab_size, device="cuda", dtype=dtype)

    optimizers = {}  # id(model) -> its fused AdamW (--optimizer)

    def step(model):
        model.zero_grad(set_to_none=True)
        if args.loss == "ce":
            model(ids, labels).backward()
        else:
            (model(ids, use_cache=False).logits * projection).float().mean().backward()
        if args.optimizer:
            if id(model) not in optimizers:
                optimizers[id(model)] = torch.optim.AdamW(model.parameters(), lr=0.0, fused=True)
            optimizers[id(model)].step()

    def gpu_busy_us(prof):
        """How long some kernel ran: the union of the kernels' intervals. The sum of their
        durations overstates the GPU's time where kernels overlap: tilefuse launches its kernels
        programmatically (each placed on the GPU, waiting, while the one ahead still runs), so a
        kernel's duration includes most of the previous one's."""
        spans = sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                       if e.device_type == torch.autograd.DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
                       and not e.name.startswith(("##", "Optimizer.")))
        busy, end = 0.0, float("-inf")
        for start, stop in spans:
            if stop > end:
                busy += stop - max(start, end)
                end = stop
        return busy

    def kernel_profile(model, label):
        """Where a step's GPU time goes: the kernels' time a step beside the step's own, each
        kernel kind on a line (tilefuse's group numbers and Triton's indices taken out)."""
        if not args.profile:
            return
        import collections
        import re
        activities = [torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]
        steps = 3
        with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
            for _ in range(steps):
                step(model)
            torch.cuda.synchronize()
        kinds = collections.defaultdict(lambda: [0, 0.0])
        for e in prof.key_averages():
            if e.device_type != torch.autograd.DeviceType.CUDA or e.self_device_time_total <= 0 or e.key.startswith("##"):
                continue  # (Inductor's "## Call CompiledFxGraph ##" ranges are not kernels)
            name = re.sub(r"_\d+$", "", re.sub(r"tf_group\d+_", "", e.key))[:110]
            kinds[name][0] += e.count
            kinds[name][1] += e.self_device_time_total
        total = sum(us for _, us in kinds.values()) / steps
        print(f"== {label}: {sum(n for n, _ in kinds.values()) / steps:.0f} kernels a step, {total:.0f} µs of kernels, "
              f"the GPU busy {gpu_busy_us(prof) / steps:.0f} µs")
        for name, (n, us) in sorted(kinds.items(), key=lambda kv: -kv[1][1])[:args.profile]:
            print(f"  {us / steps:9.1f} µs {n / steps:6.1f} x  {name}")
        products = [e for e in prof.key_averages(group_by_input_shape=True)
                    if e.key in ("aten::mm", "aten::addmm", "aten::bmm") and e.device_type != torch.autograd.DeviceType.CUDA]
        for e in products[:12] if label.startswith("tilefuse") else []:  # the products PyTorch runs, by shape
            print(f"  PyTorch's {e.key} {e.count / steps:.0f} x {e.input_shapes}")
        if label.startswith("tilefuse"):
            one_by_one(model)

    def one_by_one(model):
        """tilefuse's kernels of one step, each graph's timed one by one (CompiledModel.profile:
        they overstate products), the costliest with their graph, mode and strategy."""
        run, timings = backend_module._Specialization.run, []

        def profiled(self, call_args):
            strategies = {k.name: f"{k.mode}: {k.strategy}" for k in self.model.kernels}
            for timing in self.model.profile(*self.inputs_of(call_args)):
                timings.append((timing[-1], timing[0], self.input_shapes[0] if self.input_shapes else (),
                                strategies.get(timing[0], ""), self))
            return run(self, call_args)

        backend_module._Specialization.run = profiled
        try:
            step(model)
        finally:
            backend_module._Specialization.run = run
        print(f"-- tilefuse's kernels one by one: {len(timings)}, {sum(t[0] for t in timings):.0f} µs")
        timings.sort(key=lambda t: -t[0])
        for us, name, shape, strategy, _ in timings[:args.profile]:
            print(f"  {us:9.1f} µs  {name:<28} {str(shape):<18} {strategy[:170]}")
        import re
        shown = set()
        for us, name, shape, _, spec in timings:  # the costliest kernels' groups, as the plan has them
            group = re.match(r"tf_group(\d+)_", name)
            if len(shown) == 6 or not group or (name, shape) in shown:
                continue
            shown.add((name, shape))
            plan = spec.model.explain("h200")
            groups = plan.get("groups", []) if isinstance(plan, dict) else []
            entry = next((g for g in groups if g.get("id", g.get("group")) == int(group.group(1))), None)
            print(f"-- plan of {name} ({us:.0f} µs, graph of {shape}): {json.dumps(entry)[:1500] if entry else sorted(plan)[:20]}")

    def host_profile(model, label):
        """The host's side of a step: how long issuing it takes (no wait for the GPU inside, as
        far as the step has none) against the step's time, and where cProfile puts that time."""
        if not args.host_profile:
            return
        import cProfile
        import pstats

        torch.cuda.synchronize()
        issue = []
        for _ in range(5):
            start = time.perf_counter()
            step(model)
            issue.append((time.perf_counter() - start) * 1e6)
            torch.cuda.synchronize()
        print(f"== {label}: issuing a step takes {statistics.median(issue):.0f} µs on the host (median of 5)")
        if label.startswith("tilefuse"):
            def counts():  # how the graphs' runs on PyTorch's tensors went, summed over the graphs
                total = {}
                for ref in backend_module._GRAPHS:
                    graph = ref()
                    for s in (graph.compiled.values() if graph is not None else []):
                        for key, n in (s.model.device_run_counts if s is not None else {}).items():
                            total[key] = total.get(key, 0) + n
                return total
            before = counts()
            import collections

            from tilefuse import _model
            strided, call_on_device = collections.Counter(), _model.CompiledModel._call_on_device

            def noting(self, torch_module, inputs):  # the inputs copied dense before a run
                for x in inputs:
                    if not x.is_contiguous():
                        strided[(tuple(x.shape), x.stride(), str(x.dtype))] += 1
                return call_on_device(self, torch_module, inputs)

            _model.CompiledModel._call_on_device = noting
            try:
                step(model)
            finally:
                _model.CompiledModel._call_on_device = call_on_device
            torch.cuda.synchronize()
            print(f"== {label}: a step's runs: " + ", ".join(f"{k} {v - before.get(k, 0)}" for k, v in counts().items()))
            print(f"== {label}: inputs copied dense a step: " + "; ".join(f"{n} x {k}" for k, n in strided.most_common(12)))
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(5):
                step(model)
            torch.cuda.synchronize()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.host_profile)
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(args.host_profile)

    def timed(model):
        for _ in range(2):
            step(model)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step(model)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        return statistics.median(times)

    reference = make(config).to("cuda", dtype).train()
    step(reference)
    expected = {n: p.grad.float().clone() for n, p in reference.named_parameters()}
    row = {"model": args.model, "shape": args.shape, "dtype": args.dtype, "loss": args.loss,
           "optimizer": "fused AdamW" if args.optimizer else None,
           "device": torch.cuda.get_device_name(), "eager_us": timed(reference),
           "eager_peak_mb": torch.cuda.max_memory_allocated() / 2**20}
    kernel_profile(reference, "eager")
    host_profile(reference, "eager")
    for backward in args.backward or ["pytorch", "tilefuse"]:
        torch._dynamo.reset()
        model = make(config).to("cuda", dtype).train()
        model.load_state_dict(reference.state_dict())
        compiled = torch.compile(model, backend="tilefuse", options={"backward": backward})
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(compiled)
        torch.cuda.synchronize()
        row[f"tilefuse_bw_{backward}_first_step_s"] = time.perf_counter() - start
        # The first steps run quick-compiling stand-ins of the slow template kernels while their
        # own forms compile in the background: steady steps are timed on the own forms.
        start = time.perf_counter()
        backend_module.finish_compiles()
        row[f"tilefuse_bw_{backward}_finish_compiles_s"] = time.perf_counter() - start
        row[f"tilefuse_bw_{backward}_us"] = timed(compiled)
        row[f"tilefuse_bw_{backward}_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        saved = [g["saved_for_backward"] for g in backend_module.explain() if g.get("saved_for_backward")]
        row[f"tilefuse_bw_{backward}_saved_mb"] = sum(s["bytes"] for s in saved) / 2**20
        memory = backend_module.memory_summary()  # the graphs' arenas: held between steps
        row[f"tilefuse_bw_{backward}_arena_mb"] = memory["arena_bytes"] / 2**20
        row[f"tilefuse_bw_{backward}_largest_arena_mb"] = memory["largest_arena_bytes"] / 2**20
        errors = {n: ((p.grad.float() - expected[n]).abs().max() / expected[n].abs().max().clamp_min(1e-30)).item()
                  for n, p in model.named_parameters()}  # the last timed step's gradients
        row[f"tilefuse_bw_{backward}_error_to_scale"] = max(errors.values(), key=lambda e: (e != e, e))  # NaN first
        worst = sorted(errors.items(), key=lambda kv: (kv[1] == kv[1], -kv[1] if kv[1] == kv[1] else 0))[:5]
        print(f"== tilefuse, backward {backward}: worst gradients (error to scale): " +
              ", ".join(f"{n} {e:.3g}" for n, e in worst), flush=True)
        notes = sorted({note for g in backend_module.explain() for note in g["in_pytorch"]})
        print(f"== tilefuse, backward {backward}: what runs in PyTorch: " + " | ".join(notes), flush=True)
        kernel_profile(compiled, f"tilefuse, backward {backward}")
        host_profile(compiled, f"tilefuse, backward {backward}")
        print(json.dumps(row), flush=True)
    if args.inductor:  # the peer: torch.compile's default backend, in the same process
        torch._dynamo.reset()
        model = make(config).to("cuda", dtype).train()
        model.load_state_dict(reference.state_dict())
        compiled = torch.compile(model)
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(compiled)
        torch.cuda.synchronize()
        row["inductor_first_step_s"] = time.perf_counter() - start
        row["inductor_us"] = timed(compiled)
        row["inductor_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        kernel_profile(compiled, "torch.compile")
        host_profile(compiled, "torch.compile")
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([row], f, indent=1)
    if args.max_error is not None:
        errors = {k: v for k, v in row.items() if k.endswith("_error_to_scale")}
        wrong = {k: v for k, v in errors.items() if not v <= args.max_error}  # NaN is wrong
        if wrong:
            print(f"gradients off eager's by more than {args.max_error} of their scale: {wrong}", flush=True)
            raise SystemExit(1)


if __name__ == "__main__":
    main()

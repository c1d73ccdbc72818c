"""A language model's loss, F.cross_entropy(F.linear(h, W).float(), target), forward and backward:
time and memory of eager PyTorch, torch.compile and tilefuse with the loss unfused
(options={"chunked_loss": False}) and chunked (tilefuse.fx.linear_cross_entropy), in one process.

    python3 bench/linear_cross_entropy.py [--tokens 4096] [--hidden 4096] [--vocab 128256] [--json F]
        [--modes eager,inductor,tilefuse-unfused,tilefuse,api-512,...] [--profile MODE]

Modes api-R call tilefuse.fx.linear_cross_entropy.linear_cross_entropy directly (eager) in
chunks of R rows. --profile MODE lists that mode's kernels in one step (torch.profiler).

Per mode: the step's median time (CUDA events, after warm-up), its peak memory above what was
allocated before it (h, W and the targets), and that peak less the gradients' bytes (W's and h's,
which every mode writes): the memory the loss itself takes. The gradients are compared with
eager's (largest error over the gradient's largest value). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def loss_of(h, weight, target):
    return F.cross_entropy(F.linear(h, weight).float(), target)


def print_idle_gaps(prof, least_us: float = 50.0) -> None:
    """The GPU's idle stretches in the profiled step longer than `least_us`, each with the host
    ops that were running when it ended (what the GPU waited for)."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    host = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    spans = sorted((e.time_range.start, e.time_range.end) for e in events)
    busy_until, total = None, 0.0
    for start, end in spans:
        if busy_until is not None and start - busy_until > least_us:
            running = sorted({h.name for h in host if h.time_range.start <= start <= h.time_range.end})
            print(f"GPU idle {start - busy_until:8.0f} us before a kernel at {start:.0f}: host in {running[-4:]}")
            total += start - busy_until
        busy_until = end if busy_until is None else max(busy_until, end)
    print(f"GPU idle in gaps over {least_us:.0f} us: {total:.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=128256)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--modes", default="eager,inductor,tilefuse-unfused,tilefuse")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--profile", help="list this mode's kernels in one step")
    args = parser.parse_args()
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)
    from tilefuse.fx.linear_cross_entropy import linear_cross_entropy

    torch.manual_seed(0)
    device = "cuda"
    h0 = (torch.randn(args.tokens, args.hidden, device=device) * 1.0).bfloat16()
    weight = (torch.randn(args.vocab, args.hidden, device=device) / args.hidden ** 0.5).bfloat16().requires_grad_()
    target = torch.randint(0, args.vocab, (args.tokens,), device=device)
    target[::13] = -100  # some ignored rows, as padding gives

    modes = {"eager": loss_of,
             "inductor": torch.compile(loss_of),
             "tilefuse-unfused": torch.compile(loss_of, backend="tilefuse", options={"chunked_loss": False}),
             "tilefuse": torch.compile(loss_of, backend="tilefuse")}
    reference = None
    results = {"device": torch.cuda.get_device_name(), "tokens": args.tokens, "hidden": args.hidden, "vocab": args.vocab,
               "logits_bytes": args.tokens * args.vocab * 2, "modes": {}}
    for name in args.modes.split(","):
        if name.startswith("api-"):
            rows = int(name[4:])
            modes[name] = lambda h, w, t, rows=rows: linear_cross_entropy(h, w, t, chunk_rows=rows)
        fn = modes[name]
        h = h0.clone().requires_grad_()

        def step():
            weight.grad = None
            h.grad = None
            loss = fn(h, weight, target)
            loss.backward()
            return loss

        for _ in range(3):
            loss = step()
        torch.cuda.synchronize()
        grads = (loss.detach().float(), h.grad.float(), weight.grad.float())
        weight.grad = None
        h.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        gradient_bytes = weight.numel() * weight.element_size() + h.numel() * h.element_size()
        times = []
        for _ in range(args.repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            step()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        entry = {"ms": statistics.median(times), "peak_bytes": peak, "loss_working_bytes": peak - gradient_bytes,
                 "loss": grads[0].item()}
        if reference is None:
            reference = grads
        else:
            entry["grad_h_error"] = ((grads[1] - reference[1]).abs().max() / reference[1].abs().max()).item()
            entry["grad_w_error"] = ((grads[2] - reference[2]).abs().max() / reference[2].abs().max()).item()
        results["modes"][name] = entry
        if args.profile == name:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=90))
            print_idle_gaps(prof)
        print(f"{name:<18} {entry['ms']:8.2f} ms  peak {peak / 2**20:8.0f} MiB  loss's own {entry['loss_working_bytes'] / 2**20:8.0f} MiB"
              f"  loss {entry['loss']:.5f}" + (f"  grad errors h {entry['grad_h_error']:.2e} W {entry['grad_w_error']:.2e}"
                                                if "grad_h_error" in entry else ""), flush=True)
        del h, grads
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

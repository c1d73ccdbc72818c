"""SDPA's backward at the sizes tilefuse's attention backward template is timed at
(AttentionBackwardTest.DISABLED_Speed): B4 H16 N4096, d64 and d128, full and causal, bf16, and
d128 causal with 4 key/value heads (grouped-query attention, enable_gqa); then the training
steps' B8 H12 N512 d64 causal, with 12 and with 4 key/value heads.

    python3 bench/attention_backward_peers.py [--json F]

The backward alone (torch.autograd.grad of one forward's output, retain_graph), CUDA events,
median of 10 after 3 warm-up calls; per backend PyTorch's dispatcher would pick from (its
default, then cuDNN and flash forced). FLOPs: 2.5 x the forward's 4·N²·d per head, halved when
causal, as FlashAttention counts them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def time_backward(d: int, causal: bool, backend, kv_heads: int = 16, batch: int = 4, heads: int = 16, n: int = 4096) -> float:
    torch.manual_seed(0)
    q = torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(batch, kv_heads, n, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != heads)
    times = []
    for i in range(13):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    # (batch, heads, N, d, causal, key/value heads): the template's test times the same: the issue's
    # B4 H16 N4096 (GQA with 4 KV heads last), then the training steps' B8 H12 N512 (GPT-2 small's
    # heads, and the LLaMA-style model's 12 over 4).
    for batch, heads, n, d, causal, kv_heads in ((4, 16, 4096, 64, False, 16), (4, 16, 4096, 64, True, 16),
                                                 (4, 16, 4096, 128, False, 16), (4, 16, 4096, 128, True, 16),
                                                 (4, 16, 4096, 128, True, 4), (8, 12, 512, 64, True, 12), (8, 12, 512, 64, True, 4)):
        flops = 2.5 * 4 * batch * heads * float(n) * n * d * (0.5 if causal else 1.0)
        label = f"B{batch} H{heads} N{n} d{d} {'causal' if causal else 'full'}" + (f" GQA {kv_heads} KV heads" if kv_heads != heads else "")
        for name, backend in (("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                ms = time_backward(d, causal, backend, kv_heads, batch, heads, n)
            except RuntimeError as error:
                print(f"{label} {name}: not run ({str(error).splitlines()[0]})")
                continue
            rows.append({"batch": batch, "heads": heads, "n": n, "d": d, "causal": causal, "kv_heads": kv_heads, "backend": name,
                         "ms": ms, "tflops": flops / ms / 1e9})
            print(f"SDPA backward {label} {name}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TF/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""SDPA's backward at the sizes tilefuse's attention backward template is timed at
(AttentionBackwardTest.DISABLED_Speed): B4 H16 N4096, d64 and d128, full and causal, bf16, and
d128 causal with 4 key/value heads (grouped-query attention, enable_gqa).

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


def time_backward(d: int, causal: bool, backend, kv_heads: int = 16) -> float:
    torch.manual_seed(0)
    q = torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(4, kv_heads, 4096, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    dout = torch.randn(4, 16, 4096, d, device="cuda", dtype=torch.bfloat16)
    with sdpa_kernel(backend) if backend is not None else contextlib.nullcontext():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=kv_heads != 16)
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
    # (d, causal, key/value heads): the template's test times the same, GQA with 4 KV heads last.
    for d, causal, kv_heads in ((64, False, 16), (64, True, 16), (128, False, 16), (128, True, 16), (128, True, 4)):
        flops = 2.5 * 4 * 64 * 4096.0 * 4096.0 * d * (0.5 if causal else 1.0)
        label = f"d{d} {'causal' if causal else 'full'}" + (f" GQA {kv_heads} KV heads" if kv_heads != 16 else "")
        for name, backend in (("default", None), ("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                ms = time_backward(d, causal, backend, kv_heads)
            except RuntimeError as error:
                print(f"{label} {name}: not run ({str(error).splitlines()[0]})")
                continue
            rows.append({"d": d, "causal": causal, "kv_heads": kv_heads, "backend": name, "ms": ms, "tflops": flops / ms / 1e9})
            print(f"SDPA backward B4 H16 N4096 {label} {name}: {ms:.3f} ms, {flops / ms / 1e9:.0f} TF/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""Which kernels cuBLAS runs for a set of products (x·wᵀ, bf16), as PyTorch calls them: the
kernel names (their tile and cluster shapes), grids and times under torch.profiler, each product
alone in a CUDA graph. Usage: python3 cublas_kernels.py M,N,K [M,N,K ...]"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

shapes = [tuple(int(v) for v in s.split(",")) for s in sys.argv[1:]] or [(4096, 768, 3072), (6304, 768, 3072), (4096, 768, 768), (6304, 768, 768)]
for m, n, k in shapes:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.nn.functional.linear(x, w)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], record_shapes=False) as p:
        for _ in range(10):
            torch.nn.functional.linear(x, w)
        torch.cuda.synchronize()
    events = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    names = {}
    for e in events:
        names.setdefault(e.name, []).append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
    for name, times in names.items():
        times.sort()
        print(f"{m}x{n}x{k}: {times[len(times) // 2]:.2f} us  {name}")

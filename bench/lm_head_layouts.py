import torch
def t(fn, n=50):
    for _ in range(5): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / n
for M in (4096, 128):
    x = torch.randn(M, 768, device="cuda", dtype=torch.bfloat16)
    W = torch.randn(50257, 768, device="cuda", dtype=torch.bfloat16)
    Wt = W.t().contiguous()
    Wp = torch.zeros(50264, 768, device="cuda", dtype=torch.bfloat16); Wp[:50257] = W
    Wpt = Wp.t().contiguous()
    out = torch.empty(M, 50257, device="cuda", dtype=torch.bfloat16)
    outp = torch.empty(M, 50264, device="cuda", dtype=torch.bfloat16)
    flops = 2 * M * 768 * 50257
    r = {
      "B row-major ldb=50257 (tilefuse now)": t(lambda: torch.mm(x, Wt, out=out)),
      "B K-major ldb=768, C ldc=50257": t(lambda: torch.mm(x, W.t(), out=out)),
      "padded N=50264, B K-major": t(lambda: torch.mm(x, Wp.t(), out=outp)),
      "padded N=50264, B row-major": t(lambda: torch.mm(x, Wpt, out=outp)),
      "padded + compact copy": t(lambda: out.copy_(torch.mm(x, Wp.t(), out=outp)[:, :50257])),
    }
    for k, v in r.items(): print(f"M={M} {k}: {v:.1f} us ({flops / v / 1e6:.0f} TF/s)")

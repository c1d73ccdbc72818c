import torch, torchvision, sys
from torch.profiler import profile, ProfilerActivity
name = sys.argv[1]; mode = sys.argv[2]
m = getattr(torchvision.models, name)().cuda().eval().to(torch.bfloat16).to(memory_format=torch.channels_last)
x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
f = torch.compile(m) if mode == "compile" else m
with torch.no_grad():
    for _ in range(5): f(x)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        f(x); torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=90))

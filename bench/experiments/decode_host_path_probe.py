"""Which inputs send a decode step's call down the host path (PyTorch's tensors copied to the host
and back) once per generation: each such call's inputs that are not dense CUDA tensors, printed.

    PYTHONPATH=... python3 bench/experiments/decode_host_path_probe.py
"""
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import decode  # noqa: E402
import tilefuse  # noqa: E402
import tilefuse.torch_backend  # noqa: E402,F401
from tilefuse import _model  # noqa: E402

original = _model.CompiledModel._call_torch


def probe(self, torch_module, inputs):
    if not self._runs_on_device(torch_module, inputs):
        odd = [(i, type(x).__name__, getattr(x, "device", None), tuple(getattr(x, "shape", ())), getattr(x, "dtype", None))
               for i, x in enumerate(inputs) if not (isinstance(x, torch.Tensor) and x.is_cuda)]
        print(f"host path: {len(inputs)} inputs, not on the GPU: {odd[:8]}", flush=True)
    else:
        strided = [(i, tuple(x.shape), x.stride()) for i, x in enumerate(inputs) if not x.is_contiguous()]
        if strided:
            print(f"device path with strided inputs: {strided[:8]}", flush=True)
    return original(self, torch_module, inputs)


_model.CompiledModel._call_torch = probe
model = decode.build_model("gpt2", torch, transformers).to("cuda", torch.bfloat16).eval()
prompt = torch.randint(0, model.config.vocab_size, (1, 128), device="cuda")
forward = torch.compile(model.forward, backend="tilefuse")
for generation in range(3):
    print(f"== generation {generation}", flush=True)
    decode.generate(torch, transformers, forward, model, prompt, 16, True)

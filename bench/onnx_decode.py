"""Greedy decoding through ONNX exports with a KV cache, for bench/decode.py's onnx-* modes.

A transformers decoder is exported the way a deployment export has it, with PyTorch's
TorchScript-based exporter (opset 17) in two models:

- prefill.onnx: input_ids [batch, sequence] -> logits and each layer's key and value
  ("present_*", [batch, kv heads, sequence, head dim]);
- step.onnx: input_ids [batch, 1] and the past keys and values ([batch, kv heads, past, head
  dim], symbolic `past`) -> logits and the presents, past + 1 long (the cache concatenated).

The step's `past` grows by one every token: tilefuse compiles it as a SpecializingModel (a
binding per past length; the file read once, its weights shared), onnxruntime runs any shape.
"""
import os


def decoder_module(model, transformers, torch):
    """A module: (input_ids, *past) -> (logits, *presents), through transformers' DynamicCache."""

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, *past):
            cache = transformers.DynamicCache(config=self.model.config)
            for i in range(len(past) // 2):
                cache.update(past[2 * i], past[2 * i + 1], i)
            logits = self.model(input_ids=input_ids, past_key_values=cache, use_cache=True).logits
            presents = []
            for layer in cache.layers:
                presents += [layer.keys, layer.values]
            return (logits, *presents)

    return Decoder().eval()


def export(model, prompt, folder, torch, transformers):
    """Writes folder/prefill.onnx and folder/step.onnx for `model` (its dtype and device);
    returns their paths. `prompt` [1, T] traces the prefill (T > 1: transformers' SDPA path
    bakes "causal" in when the query is longer than one token)."""
    from transformers import masking_utils

    config = model.config
    layers = config.num_hidden_layers
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    past_names = [f"past_{i}_{kv}" for i in range(layers) for kv in ("key", "value")]
    present_names = [f"present_{i}_{kv}" for i in range(layers) for kv in ("key", "value")]
    decoder = decoder_module(model, transformers, torch)
    paths = {name: os.path.join(folder, f"{name}.onnx") for name in ("prefill", "step")}
    # transformers' mask code looks for packed sequences (torch.diff, which the TorchScript
    # exporter lacks); an unpacked batch's answer outside tracing is None (tests/models/export_models.py).
    saved = masking_utils.find_packed_sequence_indices
    masking_utils.find_packed_sequence_indices = lambda position_ids: None
    try:
        with torch.no_grad():
            torch.onnx.export(decoder, (prompt,), paths["prefill"], opset_version=17, dynamo=False,
                              input_names=["input_ids"], output_names=["logits"] + present_names,
                              dynamic_axes={"input_ids": {0: "batch", 1: "sequence"},
                                            "logits": {0: "batch", 1: "sequence"},
                                            **{n: {0: "batch", 2: "sequence"} for n in present_names}})
            token = prompt[:, -1:]
            past = [torch.zeros(1, kv_heads, prompt.shape[1], head_dim, dtype=model.dtype, device=prompt.device)
                    for _ in range(2 * layers)]
            torch.onnx.export(decoder, (token, *past), paths["step"], opset_version=17, dynamo=False,
                              input_names=["input_ids"] + past_names, output_names=["logits"] + present_names,
                              dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"},
                                            **{n: {0: "batch", 2: "past"} for n in past_names},
                                            **{n: {0: "batch", 2: "total"} for n in present_names}})
    finally:
        masking_utils.find_packed_sequence_indices = saved
    return paths


def tilefuse_runners(paths, device):
    """prefill(ids) and step(ids, *past) through tilefuse (torch tensors in and out): each a
    SpecializingModel, compiled once per new binding of its symbolic dims (`compiles`)."""
    import tilefuse

    return tilefuse.compile(paths["prefill"], backend=device), tilefuse.compile(paths["step"], backend=device)


def onnxruntime_runners(paths, device, torch):
    """prefill(ids) and step(ids, *past) through onnxruntime: on the GPU with its CUDA provider,
    the keys and values kept on the device between steps (I/O binding), the logits copied to
    the host (they are read there anyway, for the argmax)."""
    import onnxruntime as ort

    cuda = device == "cuda"
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda else ["CPUExecutionProvider"]
    sessions = {name: ort.InferenceSession(path, providers=providers) for name, path in paths.items()}
    if cuda and "CUDAExecutionProvider" not in sessions["step"].get_providers():
        raise RuntimeError("onnxruntime has no CUDA provider here")

    def run(session):
        names = [i.name for i in session.get_inputs()]
        outputs = [o.name for o in session.get_outputs()]

        def call(ids, *past):
            binding = session.io_binding()
            binding.bind_cpu_input(names[0], ids.cpu().numpy() if hasattr(ids, "cpu") else ids)
            for name, value in zip(names[1:], past):
                binding.bind_ortvalue_input(name, value)
            for name in outputs:
                binding.bind_output(name, "cuda" if cuda else "cpu")
            session.run_with_iobinding(binding)
            values = binding.get_outputs()
            return (torch.from_numpy(values[0].numpy()), *values[1:])

        return call

    return run(sessions["prefill"]), run(sessions["step"])


def generate(torch, prefill, step, prompt, new):
    """Greedy tokens, the first decode step's logits and the decode loop's time (ms), as
    decode.generate: CUDA events (or the host clock) around the steps after the prompt."""
    import time

    outs = prefill(prompt)
    token = outs[0][:, -1:].argmax(-1)
    past = outs[1:]
    tokens, first_logits = [token], None
    cuda = prompt.is_cuda
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    began = time.perf_counter()
    for i in range(new - 1):
        outs = step(token.to(prompt.device), *past)
        logits, past = outs[0], outs[1:]
        if i == 0:
            first_logits = logits[:, -1].float().clone()
        token = logits[:, -1:].argmax(-1)
        tokens.append(token.to(prompt.device))
    if cuda:
        end.record()
        torch.cuda.synchronize()
    ms = start.elapsed_time(end) if cuda else 1e3 * (time.perf_counter() - began)
    return torch.cat(tokens, 1), first_logits, ms


def onnx_dtype(torch, device):
    """The exports' dtype: f32. (In f16, PyTorch 2.11's TorchScript exporter writes
    LayerNormalization with an f16 input and f32 scale and bias, which neither onnxruntime nor
    tilefuse loads; bf16 has no NumPy type for onnxruntime's I/O binding.)"""
    return torch.float32


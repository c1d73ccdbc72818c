#!/usr/bin/env python3
"""GPT-2 quantized to FP8 by a standard quantization flow, run through tilefuse (issue 50): its
error against the f32 model and its speed against the bf16 model.

The flow, as a user would run it (random weights from transformers' GPT2Config, fixed seeds,
nothing downloaded):
  1. GPT2LMHeadModel exported in f32 by torch.onnx.export (the legacy exporter, opset 17), the
     logits its output, input ids of a fixed shape;
  2. quantized by onnxruntime.quantization.quantize_static: QDQ format, e4m3 (FLOAT8E4M3FN)
     activations and weights, every MatMul and Gemm (the linear layers, attention's two
     products only with --quantize-attention, and the LM head), calibrated on random ids with the 'distribution' method (the
     one onnxruntime takes for float8), per-tensor scales; onnxruntime raises the opset to 19;
  3. the same model exported in bf16, for the speed comparison, and that bf16 export with the
     f32 model's QDQ pairs, scales and e4m3 weights put in (transfer_quantization: the quantized
     model a deployment runs, its non-product part in 16 bits).
tilefuse compiles the quantized model (its products of dequantized e4m3 values become FP8
GEMMs on the CUDA backend, passes/fp8_products.h), the bf16 one and the f32 one; each is timed by
CUDA events around a call of the compiled model on PyTorch tensors on the GPU (its whole CUDA
graph; median of 20 after 5 untimed). The quantized logits are compared with
the f32 model's (PyTorch, f32, same ids): norm-wise ‖y_q − y_f32‖ / ‖y_f32‖ and the largest
element's error over the largest |y_f32|, beside the same errors of onnxruntime's evaluation of
the quantized model (the flow's own runtime: the quantization's error; where that onnxruntime
refuses its own model, tilefuse's CPU backend, which computes the dequantized products in f32)
and of the bf16 model, and tilefuse's quantized logits against that evaluation (what the FP8
kernels add).

    PYTHONPATH=build/python python3 bench/fp8_gpt2.py [--backend cuda] [--batch 8 --tokens 512]
        [--layers 12] [--workdir DIR] [--json FILE]
"""
import argparse
import json
import os
import re
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_models  # noqa: E402  (the zoo's export helpers: wrapper, legacy-exporter patch)

SEED = 2026


def export(model, ids, path):
    import torch
    with torch.no_grad():
        torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=["logits"], opset_version=17,
                          dynamo=False, do_constant_folding=True)


def quantize(f32_path, q_path, vocab, shape, calibration_batches, attention):
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

    class RandomIds(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(SEED + 7)
            self.batches = iter([{"input_ids": rng.integers(0, vocab, shape, dtype=np.int64)} for _ in range(calibration_batches)])

        def get_next(self):
            return next(self.batches, None)

    import onnx
    # Attention's products (q·kᵀ and p·v, MatMuls between activations) stay as they are unless
    # asked for: deployment recipes quantize the linear layers (FP8 attention is its own kernel).
    exclude = [] if attention else [n.name for n in onnx.load(f32_path, load_external_data=False).graph.node
                                    if n.op_type == "MatMul" and "/attn/" in n.name]
    quantize_static(f32_path, q_path, RandomIds(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QFLOAT8E4M3FN,
                    weight_type=QuantType.QFLOAT8E4M3FN, op_types_to_quantize=["MatMul", "Gemm"], per_channel=False,
                    calibrate_method=CalibrationMethod.Distribution, nodes_to_exclude=exclude)
    return len(exclude)


def transfer_quantization(quantized_path, base_path, out_path):
    """The quantized f32 model's QDQ pairs, scales and 8-bit weights put into the bf16 export of
    the same model (the legacy exporter names nodes and tensors alike in both): each activation
    the f32 model quantizes is quantized and dequantized at the same place with the same scale
    (in bf16, as QuantizeLinear takes x's type), each weight it stores in e4m3 replaces the bf16
    one through a DequantizeLinear to bf16. What stays bf16 (norms, attention, residuals) is what
    a deployment runs in 16 bits; onnxruntime's tool cannot calibrate the bf16 model itself (its
    CPU provider has no bf16 kernels). Returns the number of pairs and weights moved."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    q = onnx.load(quantized_path)
    base = onnx.load(base_path)
    q_inits = {i.name: i for i in q.graph.initializer}
    q_consumers = {}
    for n in q.graph.node:
        for i in n.input:
            q_consumers.setdefault(i, []).append(n.name)
    base_nodes = {n.name: n for n in base.graph.node}
    base_outputs = {o for n in base.graph.node for o in n.output} | {i.name for i in base.graph.input}
    base_inits = {i.name for i in base.graph.initializer}

    def bf16_scale(name):
        value = numpy_helper.to_array(q_inits[name]).astype(np.float32)
        return helper.make_tensor(name + "_bf16", TensorProto.BFLOAT16, value.shape, [float(v) for v in value.ravel()])

    def rewire(consumers, old, new):
        for c in consumers:
            node = base_nodes.get(c)
            if node is not None:
                for k, i in enumerate(node.input):
                    if i == old:
                        node.input[k] = new

    added, new_inits, moved = [], [], 0
    for n in q.graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in base_outputs:  # an activation's pair
            dq = [m for m in q.graph.node if m.op_type == "DequantizeLinear" and m.input[0] == n.output[0]]
            if len(dq) != 1:
                continue
            t, scale, zero = n.input[0], n.input[1], n.input[2]
            new_inits += [bf16_scale(scale), q_inits[zero]]
            added += [helper.make_node("QuantizeLinear", [t, scale + "_bf16", zero], [t + "_q8"], name=n.name),
                      helper.make_node("DequantizeLinear", [t + "_q8", scale + "_bf16", zero], [t + "_dq8"], name=dq[0].name)]
            rewire(q_consumers.get(dq[0].output[0], []), t, t + "_dq8")
            moved += 1
        elif n.op_type == "DequantizeLinear" and n.input[0] in q_inits and n.input[0].endswith("_quantized"):  # a weight
            weight = n.input[0][: -len("_quantized")]
            if weight not in base_inits:
                continue
            scale, zero = n.input[1], n.input[2]
            new_inits += [q_inits[n.input[0]], bf16_scale(scale), q_inits[zero]]
            added.append(helper.make_node("DequantizeLinear", [n.input[0], scale + "_bf16", zero], [weight + "_dq8"], name=n.name))
            rewire(q_consumers.get(n.output[0], []), weight, weight + "_dq8")
            moved += 1
    # The new nodes ahead of their consumers: each pair right after its input's producer would
    # do; the whole graph re-sorted is simpler.
    nodes = list(base.graph.node) + added
    produced = {i.name for i in base.graph.input} | {i.name for i in base.graph.initializer} | {i.name for i in new_inits} | {""}
    ordered, pending = [], nodes
    while pending:
        ready = [m for m in pending if all(i in produced for i in m.input)]
        if not ready:
            raise RuntimeError("transfer_quantization: the graph has a cycle or a missing input")
        for m in ready:
            produced.update(m.output)
        ordered += ready
        pending = [m for m in pending if m not in ready]
    used = {i for m in ordered for i in m.input}
    del base.graph.node[:]
    base.graph.node.extend(ordered)
    inits = [i for i in base.graph.initializer if i.name in used] + [i for i in {i.name: i for i in new_inits}.values()]
    del base.graph.initializer[:]
    base.graph.initializer.extend(inits)
    for o in base.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = max(o.version, 19)  # 8-bit floats in QuantizeLinear / DequantizeLinear
    onnx.save(base, out_path)
    return moved


def errors(y, reference):
    y, reference = np.asarray(y, np.float64), np.asarray(reference, np.float64)
    if not np.all(np.isfinite(y)):
        return {"relative_error": float("nan"), "max_error_to_scale": float("nan"), "non_finite": int(np.sum(~np.isfinite(y)))}
    return {"relative_error": float(np.linalg.norm(y - reference) / np.linalg.norm(reference)),
            "max_error_to_scale": float(np.abs(y - reference).max() / np.abs(reference).max())}


def median_ms(compiled, ids, repeats):
    """Median of `repeats` calls of `compiled` on `ids` (on the GPU: PyTorch tensors there, each call
    timed by CUDA events after 5 untimed ones; on the CPU: wall time)."""
    import torch
    if ids.is_cuda:
        for _ in range(5):
            compiled(ids)
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            compiled(ids)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return float(np.median(times))
    x = ids.numpy()
    compiled(x)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        compiled(x)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--calibration-batches", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--profile", type=int, default=0, help="print this many of each model's costliest kernels")
    ap.add_argument("--quantize-attention", action="store_true",
                    help="quantize attention's two products too (by default the linear layers and the LM head only)")
    ap.add_argument("--workdir", help="keep the models here (default: a temporary folder)")
    ap.add_argument("--json")
    a = ap.parse_args()

    import onnxruntime as ort
    import torch
    import transformers

    import tilefuse

    log = lambda msg: print(msg, flush=True)  # noqa: E731
    notes = cpu_models.patch_transformers_for_legacy_export()
    torch.manual_seed(SEED)
    config = transformers.GPT2Config(n_layer=a.layers, n_embd=a.hidden, n_head=a.heads, vocab_size=a.vocab,
                                     attn_implementation="eager")
    model = cpu_models.wrap(transformers.GPT2LMHeadModel(config).eval(), causal_lm=True)
    shape = (a.batch, a.tokens)
    ids = torch.randint(0, a.vocab, shape, generator=torch.Generator().manual_seed(SEED + 1), dtype=torch.int64)
    folder = a.workdir or tempfile.mkdtemp(prefix="fp8_gpt2_")
    os.makedirs(folder, exist_ok=True)
    paths = {k: os.path.join(folder, f"gpt2_{k}.onnx") for k in ("f32", "e4m3", "bf16", "e4m3_bf16")}
    result = {"model": f"GPT-2 (GPT2LMHeadModel, {a.layers} layers, d {a.hidden}, {a.heads} heads, vocab {a.vocab}), random weights",
              "shape": f"{a.batch}x{a.tokens}", "backend": a.backend, "notes": notes,
              "flow": "onnxruntime.quantization.quantize_static, QDQ, e4m3 activations and weights, MatMul and Gemm "
                      f"({'attention products included' if a.quantize_attention else 'attention products excluded'}), "
                      f"distribution calibration on {a.calibration_batches} batches of random ids, per-tensor scales"}

    t = time.time()
    with torch.no_grad():
        y_f32 = model(ids).numpy()
    export(model, ids, paths["f32"])
    result["export_f32_s"] = round(time.time() - t, 1)
    t = time.time()
    result["attention_products_not_quantized"] = quantize(paths["f32"], paths["e4m3"], a.vocab, shape, a.calibration_batches,
                                                          a.quantize_attention)
    result["quantize_s"] = round(time.time() - t, 1)
    t = time.time()
    model_bf16 = cpu_models.wrap(transformers.GPT2LMHeadModel(config).eval(), causal_lm=True)
    model_bf16.load_state_dict(model.state_dict())
    model_bf16 = model_bf16.to(torch.bfloat16)
    export(model_bf16, ids, paths["bf16"])
    result["export_bf16_s"] = round(time.time() - t, 1)
    result["moved_to_bf16"] = transfer_quantization(paths["e4m3"], paths["bf16"], paths["e4m3_bf16"])
    log(f"exported and quantized in {result['export_f32_s'] + result['quantize_s'] + result['export_bf16_s']:.0f} s "
        f"(quantization {result['quantize_s']} s) into {folder}")

    # The flow's own runtime on the quantized model: the quantization's error.
    # Where this onnxruntime does not run its own quantized model (older versions refuse 8-bit
    # floats through Reshape), tilefuse's CPU backend evaluates it (the dequantized products in f32).
    # (onnxruntime 1.30's graph optimizer fuses DequantizeLinear, Gemm and QuantizeLinear into a
    # QGemm that refuses float8: its unoptimized graph is tried next.)
    y_ort = None
    for level in ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL"):
        try:
            options = ort.SessionOptions()
            options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
            session = ort.InferenceSession(paths["e4m3"], options, providers=["CPUExecutionProvider"])
            y_ort = session.run(None, {"input_ids": ids.numpy()})[0]
            result["quantized_reference"] = f"onnxruntime {ort.__version__}, CPUExecutionProvider, {level}"
            del session
            break
        except Exception as e:  # noqa: BLE001
            result[f"onnxruntime_refused_{level}"] = f"onnxruntime {ort.__version__}: {type(e).__name__}: {str(e)[:300]}"
            log(f"onnxruntime ({level}) refuses the quantized model: {str(e)[:160]}")
    if y_ort is None:
        log("tilefuse's CPU backend evaluates the quantized model instead")
        y_ort = np.asarray(tilefuse.compile(paths["e4m3"], backend="cpu")(ids.numpy())[0], np.float32)
        result["quantized_reference"] = "tilefuse's CPU backend (dequantized products in f32)"
    result["quantized_reference_e4m3"] = errors(y_ort, y_f32)

    device_ids = ids.cuda() if a.backend == "cuda" else ids
    for name in ("e4m3", "e4m3_bf16", "bf16", "f32"):
        t = time.time()
        compiled = tilefuse.compile(paths[name], backend=a.backend)
        compiled.finish_compiles()
        result[f"tilefuse_compile_{name}_s"] = round(time.time() - t, 1)
        y = compiled(device_ids)[0]
        y = y.float().cpu().numpy() if hasattr(y, "cpu") else np.asarray(y, np.float32)
        result[f"tilefuse_{name}"] = errors(y, y_f32)
        if name == "e4m3":  # the FP8 kernels' own error: against the flow's runtime on the same quantized model
            result["tilefuse_e4m3_against_quantized_reference"] = errors(y, y_ort)
        kernels = [f"{k.name}: {k.mode}; {k.strategy}{'; ' + k.why_not if k.why_not else ''}" for k in compiled.kernels]
        result[f"{name}_kernels"] = kernels
        result[f"{name}_ms"] = median_ms(compiled, device_ids, a.repeats)
        if a.profile:
            strategy = {k.name: f"{k.mode}; {k.strategy}" for k in compiled.kernels}
            costliest = sorted(compiled.profile(device_ids), key=lambda p: -p[1])[:a.profile]
            result[f"{name}_profile"] = [[kernel, ms, strategy.get(kernel, "")] for kernel, ms in costliest]  # µs
            log(f"{name}: the {a.profile} costliest kernels of a call (µs, each timed alone):")
            for kernel, ms, how in result[f"{name}_profile"]:
                log(f"  {ms:9.1f}  {kernel}: {how[:150]}")
        del compiled
    for name in ("e4m3", "e4m3_bf16"):
        result[f"fp8_kernels_{name}"] = sum(1 for k in result[f"{name}_kernels"] if re.search(r"FP8", k))
    result["bf16_over_e4m3"] = result["bf16_ms"] / result["e4m3_ms"]
    result["bf16_over_e4m3_bf16"] = result["bf16_ms"] / result["e4m3_bf16_ms"]
    result["f32_over_e4m3"] = result["f32_ms"] / result["e4m3_ms"]

    log(f"GPT-2 {a.batch}x{a.tokens} on {a.backend}: e4m3 (f32 remainder) {result['e4m3_ms']:.3f} ms, "
        f"e4m3 (bf16 remainder) {result['e4m3_bf16_ms']:.3f} ms, bf16 {result['bf16_ms']:.3f} ms, f32 {result['f32_ms']:.3f} ms "
        f"(bf16 / e4m3: {result['bf16_over_e4m3']:.2f}x, {result['bf16_over_e4m3_bf16']:.2f}x; f32 / e4m3 {result['f32_over_e4m3']:.2f}x); "
        f"FP8 kernels {result['fp8_kernels_e4m3']} of {len(result['e4m3_kernels'])}, "
        f"{result['fp8_kernels_e4m3_bf16']} of {len(result['e4m3_bf16_kernels'])}")
    log(f"  the quantized reference: {result['quantized_reference']}")
    for key in ("tilefuse_e4m3", "quantized_reference_e4m3", "tilefuse_e4m3_bf16", "tilefuse_bf16",
                "tilefuse_e4m3_against_quantized_reference"):
        e = result[key]
        log(f"  {key}: error against {'the quantized reference' if 'against' in key else 'f32'} {e['relative_error']:.3e} norm-wise, largest {e['max_error_to_scale']:.3e} of scale")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

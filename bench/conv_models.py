#!/usr/bin/env python3
"""tilefuse on convolution networks: CPU against onnxruntime, GPU against PyTorch (issue 14).

Models (torchvision, RANDOM weights: `weights=None` after torch.manual_seed(0); nothing downloaded),
input 224x224, batch 1 and 32 by default (--models, --batches):

    convbnrelu          micro-benchmark: x [B,64,56,56] -> Conv 3x3 64->64 pad 1 (no bias) -> BatchNorm -> ReLU
    resnet18, resnet50, mobilenet_v3_small, convnext_tiny

Batch-norm statistics: a random-init network's BatchNorms hold mean 0 / variance 1, so the activations of
a deep net drift in scale layer by layer (MobileNetV3-small's logits come out ~1e-9). Before export every
BatchNorm is calibrated once: running statistics reset, momentum None (cumulative average), one forward
pass in train mode on a fixed random batch of 4, then eval. Same weights and statistics for every batch
size and dtype of a model (all seeded). ConvNeXt has LayerNorms only and is left as built.

Export (needs torch, torchvision (not for convbnrelu), onnx; onnxruntime for the f32 reference), cached
under --workdir (an existing folder is reused; --force-export redoes it), one ONNX backend-test folder
per model, batch and dtype:

    WORKDIR/<model>_b<B>[_bf16]/model.onnx               torch.onnx.export, legacy exporter (dynamo=False), opset 17
    WORKDIR/<model>_b<B>[_bf16]/test_data_set_0/input_0.pb   random input (fixed seed)
    WORKDIR/<model>_b<B>[_bf16]/test_data_set_0/output_0.pb  the reference output
    WORKDIR/<model>_b<B>[_bf16]/meta.json                 versions, exporter, sizes, noise floors

  f32: reference = onnxruntime CPUExecutionProvider, graph optimizations off (torch eager if no
       onnxruntime, and meta.json says so); onnxruntime vs torch eager is recorded as the f32 noise floor.
  bf16 (--dtypes f32,bf16): the module after `.to(torch.bfloat16)` exported the same way (input bf16);
       reference = the f32 module on the same (bf16-rounded) input, stored as bf16; PyTorch's own bf16 eager
       error against it is recorded as the bf16 noise floor.

--device cpu (default): for every model and batch (f32), on this machine, same thread count (--threads,
default nproc):
  * onnxruntime (CPUExecutionProvider, intra_op = threads, inter_op 1, sequential, ORT_ENABLE_ALL):
    --warmup untimed runs, then the median of --repeats;
  * tilefuse: `tilefuse bench FOLDER --backend cpu --warmup W --repeats R --json` (OMP_NUM_THREADS =
    OPENBLAS_NUM_THREADS = threads; one column per --openblas-coretype variant as in cpu_models.py);
  * correctness: `tilefuse run FOLDER --backend cpu --check --json` (tilefuse's whole-model rule: f32
    |a - e| <= 1e-4 max|e| + 1e-4 |e|), reported, never failed on.
  Rounds, quiet-machine waits and the interference rule are cpu_models.py's (its helpers are imported).
  Rows with batch >= --large-batch use --large-warmup/--large-repeats/--large-rounds.

--device cuda: for every model and batch, in one run:
  * PyTorch eager and torch.compile (default mode), in f32 (NCHW; TF32 off for convolutions and matmuls
    unless --peer-tf32, so the work is exact f32 like tilefuse's default) and in bf16 channels-last
    (`model.to(memory_format=torch.channels_last).to(torch.bfloat16)`, input likewise): CUDA events around
    each call after --warmup calls (torch.compile's first call, its compile time, timed apart), median of
    --repeats. Needs torchvision for the torchvision models; without it only convbnrelu has peers and the
    other rows time tilefuse alone (said so in the output).
  * tilefuse: `tilefuse bench FOLDER --backend cuda --warmup W --repeats R --json` on the f32 export and on
    the bf16 export, and `tilefuse run FOLDER --backend cuda --check --json`.

Usage:
    /tmp/torchenv/bin/python bench/conv_models.py --export-only --dtypes f32,bf16       # exports only
    /tmp/torchenv/bin/python bench/conv_models.py --models convbnrelu,resnet18 --batches 1 \\
        --md out.md --json out.json                                                  # CPU vs onnxruntime
    python bench/conv_models.py --device cuda --tilefuse build-gpu/tilefuse --md h100.md --json h100.json
Deps: torch, torchvision, onnx, onnxruntime (pip); GPU mode: torch with CUDA (torchvision optional).
"""
import argparse
import copy
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_models import (REPO, OPSET, Interference, wait_quiet, machine_info, openblas_corename,  # noqa: E402
                        binary_identity, git_commit, tilefuse_env, run_tilefuse, parse_json_stdout,
                        time_tilefuse, check_tilefuse, fmt_ms, runs_text, load_text)

SEED = 0

MODELS = {
    "convbnrelu": "conv+BN+ReLU micro-benchmark: x [B,64,56,56], Conv2d 3x3 64->64 pad 1 no bias, BatchNorm2d, ReLU",
    "resnet18": "torchvision ResNet-18 (11.7M params), 224x224, logits [B,1000]",
    "resnet50": "torchvision ResNet-50 (25.6M params), 224x224, logits [B,1000]",
    "mobilenet_v3_small": "torchvision MobileNetV3-small (2.5M params; depthwise, SE, HardSwish), 224x224, logits [B,1000]",
    "convnext_tiny": "torchvision ConvNeXt-tiny (28.6M params; 7x7 depthwise, LayerNorm, GELU), 224x224, logits [B,1000]",
}


def have_module(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def input_shape(name, batch):
    return (batch, 64, 56, 56) if name == "convbnrelu" else (batch, 3, 224, 224)


def make_input(name, batch):
    import torch
    gen = torch.Generator().manual_seed(SEED + 1)
    return torch.randn(input_shape(name, batch), generator=gen, dtype=torch.float32)


def calibrate_batchnorm(model, name):
    """Running statistics of every BatchNorm from one train-mode pass over a fixed random batch of 4."""
    import torch
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return None
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: after one batch, that batch's statistics
    gen = torch.Generator().manual_seed(SEED + 2)
    x = torch.randn(input_shape(name, 4), generator=gen)
    model.train()
    with torch.no_grad():
        model(x)
    model.eval()
    return f"{len(bns)} BatchNorms calibrated on one random batch of 4 (train mode, cumulative average)"


def make_torch_model(name):
    """The f32 module, eval mode, seeded random weights, BatchNorms calibrated. Raises ImportError when
    torchvision is needed and absent."""
    import torch
    torch.manual_seed(SEED)
    if name == "convbnrelu":
        model = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False),
                                    torch.nn.BatchNorm2d(64), torch.nn.ReLU())
    else:
        import torchvision
        model = getattr(torchvision.models, name)(weights=None)
    note = calibrate_batchnorm(model, name)
    return model.eval(), note


def folder_name(workdir, name, batch, dtype):
    return os.path.join(workdir, f"{name}_b{batch}" + ("" if dtype == "f32" else f"_{dtype}"))


def folder_bytes(folder):
    sizes = {}
    for sub in ("model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"):
        p = os.path.join(folder, sub)
        if os.path.exists(p):
            sizes[sub] = os.path.getsize(p)
    total = 0
    for root, _, files in os.walk(folder):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    sizes["total"] = total
    return sizes


def bf16_tensor_proto(t, name):
    """A bf16 torch tensor as an ONNX TensorProto (raw bits; numpy has no bf16)."""
    import torch
    from onnx import TensorProto
    tp = TensorProto()
    tp.name = name
    tp.data_type = TensorProto.BFLOAT16
    tp.dims.extend(list(t.shape))
    tp.raw_data = t.detach().contiguous().to(torch.bfloat16).view(torch.int16).numpy().tobytes()
    return tp


def export_one(name, batch, dtype, folder, log):
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper

    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    model, bn_note = make_torch_model(name)
    x = make_input(name, batch)
    path = os.path.join(folder, "model.onnx")
    meta = {"model": name, "description": MODELS[name], "batch": batch, "dtype": dtype, "seed": SEED,
            "input_shape": list(x.shape), "params": int(sum(p.numel() for p in model.parameters())),
            "batchnorm": bn_note, "torch": torch.__version__, "onnx": onnx.__version__,
            "exporter": f"torch.onnx.export legacy TorchScript exporter (dynamo=False), opset {OPSET}"}
    if have_module("torchvision"):
        import torchvision
        meta["torchvision"] = torchvision.__version__
    if dtype == "bf16":
        with torch.no_grad():
            ref = model(x.to(torch.bfloat16).float())  # truth: f32 on the bf16-rounded input
        model = model.to(torch.bfloat16)
        x = x.to(torch.bfloat16)
    # The exporter folds an eval-mode BatchNorm into the Conv before it (the torchvision models arrive with
    # their BatchNorms folded, as onnxruntime would fold them anyway); the micro-benchmark keeps its
    # BatchNormalization node (TrainingMode.PRESERVE on an eval-mode module: training_mode 0) for tilefuse to fuse.
    keep_bn = name == "convbnrelu"
    meta["batchnorm_in_onnx"] = ("kept (BatchNormalization node, TrainingMode.PRESERVE)" if keep_bn
                                 else "folded into the Convs by the exporter")
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                          opset_version=OPSET, dynamo=False, do_constant_folding=True,
                          training=torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL)
        torch_out = model(x)
    meta["export_s"] = round(time.time() - t0, 1)
    m = onnx.load(path)
    meta.update(opset=int(m.opset_import[0].version), nodes=len(m.graph.node),
                ops=sorted({n.op_type for n in m.graph.node}))
    in_name, out_name = m.graph.input[0].name, m.graph.output[0].name
    tdir = os.path.join(folder, "test_data_set_0")
    if dtype == "f32":
        ref = torch_out.numpy()
        meta["reference_output"] = "PyTorch eager (f32, CPU): onnxruntime is not installed here"
        if have_module("onnxruntime"):
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # reference: unoptimised
            ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
                None, {in_name: x.numpy()})[0]
            meta["onnxruntime"] = ort.__version__
            meta["reference_output"] = "onnxruntime CPUExecutionProvider, graph optimizations off"
        diff = np.abs(ref.astype(np.float64) - torch_out.numpy().astype(np.float64))
        meta["output_scale"] = float(np.max(np.abs(ref)))
        meta["ort_vs_torch_max_abs"] = float(diff.max())
        meta["ort_vs_torch_rel_to_scale"] = float(diff.max() / meta["output_scale"])
        onnx.save_tensor(numpy_helper.from_array(x.numpy(), in_name), os.path.join(tdir, "input_0.pb"))
        onnx.save_tensor(numpy_helper.from_array(ref, out_name), os.path.join(tdir, "output_0.pb"))
    else:
        meta["reference_output"] = ("PyTorch eager f32 module on the bf16-rounded input (CPU), rounded to bf16")
        ref64 = ref.double()
        diff = (torch_out.double() - ref64).abs()
        meta["output_scale"] = float(ref64.abs().max())
        meta["torch_bf16_vs_f32_max_abs"] = float(diff.max())
        meta["torch_bf16_vs_f32_rel_to_scale"] = float(diff.max() / meta["output_scale"])
        onnx.save_tensor(bf16_tensor_proto(x, in_name), os.path.join(tdir, "input_0.pb"))
        onnx.save_tensor(bf16_tensor_proto(ref, out_name), os.path.join(tdir, "output_0.pb"))
    meta["output_shape"] = list(torch_out.shape)
    meta["bytes"] = folder_bytes(folder)
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    floor = meta.get("ort_vs_torch_rel_to_scale", meta.get("torch_bf16_vs_f32_rel_to_scale"))
    log(f"  exported {name} b{batch} {dtype}: {meta['nodes']} nodes, {meta['params'] / 1e6:.1f}M params, "
        f"{meta['bytes']['total'] / 2**20:.1f} MiB, {meta['export_s']:.0f} s; output scale "
        f"{meta['output_scale']:.3g}, noise floor (rel to scale) {floor:.2g}")
    return meta


def ensure_export(name, batch, dtype, workdir, log, force=False):
    """(folder, meta): the cached export, else a new one. Raises when it can neither find nor make it."""
    folder = folder_name(workdir, name, batch, dtype)
    meta_path = os.path.join(folder, "meta.json")
    if not force and os.path.exists(meta_path) and os.path.exists(os.path.join(folder, "model.onnx")):
        with open(meta_path) as f:
            meta = json.load(f)
        meta["bytes"] = folder_bytes(folder)
        log(f"  cached export: {folder}")
        return folder, meta
    missing = [m for m in ["torch", "onnx"] + ([] if name == "convbnrelu" else ["torchvision"]) if not have_module(m)]
    if missing:
        raise RuntimeError(f"no export at {folder} and this Python lacks {', '.join(missing)} to make one "
                           f"(run the export step where torch + torchvision + onnx exist and carry the folder)")
    return folder, export_one(name, batch, dtype, folder, log)


# --------------------------------------------------------------------------------------------
# CPU: onnxruntime vs tilefuse


def time_ort(folder, threads, warmup, repeats):
    """cpu_models.time_ort with the input name read from the input file (cpu_models' is input_ids)."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    t = onnx.load_tensor(os.path.join(folder, "test_data_set_0", "input_0.pb"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), so, providers=["CPUExecutionProvider"])
    create_s = time.perf_counter() - t0
    feeds = {sess.get_inputs()[0].name: numpy_helper.to_array(t)}
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    del sess
    return {"ms": statistics.median(times), "times_ms": [round(t, 3) for t in times], "session_create_s": create_s}


def measure_cpu_row(args, row, folder, coretypes, warmup, repeats, rounds, log):
    """cpu_models.py's rounds: alternate order, wait for quiet, repeat a measurement others disturbed."""
    dests = {"ort": row["ort"], **row["tilefuse"]}
    failed = set()
    for rnd in range(rounds):
        busy = wait_quiet(args.quiet_busy, args.wait_quiet, log)
        order = ["ort"] + coretypes if rnd % 2 == 0 else coretypes[::-1] + ["ort"]
        for who in order:
            if who in failed:  # an error (an import failure, a crash) does not go away by itself
                continue
            dest = dests[who]
            label = "onnxruntime" if who == "ort" else f"tilefuse ({who})"
            for attempt in range(args.retries + 1):
                if attempt:
                    busy = wait_quiet(args.quiet_busy, args.wait_quiet, log)
                with Interference() as noise:
                    if who == "ort":
                        try:
                            x = time_ort(folder, args.threads, warmup, repeats)
                        except Exception as e:
                            x = {"error": f"{type(e).__name__}: {e}"}
                    else:  # `tilefuse bench` defaults to --backend cpu
                        x = time_tilefuse(args, folder, tilefuse_env(args.threads, who), warmup, repeats)
                x["busy_before"] = round(busy, 3)
                x["loadavg_after"] = os.getloadavg()
                x["others_cpu_fraction"] = round(noise.fraction, 3)
                have_clean = any(not r["contaminated"] for r in dest["runs"])
                if "error" in x or noise.fraction <= args.max_interference or attempt == args.retries or have_clean:
                    break
                dest.setdefault("discarded", []).append({"ms": x.get("ms"), "others_cpu_fraction": x["others_cpu_fraction"]})
                log(f"  round {rnd}: {label} {x['ms']:.2f} ms discarded: other processes used "
                    f"{noise.fraction:.0%} of the CPUs meanwhile; again")
            if "error" in x:
                dest["errors"].append(x["error"])
                failed.add(who)
                log(f"  round {rnd}: {label} FAILED: {x['error'][:600]}")
                continue
            x["contaminated"] = noise.fraction > args.max_interference
            dest["runs"].append(x)
            dest["round_ms"].append(x["ms"])
            if who != "ort":
                dest["last"] = x
            extra = f" (unfused {x['unfused_ms']:.2f})" if who != "ort" else ""
            log(f"  round {rnd}: {label} {x['ms']:.2f} ms{extra}; others used {noise.fraction:.0%} of the CPUs"
                + (" — CONTAMINATED" if x["contaminated"] else ""))
    for dest in dests.values():
        clean = [r["ms"] for r in dest["runs"] if not r["contaminated"]]
        pool = clean or [r["ms"] for r in dest["runs"]]
        dest["best_ms"] = min(pool) if pool else None
        dest["best_contaminated"] = bool(dest["runs"]) and not clean
        dest["median_of_rounds_ms"] = statistics.median(dest["round_ms"]) if dest["round_ms"] else None


def run_cpu(args, res, exports, coretypes, log):
    import onnxruntime as ort
    res["versions"]["onnxruntime"] = ort.__version__
    try:
        res["versions"]["openblas"] = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version}", "libopenblas0-openmp"],
            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    res["openblas_cores"] = {c: openblas_corename(tilefuse_env(args.threads, c)) for c in coretypes}
    for (name, b, dtype), (folder, meta) in exports.items():
        if dtype != "f32":
            continue  # onnxruntime's CPU provider has no bf16 convolution: CPU mode is f32
        row = {"model": name, "batch": b, "folder": folder, "meta": meta,
               "ort": {"round_ms": [], "runs": [], "errors": []},
               "tilefuse": {c: {"round_ms": [], "runs": [], "errors": []} for c in coretypes}}
        large = b >= args.large_batch
        row["warmup"] = min(args.warmup, args.large_warmup) if large else args.warmup
        row["repeats"] = min(args.repeats, args.large_repeats) if large else args.repeats
        row["rounds"] = min(args.rounds, args.large_rounds) if large else args.rounds
        log(f"time {name} b{b} ({row['warmup']} warm-up, {row['repeats']} repeats, {row['rounds']} rounds)")
        measure_cpu_row(args, row, folder, coretypes, row["warmup"], row["repeats"], row["rounds"], log)
        if not args.no_check:
            row["check"] = check_tilefuse(args, folder, tilefuse_env(args.threads, coretypes[0]), meta)
            log(f"  check: {json.dumps({k: v for k, v in row['check'].items() if k != 'reference_kernels'})[:600]}")
        res["rows"].append(row)
        if args.json:  # partial results as they come
            with open(args.json + ".partial", "w") as f:
                json.dump(res, f, indent=1, default=str)


# --------------------------------------------------------------------------------------------
# GPU: PyTorch eager / torch.compile vs tilefuse


def time_torch_cuda(fn, x, warmup, repeats):
    """Median of `repeats` calls timed with CUDA events, after `warmup` untimed calls."""
    import torch
    with torch.no_grad():
        for _ in range(warmup):
            fn(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
    return {"ms": statistics.median(times), "times_ms": [round(t, 4) for t in times]}


def torch_peers(name, batch, dtype, args, log):
    """{eager: {...}, compile: {...}} for one model, batch and dtype (bf16: channels-last)."""
    import torch
    out = {}
    try:
        model, _ = make_torch_model(name)
    except ImportError as e:
        return {"error": f"peers need torchvision ({e}); tilefuse timed alone"}
    x = make_input(name, batch)
    model = model.cuda()
    x = x.cuda()
    if dtype == "bf16":
        model = model.to(memory_format=torch.channels_last).to(torch.bfloat16)
        x = x.to(memory_format=torch.channels_last).to(torch.bfloat16)
    for mode in ("eager", "compile"):
        try:
            if mode == "eager":
                fn = model
            else:
                torch._dynamo.reset()
                fn = torch.compile(copy.deepcopy(model))
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                with torch.no_grad():
                    fn(x)  # compiles
                torch.cuda.synchronize()
                out.setdefault("compile_first_call_s", round(time.perf_counter() - t0, 1))
            out[mode] = time_torch_cuda(fn, x, args.warmup, args.repeats)
            log(f"  torch {mode} {dtype}: {out[mode]['ms']:.3f} ms")
        except Exception as e:  # out of memory, a compile failure: report, go on
            out[mode] = {"error": f"{type(e).__name__}: {str(e)[:1000]}"}
            log(f"  torch {mode} {dtype} FAILED: {out[mode]['error'][:300]}")
        finally:
            fn = None
            torch.cuda.empty_cache()
    del model, x
    torch.cuda.empty_cache()
    return out


def bench_tilefuse_cuda(args, folder):
    cmd = ["bench", folder, "--backend", "cuda", "--warmup", str(args.warmup), "--repeats", str(args.repeats), "--json"]
    if args.tilefuse_tune:
        cmd.append("--tune")
    p, err = run_tilefuse(args, cmd, dict(os.environ), args.timeout)
    if err:
        return {"error": err}
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-2000:]}"}
    try:
        j = parse_json_stdout(p)
    except (ValueError, json.JSONDecodeError) as e:
        return {"error": f"bad JSON ({e}): {p.stdout[-500:]}"}
    f, u = j["fused"], j["unfused"]
    return {"ms": f["ms"], "unfused_ms": u["ms"], "kernels": f["kernels"], "unfused_kernels": u["kernels"],
            "tflops": f.get("tflops"), "cuda_graph": f.get("cuda_graph"), "compile_cold_ms": f.get("compile_cold_ms"),
            "arena_bytes": f.get("arena_bytes"), "gflop": j["flops"] / 1e9, "device": j.get("device"),
            "groups": j.get("groups", [])}


def check_tilefuse_cuda(args, folder, meta):
    """cpu_models.check_tilefuse with --backend cuda."""
    p, err = run_tilefuse(args, ["run", folder, "--backend", "cuda", "--check", "--json"], dict(os.environ), args.timeout)
    if err:
        return {"error": err}
    try:
        j = parse_json_stdout(p)
    except (ValueError, json.JSONDecodeError):
        return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-2000:]}"}
    if j.get("error"):
        return {"error": f"{j['error'].get('code')}: {j['error'].get('message')}", "status": j.get("status")}
    out = j["outputs"][0]
    res = {"status": j.get("status"), "backend": j.get("backend"), "backend_note": j.get("backend_note"),
           "max_abs_err": out.get("max_abs_err"), "max_rel_err": out.get("max_rel_err"),
           "mismatches": out.get("mismatches"), "pass": out.get("pass")}
    if res["max_abs_err"] is not None and meta.get("output_scale"):
        res["rel_to_scale"] = res["max_abs_err"] / meta["output_scale"]
    return res


def run_cuda(args, res, exports, rows_wanted, log):
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no GPU")
    torch.backends.cudnn.allow_tf32 = args.peer_tf32
    torch.backends.cuda.matmul.allow_tf32 = args.peer_tf32
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    res["gpu"] = torch.cuda.get_device_name(0)
    res["versions"]["cuda (torch)"] = torch.version.cuda
    res["versions"]["cudnn"] = torch.backends.cudnn.version()
    res["peer_settings"] = {"tf32": args.peer_tf32, "cudnn_benchmark": args.cudnn_benchmark,
                            "torch.compile": "default mode"}
    if not have_module("torchvision"):
        msg = ("torchvision is not importable here: PyTorch peers need it for the torchvision models; those rows "
               "time tilefuse alone (on exports carried here); convbnrelu still has peers")
        log("NOTE: " + msg)
        res["notes"].append(msg)
    for name, b, dtype in rows_wanted:
        row = {"model": name, "batch": b, "dtype": dtype}
        log(f"cuda {name} b{b} {dtype}")
        row["torch"] = torch_peers(name, b, dtype, args, log)
        if (name, b, dtype) in exports:
            folder, meta = exports[(name, b, dtype)]
            row["folder"], row["meta"] = folder, meta
            torch.cuda.empty_cache()
            row["tilefuse"] = bench_tilefuse_cuda(args, folder)
            log(f"  tilefuse: {row['tilefuse'].get('ms', row['tilefuse'].get('error', '?'))}")
            if not args.no_check:
                row["check"] = check_tilefuse_cuda(args, folder, meta)
                log(f"  check: {json.dumps(row['check'])[:400]}")
        else:
            row["tilefuse"] = {"error": f"no {dtype} export: {res['export_errors'].get(f'{name} b{b} {dtype}', '?')}"}
        res["rows"].append(row)
        if args.json:
            with open(args.json + ".partial", "w") as f:
                json.dump(res, f, indent=1, default=str)


# --------------------------------------------------------------------------------------------
# Report


def err_cell(c):
    if not c:
        return "—"
    if c.get("max_abs_err") is not None:
        return f"{c.get('status')}: {c['max_abs_err']:.2g} ({c.get('rel_to_scale', float('nan')):.1e})"
    return "error: " + str(c.get("error", "?"))[:120].replace("|", "/").replace("\n", " ")


def header(res, L):
    m = res["machine"]
    L.append(f"- {m.get('Model name', '?')} (family {m.get('CPU family', '?')} model {m.get('Model', '?')}), "
             f"{m.get('Hypervisor vendor', 'bare metal')}: **{m['nproc']} cores**, L2 {m.get('L2 cache', '?')}, "
             f"L3 {m.get('L3 cache', '?')}, {m.get('mem_gib', '?')} GiB; AVX-512 {'yes' if m.get('avx512f') else 'no'}; "
             f"GPU: {res.get('gpu', m.get('gpu', 'none'))}.")
    L.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()) + ".")
    L.append(f"- Models: random weights (torch.manual_seed({SEED}), `weights=None`), BatchNorm statistics calibrated "
             "on one random batch of 4 (see the script's docstring); random input (fixed seed); exported with "
             f"{res['exporter_summary']}.")


def sizes_table(res, L):
    ex = res.get("exports", [])
    if not ex:
        return
    L.append("Exports (bytes on disk; carry these to a machine without torchvision):\n")
    L.append("| folder | model.onnx MiB | input MiB | output KiB | total MiB | nodes | ops | noise floor (rel to scale) |")
    L.append("|---|---|---|---|---|---|---|---|")
    for e in ex:
        b = e["bytes"]
        floor = e.get("ort_vs_torch_rel_to_scale", e.get("torch_bf16_vs_f32_rel_to_scale"))
        L.append(f"| {os.path.basename(e['folder'])} | {b.get('model.onnx', 0) / 2**20:.1f} | "
                 f"{b.get('test_data_set_0/input_0.pb', 0) / 2**20:.1f} | {b.get('test_data_set_0/output_0.pb', 0) / 2**10:.1f} | "
                 f"{b['total'] / 2**20:.1f} | {e.get('nodes', '?')} | {' '.join(e.get('ops', []))} | "
                 + (f"{floor:.1e}" if floor is not None else "?") + " |")
    L.append(f"\nTotal: {sum(e['bytes']['total'] for e in ex) / 2**20:.0f} MiB.\n")


def write_markdown_cpu(res, path):
    L = [f"# Convolution networks on the CPU: tilefuse vs onnxruntime — {res['date']} (issue 14)\n",
         "Written by `bench/conv_models.py` (command below).\n", "## Machine and method\n"]
    header(res, L)
    L.append(f"- Threads: **{res['threads']}** for both (onnxruntime intra_op_num_threads, inter_op 1, sequential, "
             "ORT_ENABLE_ALL; tilefuse OMP_NUM_THREADS = OPENBLAS_NUM_THREADS).")
    L.append("- tilefuse columns (OpenBLAS core type): " + "; ".join(
        f"`{c}` → {res['openblas_cores'].get(c, '?')}" for c in res["coretypes"])
        + (f" (the environment sets OPENBLAS_CORETYPE={res['env_openblas_coretype']})" if res.get("env_openblas_coretype") else "")
        + f". Binary: {res['tilefuse']} ({res['versions'].get('tilefuse_binary', '?')}).")
    L.append(f"- Timing: {res['warmup']} warm-up runs, then the median of {res['repeats']} runs; {res['rounds']} "
             f"rounds (order alternating), each after waiting for the machine to be quiet (< {res['quiet_busy']:.0%} busy, "
             f"at most {res['wait_quiet']:.0f} s); a measurement during which other processes used more than "
             f"{res['max_interference']:.0%} of the CPUs is "
             + (f"repeated, up to {res['retries']} times, while no undisturbed one exists (else kept, marked *). "
                if res["retries"] else "kept but marked * (no retries in this run). ")
             + "**The table gives the best round's median**; the JSON has every run. "
             "tilefuse: `tilefuse bench FOLDER --backend cpu --json` (fused plan; unfused in the details).")
    larges = sorted({f"b{r['batch']}: {r['warmup']} warm-up, median of {r['repeats']}, {r['rounds']} round(s)"
                     for r in res["rows"] if (r["repeats"], r["rounds"], r["warmup"]) != (res["repeats"], res["rounds"], res["warmup"])})
    if larges:
        L.append("- Large batches: " + "; ".join(larges) + ".")
    L.append("- Correctness: `tilefuse run FOLDER --backend cpu --check --json` against onnxruntime's output (graph "
             "optimizations off) on the same input: status, max abs error (that error / max |output|); tilefuse's "
             "whole-model rule (f32: |a - e| <= 1e-4 max|e| + 1e-4 |e| per element). `ort vs torch`: the f32 noise floor.")
    L.append(f"- Command: `{res['command']}`")
    for n in res.get("notes", []):
        L.append(f"- **Note:** {n}")
    L.append("\n## Results\n")
    cts = res["coretypes"]
    L.append("| model | batch | onnxruntime ms | " + " | ".join(f"tilefuse ms ({c})" for c in cts) + " | "
             + " | ".join(f"tilefuse / ort ({c})" for c in cts) + " | tilefuse check: max abs (rel) | ort vs torch (rel) |")
    L.append("|" + "---|" * (5 + 2 * len(cts)))
    for r in res["rows"]:
        ort_ms = r["ort"].get("best_ms")
        cells = [r["model"], str(r["batch"]),
                 (fmt_ms(ort_ms) + ("*" if r["ort"].get("best_contaminated") else "")) if ort_ms is not None else "error"]
        ratios = []
        for c in cts:
            t = r["tilefuse"][c]
            if t.get("best_ms") is not None:
                cells.append(fmt_ms(t["best_ms"]) + ("*" if t.get("best_contaminated") else ""))
                ratios.append(f"{t['best_ms'] / ort_ms:.2f}x" if ort_ms else "—")
            else:
                cells.append("error")
                ratios.append("—")
        cells += ratios
        cells.append(err_cell(r.get("check")))
        mt = r["meta"]
        cells.append(f"{mt['ort_vs_torch_max_abs']:.2g} ({mt['ort_vs_torch_rel_to_scale']:.1e})"
                     if "ort_vs_torch_max_abs" in mt else "?")
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    for k, e in res.get("export_errors", {}).items():
        L.append(f"- {k}: export failed: {e}")
    errs = [(r, who, e) for r in res["rows"] for who, d in [("onnxruntime", r["ort"])] + [
        (f"tilefuse ({c})", r["tilefuse"][c]) for c in cts] for e in d.get("errors", [])]
    if errs:
        L.append("Errors:\n")
        for r, who, e in errs:
            L.append(f"- {r['model']} b{r['batch']} {who}:\n\n```\n{e[-3000:]}\n```\n")
    L.append("Per round (ms): " + "; ".join(
        f"{r['model']} b{r['batch']}: ort {runs_text(r['ort'])}"
        + "".join(f" / tilefuse {c} {runs_text(r['tilefuse'][c])}" for c in cts) for r in res["rows"]) + ".\n")
    L.append("Load (other processes' share of the CPUs during each measurement / 1-min load average after it): " + "; ".join(
        f"{r['model']} b{r['batch']}: ort {load_text(r['ort'])}"
        + "".join(f" / tilefuse {c} {load_text(r['tilefuse'][c])}" for c in cts) for r in res["rows"]) + ".\n")
    disc = [f"{r['model']} b{r['batch']} {who}: " + ", ".join(f"{fmt_ms(d['ms'])} ms ({d['others_cpu_fraction']:.0%})"
                                                             for d in dest["discarded"])
            for r in res["rows"] for who, dest in [("ort", r["ort"])] + [(f"tilefuse {c}", r["tilefuse"][c]) for c in cts]
            if dest.get("discarded")]
    if disc:
        L.append("Discarded (disturbed) measurements: " + "; ".join(disc) + ".\n")
    extra = []
    for r in res["rows"]:
        for c in cts:
            t = r["tilefuse"][c]
            if t.get("last"):
                x = t["last"]
                unf = min(y["unfused_ms"] for y in t["runs"])
                extra.append(f"| {r['model']} | {r['batch']} | {c} | {x['kernels']} | {x['unfused_kernels']} | "
                             f"{fmt_ms(unf)} | {x['gflop']:.2f} | {x['gflop'] / (t['best_ms'] * 1e-3):.1f} | "
                             f"{x['compile_cold_ms'] / 1e3:.1f} | {x['peak_intermediate_bytes'] / 2**20:.1f} |")
    if extra:
        L.append("tilefuse details (`tilefuse bench`):\n")
        L.append("| model | batch | OpenBLAS | fused kernels | unfused kernels | unfused ms (best) | GFLOP | GFLOP/s (fused) | compile cold s | arena MiB |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        L += extra
        L.append("")
    ort_gf = [f"{r['model']} b{r['batch']} {r['tilefuse'][cts[0]]['last']['gflop'] / (r['ort']['best_ms'] * 1e-3):.1f}"
              for r in res["rows"] if r["ort"].get("best_ms") and r["tilefuse"][cts[0]].get("last")]
    if ort_gf:
        L.append("onnxruntime GFLOP/s (tilefuse's flop count over onnxruntime's time): " + "; ".join(ort_gf) + ".\n")
    checks = [r for r in res["rows"] if r.get("check")]
    if checks:
        L.append("Correctness details:\n")
        L.append("| model | batch | status | max abs | max rel (per element) | mismatches | output scale | first run ms | kernels not generated |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for r in checks:
            c = r["check"]
            if c.get("error"):
                L.append(f"| {r['model']} | {r['batch']} | error | {err_cell(c)} | | | | | |")
                continue
            L.append(f"| {r['model']} | {r['batch']} | {c.get('status')} | {c.get('max_abs_err', 0):.3g} | "
                     f"{c.get('max_rel_err', 0):.3g} | {c.get('mismatches')} | {r['meta']['output_scale']:.3g} | "
                     f"{fmt_ms(c.get('first_run_ms'))} | {len(c.get('reference_kernels', []))} |")
        L.append("")
    sizes_table(res, L)
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def write_markdown_cuda(res, path):
    L = [f"# Convolution networks on the GPU: tilefuse vs PyTorch — {res['date']} (issue 14)\n",
         "Written by `bench/conv_models.py --device cuda` (command below).\n", "## Machine and method\n"]
    header(res, L)
    ps = res.get("peer_settings", {})
    L.append(f"- PyTorch: eager and torch.compile ({ps.get('torch.compile')}), CUDA events around each call, "
             f"{res['warmup']} warm-up calls, median of {res['repeats']}; f32 NCHW with TF32 "
             f"{'on' if ps.get('tf32') else 'off'} (cudnn and matmul), bf16 channels-last; cudnn.benchmark "
             f"{ps.get('cudnn_benchmark')}.")
    L.append(f"- tilefuse: `tilefuse bench FOLDER --backend cuda --json` ({res['warmup']} warm-up, median of "
             f"{res['repeats']}) on the f32 export and on the bf16 export (NCHW model; layout is tilefuse's choice); "
             f"check: `tilefuse run FOLDER --backend cuda --check --json` (whole-model rule; bf16 2e-2 of scale). "
             f"Binary: {res['tilefuse']} ({res['versions'].get('tilefuse_binary', '?')}).")
    L.append(f"- Command: `{res['command']}`\n")
    for n in res.get("notes", []):
        L.append(f"- **{n}**")
    L.append("\n## Results\n")
    L.append("| model | batch | dtype | eager ms | compile ms | tilefuse ms | tilefuse / eager | tilefuse / compile | "
             "tilefuse kernels | tilefuse check: max abs (rel) | noise floor (rel) |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def ms(d):
        return d.get("ms") if isinstance(d, dict) else None

    def peer(tp, k):  # '—' where there are no peers at all (no torchvision), 'error' where one failed
        return fmt_ms3(ms(tp[k])) if ms(tp.get(k)) else ("—" if tp.get("error") or not tp else "error")
    for r in res["rows"]:
        tp = r.get("torch", {})
        e, c, t = ms(tp.get("eager")), ms(tp.get("compile")), ms(r.get("tilefuse"))
        mt = r.get("meta", {})
        floor = mt.get("ort_vs_torch_rel_to_scale", mt.get("torch_bf16_vs_f32_rel_to_scale"))
        L.append(f"| {r['model']} | {r['batch']} | {r['dtype']}{' (peers channels-last)' if r['dtype'] != 'f32' else ''} | "
                 f"{peer(tp, 'eager')} | {peer(tp, 'compile')} | "
                 f"{fmt_ms3(t) if t else 'error'} | {f'{t / e:.2f}x' if t and e else '—'} | {f'{t / c:.2f}x' if t and c else '—'} | "
                 f"{r.get('tilefuse', {}).get('kernels', '—')} | {err_cell(r.get('check'))} | "
                 + (f"{floor:.1e}" if floor is not None else "—") + " |")
    L.append("")
    L.append("Noise floor: f32, onnxruntime vs PyTorch eager (CPU); bf16, PyTorch's bf16 eager (CPU) vs the f32 module, "
             "both relative to the output's scale. tilefuse's bf16 rule allows 2e-2 of scale; where PyTorch's own bf16 "
             "error is above that, a bf16 check failure says the random network amplifies rounding, not that tilefuse "
             "is wrong.")
    L.append("")
    errs = []
    for r in res["rows"]:
        tp = r.get("torch", {})
        if tp.get("error"):
            errs.append(f"{r['model']} b{r['batch']} {r['dtype']} torch: {tp['error']}")
        for k in ("eager", "compile"):
            if isinstance(tp.get(k), dict) and tp[k].get("error"):
                errs.append(f"{r['model']} b{r['batch']} {r['dtype']} torch {k}: {tp[k]['error'][:500]}")
        if r.get("tilefuse", {}).get("error"):
            errs.append(f"{r['model']} b{r['batch']} {r['dtype']} tilefuse: {r['tilefuse']['error'][-1500:]}")
    if errs:
        L.append("Errors:\n")
        L += [f"- {x}" for x in errs]
        L.append("")
    comp = [f"{r['model']} b{r['batch']} {r['dtype']} {r['torch']['compile_first_call_s']} s"
            for r in res["rows"] if r.get("torch", {}).get("compile_first_call_s") is not None]
    if comp:
        L.append("torch.compile first call (compile) time: " + "; ".join(comp) + ".\n")
    det = [f"| {r['model']} | {r['batch']} | {r['dtype']} | {fmt_ms3(r['tilefuse']['unfused_ms'])} | "
           f"{r['tilefuse']['unfused_kernels']} | {r['tilefuse'].get('tflops') or 0:.1f} | {r['tilefuse'].get('cuda_graph')} | "
           f"{(r['tilefuse'].get('compile_cold_ms') or 0) / 1e3:.1f} |"
           for r in res["rows"] if r.get("tilefuse", {}).get("ms")]
    if det:
        L.append("tilefuse details:\n")
        L.append("| model | batch | dtype | unfused ms | unfused kernels | TF/s (fused) | CUDA graph | compile cold s |")
        L.append("|---|---|---|---|---|---|---|---|")
        L += det
        L.append("")
    sizes_table(res, L)
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def fmt_ms3(x):
    return "—" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--models", default=",".join(MODELS), help="comma list of: " + ", ".join(MODELS))
    ap.add_argument("--batches", default="1,32", help="comma list of batch sizes")
    ap.add_argument("--dtypes", default=None,
                    help="exports to make / rows to run: f32 and/or bf16 (default: f32 on cpu, f32,bf16 on cuda)")
    ap.add_argument("--workdir", default="/tmp/tilefuse-conv-models", help="export cache")
    ap.add_argument("--export-only", action="store_true", help="make the exports and stop")
    ap.add_argument("--force-export", action="store_true")
    ap.add_argument("--tilefuse", default=os.path.join(REPO, "build", "tilefuse"))
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="cpu: threads for both")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="cpu: rounds")
    ap.add_argument("--openblas-coretype", default=None,
                    help="cpu: comma list of tilefuse variants: inherit, auto, or a core name (default: inherit, plus "
                         "auto when the environment sets OPENBLAS_CORETYPE)")
    ap.add_argument("--large-batch", type=int, default=8, help="cpu: batches at least this use the --large-* settings")
    ap.add_argument("--large-warmup", type=int, default=1)
    ap.add_argument("--large-repeats", type=int, default=3)
    ap.add_argument("--large-rounds", type=int, default=1)
    ap.add_argument("--quiet-busy", type=float, default=0.15, help="cpu: busy fraction below which the machine is quiet")
    ap.add_argument("--wait-quiet", type=float, default=300, help="cpu: seconds to wait for quiet before each round")
    ap.add_argument("--max-interference", type=float, default=0.05,
                    help="cpu: a measurement during which other processes used more of the CPUs than this is repeated")
    ap.add_argument("--retries", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per tilefuse command")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument("--peer-tf32", action="store_true", help="cuda: let PyTorch's f32 convs and matmuls use TF32")
    ap.add_argument("--cudnn-benchmark", action="store_true", help="cuda: torch.backends.cudnn.benchmark = True")
    ap.add_argument("--tilefuse-tune", action="store_true", help="cuda: pass --tune to tilefuse bench")
    ap.add_argument("--binary-commit", help="the commit the tilefuse binary was built from, when it is a copy "
                    "(default: the repository's HEAD when this runs)")
    ap.add_argument("--note", action="append", default=[], help="a line for the results' method section (repeatable)")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--md", help="write the results as markdown here")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m}; known: {', '.join(MODELS)}")
    batches = [int(b) for b in args.batches.split(",") if b]
    dtypes = (args.dtypes or ("f32" if args.device == "cpu" else "f32,bf16")).split(",")
    for d in dtypes:
        if d not in ("f32", "bf16"):
            ap.error(f"unknown dtype {d}")
    os.makedirs(args.workdir, exist_ok=True)

    import torch
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    env_core = os.environ.get("OPENBLAS_CORETYPE")
    coretypes = (args.openblas_coretype.split(",") if args.openblas_coretype
                 else (["inherit", "auto"] if env_core else ["inherit"]))
    res = {"date": args.date, "device": args.device,
           "command": "python " + shlex.join([os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:]),
           "machine": machine_info(args.threads), "threads": args.threads, "warmup": args.warmup,
           "repeats": args.repeats, "rounds": args.rounds, "quiet_busy": args.quiet_busy, "wait_quiet": args.wait_quiet,
           "max_interference": args.max_interference, "retries": args.retries, "coretypes": coretypes,
           "env_openblas_coretype": env_core, "tilefuse": args.tilefuse, "models": models, "batches": batches,
           "dtypes": dtypes, "rows": [], "notes": list(args.note), "loadavg_start": [round(x, 2) for x in os.getloadavg()]}
    res["versions"] = {"torch": torch.__version__, "python": platform.python_version(),
                       "tilefuse_commit": args.binary_commit or git_commit(),
                       "tilefuse_binary": binary_identity(args.tilefuse)}
    if args.binary_commit:
        res["versions"]["repository HEAD when run"] = git_commit()
    for mod in ("torchvision", "onnx", "onnxruntime"):
        if have_module(mod):
            res["versions"][mod] = __import__(mod).__version__

    # Exports first (they load the CPU; nothing is timed meanwhile).
    exports, res["export_errors"] = {}, {}
    for name in models:
        for b in batches:
            for d in dtypes:
                log(f"export {name} b{b} {d}")
                try:
                    exports[(name, b, d)] = ensure_export(name, b, d, args.workdir, log, args.force_export)
                except Exception as e:  # report, go on with the others
                    msg = f"{type(e).__name__}: {str(e)[:2000]}"
                    log(f"  export FAILED: {msg}")
                    res["export_errors"][f"{name} b{b} {d}"] = msg
    metas = [m for _, m in exports.values()]
    res["exporter_summary"] = "; ".join(sorted({m["exporter"] for m in metas})) or "?"
    res["exports"] = [{"folder": f, **{k: m.get(k) for k in ("bytes", "nodes", "ops", "ort_vs_torch_rel_to_scale",
                                                            "torch_bf16_vs_f32_rel_to_scale", "output_scale")}}
                      for f, m in exports.values()]
    for e in res["exports"]:
        log(f"  {os.path.basename(e['folder'])}: {e['bytes']['total'] / 2**20:.1f} MiB")
    if args.export_only:
        log(f"exports total {sum(e['bytes']['total'] for e in res['exports']) / 2**20:.0f} MiB under {args.workdir}")
        return

    if args.device == "cpu":
        run_cpu(args, res, exports, coretypes, log)
        writer = write_markdown_cpu
    else:
        run_cuda(args, res, exports, [(n, b, d) for n in models for b in batches for d in dtypes], log)
        writer = write_markdown_cuda

    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
        if os.path.exists(args.json + ".partial"):
            os.unlink(args.json + ".partial")
    if args.md:
        writer(res, args.md)
    tmp = tempfile.NamedTemporaryFile("w", suffix=".md", delete=False)
    tmp.close()
    writer(res, tmp.name)
    with open(tmp.name) as f:
        print(f.read())
    os.unlink(tmp.name)


if __name__ == "__main__":
    main()

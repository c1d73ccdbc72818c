#!/usr/bin/env python3
"""tilefuse's CPU backend against onnxruntime on real transformer models (issue 15).

Exports BERT-base, GPT-2 small (with its LM head) and a LLaMA-style model (4 layers, hidden 1024,
16 query / 4 KV heads, rotary, SwiGLU 2816) from `transformers` with RANDOM weights (configs built
here, nothing downloaded), f32, with torch.onnx.export (the legacy TorchScript exporter, opset 17;
the dynamo exporter only if the legacy one fails, and the results say which), at the shapes asked
for (batch x tokens: 1x128 and 8x512 by default). Exports are cached under --workdir, one
ONNX backend-test folder per model and shape:

    WORKDIR/<model>_<B>x<T>/model.onnx
    WORKDIR/<model>_<B>x<T>/test_data_set_0/input_0.pb    token ids (random, fixed seed)
    WORKDIR/<model>_<B>x<T>/test_data_set_0/output_0.pb   onnxruntime's output (the reference)
    WORKDIR/<model>_<B>x<T>/meta.json                    config, versions, exporter, torch vs ort

Then, for every model and shape, on this machine, in one run, with the same thread count
(--threads, default nproc):

  * onnxruntime (CPUExecutionProvider, intra_op_num_threads = threads, inter_op 1, sequential,
    ORT_ENABLE_ALL): `--warmup` untimed runs, then the median of `--repeats` timed runs;
  * tilefuse: `tilefuse bench MODEL --warmup W --repeats R --json` (CompiledGraph::Run: warm-up,
    then the median of repeats; fused, and the unfused plan as a side figure), with OMP_NUM_THREADS
    and OPENBLAS_NUM_THREADS = threads. One tilefuse column per --openblas-coretype variant:
    `inherit` keeps this process's OPENBLAS_CORETYPE (if the environment sets one), `auto` unsets it
    so OpenBLAS picks its kernels from CPUID, anything else is set as OPENBLAS_CORETYPE.

Both are timed in --rounds rounds (their order alternating), each round waiting first for the
machine to be quiet (--quiet-busy, --wait-quiet); a measurement during which other processes used
more than --max-interference of the CPUs is repeated (--retries) while no undisturbed one exists.
The table gives the best round's median, the JSON every round, with the other processes' CPU share
and the load average of each measurement. `tilefuse bench` times on its own random inputs (seed 0;
token ids only feed Gather, whose time does not depend on them); it also times the unfused plan
each time (a side figure; it makes tilefuse's columns the slow part of the run).

Correctness: `tilefuse run FOLDER --backend cpu --check --json` against onnxruntime's output on the
same token ids, under tilefuse's whole-model rule (f32: |a - e| <= 1e-4 * max|e| + 1e-4 * |e| per
element): max abs error, and that error relative to the output's scale (max |ort output|);
onnxruntime vs PyTorch eager is given as the f32 noise floor. Reported, never failed on.

Shapes with batch x tokens >= --large-tokens use --large-warmup/--large-repeats/--large-rounds (fewer
runs, to fit a small machine's time). Everything not measured is said so in the results.

Usage:
    /tmp/torchenv/bin/python bench/cpu_models.py --shapes 1x128 --out
    /tmp/torchenv/bin/python bench/cpu_models.py --models llama --shapes 1x128,8x512 --json-out x.json
Deps: torch (CPU), transformers, onnx, onnxruntime (pip).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 17
SEED = 0

# name -> (pretty name, builder kwargs); configs are built in code, weights random.
MODELS = {
    "bert": "BERT-base (BertModel, 12 layers, d 768, 12 heads; output last_hidden_state)",
    "gpt2": "GPT-2 small (GPT2LMHeadModel, 12 layers, d 768, 12 heads, vocab 50257; output logits)",
    "llama": "LLaMA-style (LlamaForCausalLM, 4 layers, d 1024, 16 q / 4 kv heads (GQA), head 64, "
             "rotary, SwiGLU 2816, vocab 32000; output logits)",
}


# --------------------------------------------------------------------------------------------
# Export


def make_model(name):
    import transformers
    if name == "bert":
        cfg = transformers.BertConfig(attn_implementation="eager")
        model = transformers.BertModel(cfg, add_pooling_layer=False)
    elif name == "gpt2":
        cfg = transformers.GPT2Config(attn_implementation="eager")
        model = transformers.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                                       num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=4,
                                       max_position_embeddings=2048, tie_word_embeddings=False,
                                       attn_implementation="eager")
        model = transformers.LlamaForCausalLM(cfg)
    else:
        raise ValueError(name)
    return cfg, model.eval()


def wrap(model, causal_lm):
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids):
            if causal_lm:
                return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]
            return self.m(input_ids=input_ids, return_dict=False)[0]

    return Wrapper(model).eval()


def patch_transformers_for_legacy_export():
    """transformers 5 looks for packed sequences with torch.diff, which the TorchScript exporter
    cannot export (UnsupportedOperatorError: aten::diff). With one sequence per row (always so
    here: position ids 0..T-1) it returns None; make it do so without tracing torch.diff."""
    notes = []
    try:
        import transformers.masking_utils as mu
        if hasattr(mu, "find_packed_sequence_indices"):
            mu.find_packed_sequence_indices = lambda position_ids: None
            notes.append("transformers.masking_utils.find_packed_sequence_indices patched to return None "
                         "(torch.diff is not exportable by the legacy exporter; one sequence per row here)")
    except ImportError:
        pass
    return notes


def export_one(name, batch, tokens, folder, log):
    import numpy as np
    import onnx
    import onnxruntime as ort
    import torch
    import transformers
    from onnx import numpy_helper

    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    notes = patch_transformers_for_legacy_export()
    torch.manual_seed(SEED)
    cfg, model = make_model(name)
    model = wrap(model, causal_lm=name != "bert")
    gen = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, cfg.vocab_size, (batch, tokens), generator=gen, dtype=torch.int64)
    path = os.path.join(folder, "model.onnx")
    t0 = time.time()
    exporter = "torch.onnx.export legacy TorchScript exporter (dynamo=False), opset 17"
    with torch.no_grad():
        try:
            torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=["output"],
                              opset_version=OPSET, dynamo=False, do_constant_folding=True)
        except Exception as e:  # the legacy exporter may be gone: use the dynamo one
            log(f"  {name}: legacy exporter failed ({type(e).__name__}: {e}); trying dynamo")
            exporter = f"torch.onnx.export dynamo=True, opset 18 (legacy failed: {type(e).__name__}: {e})"
            torch.onnx.export(model, (ids,), path, input_names=["input_ids"], output_names=["output"],
                              opset_version=18, dynamo=True, external_data=False)
        torch_out = model(ids).numpy()
    export_s = time.time() - t0
    m = onnx.load(path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # reference: unoptimised
    ort_out = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(
        None, {"input_ids": ids.numpy()})[0]
    onnx.save_tensor(numpy_helper.from_array(ids.numpy(), "input_ids"),
                     os.path.join(folder, "test_data_set_0", "input_0.pb"))
    onnx.save_tensor(numpy_helper.from_array(ort_out, m.graph.output[0].name),
                     os.path.join(folder, "test_data_set_0", "output_0.pb"))
    diff = np.abs(ort_out.astype(np.float64) - torch_out.astype(np.float64))
    scale = float(np.max(np.abs(ort_out)))
    meta = {
        "model": name, "batch": batch, "tokens": tokens, "seed": SEED,
        "config": {k: v for k, v in cfg.to_dict().items() if isinstance(v, (int, float, str, bool, type(None)))},
        "params": int(sum(p.numel() for p in model.parameters())),
        "exporter": exporter, "opset": int(m.opset_import[0].version), "nodes": len(m.graph.node),
        "ops": sorted({n.op_type for n in m.graph.node}), "notes": notes,
        "output_shape": list(ort_out.shape), "output_scale": scale,
        "ort_vs_torch_max_abs": float(diff.max()), "ort_vs_torch_rel_to_scale": float(diff.max() / scale),
        "torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
        "onnxruntime": ort.__version__, "export_s": round(export_s, 1),
        "reference_output": "onnxruntime CPUExecutionProvider, graph optimizations off",
    }
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(f"  exported {name} {batch}x{tokens}: {meta['nodes']} nodes, {meta['params'] / 1e6:.1f}M params, "
        f"{export_s:.0f} s; ort vs torch max abs {meta['ort_vs_torch_max_abs']:.3g}")
    return meta


def ensure_export(name, batch, tokens, workdir, log, force=False):
    import torch
    import transformers
    folder = os.path.join(workdir, f"{name}_{batch}x{tokens}")
    meta_path = os.path.join(folder, "meta.json")
    if not force and os.path.exists(meta_path) and os.path.exists(os.path.join(folder, "model.onnx")):
        with open(meta_path) as f:
            meta = json.load(f)
        if meta.get("torch") == torch.__version__ and meta.get("transformers") == transformers.__version__:
            log(f"  cached export: {folder}")
            return folder, meta
    return folder, export_one(name, batch, tokens, folder, log)


# --------------------------------------------------------------------------------------------
# Machine state


def cpu_busy(interval=1.0):
    """Fraction of all CPUs busy over `interval` seconds (from /proc/stat)."""
    def read():
        with open("/proc/stat") as f:
            parts = [int(x) for x in f.readline().split()[1:]]
        idle = parts[3] + parts[4]
        return sum(parts), idle
    t1, i1 = read()
    time.sleep(interval)
    t2, i2 = read()
    return 1.0 - (i2 - i1) / max(1, t2 - t1)


def busy_seconds():
    """All CPUs' busy time since boot (s), from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [int(x) for x in f.readline().split()[1:]]
    return (sum(parts[:8]) - parts[3] - parts[4]) / os.sysconf("SC_CLK_TCK")


def own_seconds():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Interference:
    """CPU time other processes used while a measurement ran, as a fraction of the machine
    (busy time of all CPUs minus this process's and its waited-for children's)."""

    def __enter__(self):
        self.t0, self.b0, self.o0 = time.time(), busy_seconds(), own_seconds()
        return self

    def __exit__(self, *exc):
        wall = time.time() - self.t0
        others = (busy_seconds() - self.b0) - (own_seconds() - self.o0)
        self.fraction = max(0.0, others) / max(1e-9, wall * os.cpu_count())
        return False


def wait_quiet(threshold, max_wait, log):
    """Waits until the machine is quiet (busy < threshold over a second); returns the last busy."""
    start = time.time()
    busy = cpu_busy()
    while busy > threshold and time.time() - start < max_wait:
        time.sleep(2)
        busy = cpu_busy()
    if busy > threshold:
        log(f"    machine still busy ({busy:.0%}) after {max_wait:.0f} s; measuring anyway")
    return busy


def machine_info(threads):
    info = {"nproc": os.cpu_count(), "threads": threads, "platform": platform.platform()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            if k in ("Model name", "CPU family", "Model", "Core(s) per socket", "Thread(s) per core", "Socket(s)",
                     "L2 cache", "L3 cache", "Hypervisor vendor"):
                info[k] = v
            if k == "Flags":
                info["avx512f"] = "avx512f" in v.split()
                info["avx512_bf16"] = "avx512_bf16" in v.split()
                info["amx"] = any(f.startswith("amx") for f in v.split())
    except OSError:
        pass
    import glob
    info["gpu"] = "present (/dev/nvidia*)" if glob.glob("/dev/nvidia[0-9]*") else "none"
    try:
        with open("/proc/meminfo") as f:
            info["mem_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return info


def openblas_corename(env):
    code = ("import ctypes;b=ctypes.CDLL('/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0');"
            "b.openblas_get_corename.restype=ctypes.c_char_p;print(b.openblas_get_corename().decode())")
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=60).stdout.strip() or "?"
    except Exception:
        return "?"


def binary_identity(path):
    """sha256 (first 12 hex) and mtime of the tilefuse binary timed: others may rebuild it meanwhile."""
    import hashlib
    try:
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        mtime = datetime.datetime.fromtimestamp(os.path.getmtime(path)).strftime("%Y-%m-%d %H:%M")
        return f"sha256 {digest}, built {mtime}"
    except OSError as e:
        return f"? ({e})"


def git_commit():
    try:
        sha = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return sha + (" (working tree has uncommitted changes)" if dirty else "")
    except OSError:
        return "?"


# --------------------------------------------------------------------------------------------
# Timing


def load_inputs(folder):
    import onnx
    from onnx import numpy_helper
    t = onnx.load_tensor(os.path.join(folder, "test_data_set_0", "input_0.pb"))
    return {"input_ids": numpy_helper.to_array(t)}


def time_ort(folder, threads, warmup, repeats):
    import onnxruntime as ort
    feeds = load_inputs(folder)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(os.path.join(folder, "model.onnx"), so, providers=["CPUExecutionProvider"])
    create_s = time.perf_counter() - t0
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    del sess
    return {"ms": statistics.median(times), "times_ms": [round(t, 3) for t in times], "session_create_s": create_s}


def tilefuse_env(threads, coretype):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if coretype == "auto":
        env.pop("OPENBLAS_CORETYPE", None)
    elif coretype != "inherit":
        env["OPENBLAS_CORETYPE"] = coretype
    return env


def run_tilefuse(args, cmd, env, timeout):
    """Runs the tilefuse binary; retries while it is missing (others rebuild it)."""
    for attempt in range(30):
        if os.path.exists(args.tilefuse):
            break
        time.sleep(10)
    try:
        p = subprocess.run([args.tilefuse] + cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: tilefuse {' '.join(cmd)}"
    except OSError as e:
        return None, f"{type(e).__name__}: {e}"
    return p, None


def parse_json_stdout(p):
    text = p.stdout
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON in stdout")
    return json.loads(text[start:])


def time_tilefuse(args, folder, env, warmup, repeats):
    cmd = ["bench", folder, "--warmup", str(warmup), "--repeats", str(repeats), "--json"]
    p, err = run_tilefuse(args, cmd, env, args.timeout)
    if err:
        return {"error": err}
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-2000:]}"}
    try:
        j = parse_json_stdout(p)
    except (ValueError, json.JSONDecodeError) as e:
        return {"error": f"bad JSON ({e}): {p.stdout[-500:]}"}
    return {"ms": j["fused"]["ms"], "unfused_ms": j["unfused"]["ms"], "kernels": j["fused"]["kernels"],
            "unfused_kernels": j["unfused"]["kernels"], "gflop": j["flops"] / 1e9,
            "compile_cold_ms": j["fused"]["compile_cold_ms"], "compile_warm_ms": j["fused"]["compile_warm_ms"],
            "peak_intermediate_bytes": j["fused"]["peak_intermediate_bytes"], "load_before": j["load_before"]}


def check_tilefuse(args, folder, env, meta):
    p, err = run_tilefuse(args, ["run", folder, "--backend", "cpu", "--check", "--json"], env, args.timeout)
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
           "mismatches": out.get("mismatches"), "pass": out.get("pass"), "reason": out.get("reason"),
           "first_run_ms": j.get("run_ms"), "num_kernels": j.get("num_kernels"),
           "reference_kernels": [k["name"] for k in j.get("kernels", []) if not k.get("generated")]}
    if res["max_abs_err"] is not None and meta.get("output_scale"):
        res["rel_to_scale"] = res["max_abs_err"] / meta["output_scale"]
    return res


# --------------------------------------------------------------------------------------------
# Report


def runs_text(dest):
    return ", ".join(fmt_ms(x["ms"]) + ("*" if x.get("contaminated") else "") for x in dest.get("runs", [])) or "none"


def load_text(dest):
    return ", ".join(f"{x['others_cpu_fraction']:.0%} / {x['loadavg_after'][0]:.2f}" for x in dest.get("runs", [])) or "—"


def fmt_ms(x):
    return "—" if x is None else f"{x:.1f}"


def write_markdown(res, path):
    L = []
    m = res["machine"]
    L.append(f"# CPU backend on transformer models vs onnxruntime — {res['date']} (issue 15)\n")
    L.append("Written by `bench/cpu_models.py` (command below).\n")
    L.append("## Machine and method\n")
    L.append(f"- {m.get('Model name', '?')} (family {m.get('CPU family', '?')} model {m.get('Model', '?')}), "
             f"{m.get('Hypervisor vendor', 'bare metal')} VM: **{m['nproc']} cores**, "
             f"{m.get('Thread(s) per core', '?')} thread per core, L2 {m.get('L2 cache', '?')}, "
             f"L3 {m.get('L3 cache', '?')}, {m.get('mem_gib', '?')} GiB; AVX-512 {'yes' if m.get('avx512f') else 'no'}, "
             f"AVX512-BF16 {'yes' if m.get('avx512_bf16') else 'no'}, AMX {'yes' if m.get('amx') else 'no'}; "
             f"GPU: {m.get('gpu', 'none')}.")
    L.append(f"- Threads: **{res['threads']}** for both (onnxruntime intra_op_num_threads; tilefuse "
             f"OMP_NUM_THREADS = OPENBLAS_NUM_THREADS).")
    v = res["versions"]
    L.append(f"- Versions: onnxruntime {v['onnxruntime']}, torch {v['torch']}, transformers {v['transformers']}, "
             f"onnx {v['onnx']}, Python {v['python']}; tilefuse commit {v['tilefuse_commit']}; "
             f"binary {v.get('tilefuse_binary', '?')}.")
    L.append(f"- OpenBLAS: {v.get('openblas', '?')}. tilefuse columns: "
             + "; ".join(f"`{c}` → OpenBLAS core {res['openblas_cores'].get(c, '?')}" for c in res["coretypes"])
             + (f" (this machine's environment sets OPENBLAS_CORETYPE={res['env_openblas_coretype']})"
                if res.get("env_openblas_coretype") else ""))
    L.append(f"- Export: {res['exporter_summary']}; random weights (seed {SEED}), random token ids; f32.")
    for n in res.get("export_notes", []):
        L.append(f"  - {n}")
    L.append(f"- Timing: {res['warmup']} warm-up runs, then the median of {res['repeats']} runs; "
             f"{res['rounds']} rounds (order alternating), each after waiting for the machine to be quiet "
             f"(< {res['quiet_busy']:.0%} busy over 1 s, at most {res['wait_quiet']:.0f} s); a measurement during which other "
             f"processes used more than {res['max_interference']:.0%} of the CPUs (/proc/stat busy time minus this "
             f"script's and its children's) is " + (f"repeated, up to {res['retries']} times, while no undisturbed one exists; "
                                                  if res['retries'] else "kept but marked * (no retries in this run); ") +
             "**the table gives the best round's median**, the JSON every round. onnxruntime in-process "
             "(CPUExecutionProvider, ORT_ENABLE_ALL, sequential, inter_op 1); tilefuse via `tilefuse bench "
             "--json` (fused plan; its unfused plan in the JSON).")
    L.append("- Correctness: `tilefuse run FOLDER --backend cpu --check --json` on the same token ids against "
             "onnxruntime's output (graph optimizations off); `rel` = max abs error / max |output|. "
             "`ort vs torch` is onnxruntime against PyTorch eager: the f32 noise floor. tilefuse's pass/fail is its "
             "whole-model rule (f32: |a - e| <= 1e-4 max|e| + 1e-4 |e| per element).")
    larges = sorted({f"{r['shape']}: {r['warmup']} warm-up, median of {r['repeats']}, {r['rounds']} round(s)"
                     for r in res["rows"] if r.get("repeats") != res["repeats"] or r.get("rounds") != res["rounds"]})
    if larges:
        L.append("- Large shapes, to fit the time on this machine: " + "; ".join(larges) + ".")
    L.append(f"- Shapes run: {', '.join(res['shapes'])}" + (f"; not run: {res['shapes_not_run']}" if res.get('shapes_not_run') else "") + ".")
    L.append(f"- Command: `{res['command']}`\n")
    L.append("## Results\n")
    cts = res["coretypes"]
    head = "| model | shape | onnxruntime ms | " + " | ".join(f"tilefuse ms ({c})" for c in cts) + " | " + \
           " | ".join(f"tilefuse / ort ({c})" for c in cts) + " | max abs err (rel) | ort vs torch (rel) |"
    L.append(head)
    L.append("|" + "---|" * (4 + 2 * len(cts) + 1))
    for r in res["rows"]:
        ort_ms = r["ort"].get("best_ms")
        cells = [r["model"], r["shape"], fmt_ms(ort_ms) + ("*" if r["ort"].get("best_contaminated") else "")]
        ratios = []
        for c in cts:
            t = r["tilefuse"].get(c, {})
            if t.get("best_ms") is not None:
                cells.append(fmt_ms(t["best_ms"]) + ("*" if t.get("best_contaminated") else ""))
                ratios.append(f"{t['best_ms'] / ort_ms:.2f}x" if ort_ms else "—")
            else:
                cells.append("error")
                ratios.append("—")
        cells += ratios
        chk = r.get("check", {})
        if chk.get("max_abs_err") is not None:
            cells.append(f"{chk['max_abs_err']:.2g} ({chk.get('rel_to_scale', float('nan')):.1e})")
        else:
            cells.append("error: " + str(chk.get("error", "?"))[:80])
        meta = r["meta"]
        cells.append(f"{meta['ort_vs_torch_max_abs']:.2g} ({meta['ort_vs_torch_rel_to_scale']:.1e})")
        L.append("| " + " | ".join(cells) + " |")
    L.append("")
    L.append(f"\\* other processes used more than {res['max_interference']:.0%} of the CPUs during every round of this "
             "measurement (none was undisturbed); read it with care.\n")
    for k, e in res.get("export_errors", {}).items():
        L.append(f"- {k}: export failed: {e}")
    L.append("Per round (ms): " + "; ".join(
        f"{r['model']} {r['shape']}: ort {runs_text(r['ort'])}"
        + "".join(f" / tilefuse {c} {runs_text(r['tilefuse'][c])}" for c in cts)
        for r in res["rows"]) + ".\n")
    L.append("Load while measuring (each measurement: share of the CPUs other processes used during it, then the "
             "1-minute load average at its end): " + "; ".join(
        f"{r['model']} {r['shape']}: ort {load_text(r['ort'])}"
        + "".join(f" / tilefuse {c} {load_text(r['tilefuse'][c])}" for c in cts)
        for r in res["rows"]) + (f". Load average when the run started: {res.get('loadavg_start')}." if res.get('loadavg_start') else ".") + "\n")
    disc = [f"{r['model']} {r['shape']} {who}: " + ", ".join(f"{fmt_ms(d['ms'])} ms ({d['others_cpu_fraction']:.0%})"
                                                            for d in dest["discarded"])
            for r in res["rows"] for who, dest in [("ort", r["ort"])] + [(f"tilefuse {c}", r["tilefuse"][c]) for c in cts]
            if dest.get("discarded")]
    if disc:
        L.append("Measurements discarded because other processes used more than "
                 f"{res['max_interference']:.0%} of the CPUs meanwhile (ms, their share): " + "; ".join(disc) + ".\n")
    extra = []
    for r in res["rows"]:
        for c in cts:
            t = r["tilefuse"].get(c, {})
            if t.get("last"):
                x = t["last"]
                unf = [y["unfused_ms"] for y in t.get("runs", []) if not y.get("contaminated")] or \
                    [y["unfused_ms"] for y in t.get("runs", [])]
                extra.append(f"| {r['model']} | {r['shape']} | {c} | {x['kernels']} | {fmt_ms(min(unf))} | "
                             f"{x['gflop']:.1f} | {x['gflop'] / (t['best_ms'] * 1e-3):.0f} | "
                             f"{x['compile_cold_ms'] / 1e3:.1f} | {x['peak_intermediate_bytes'] / 2**20:.1f} |")
            for e in t.get("errors", []):
                extra.append(f"| {r['model']} | {r['shape']} | {c} | error: {e[:200]} | | | | | |")
    if extra:
        L.append("tilefuse details (from `tilefuse bench`):\n")
        L.append("| model | shape | OpenBLAS | fused kernels | unfused ms (best round) | GFLOP | GFLOP/s (fused, best round) | compile cold s | arena MiB |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        L += extra
        L.append("")
    checks = [r for r in res["rows"] if r.get("check")]
    if checks:
        L.append("Correctness details (`tilefuse run --check`, whole-model rule; max rel per element is |a - e| / |e|, large where e is near zero):\n")
        L.append("| model | shape | status | max abs | max rel (per element) | mismatches | rel to scale | first (cold) run ms | reference-interpreter kernels |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for r in checks:
            c = r["check"]
            if c.get("error"):
                L.append(f"| {r['model']} | {r['shape']} | error | {c['error'][:300]} | | | | | |")
                continue
            L.append(f"| {r['model']} | {r['shape']} | {c.get('status')} | {c.get('max_abs_err', 0):.3g} | "
                     f"{c.get('max_rel_err', 0):.3g} | {c.get('mismatches')} | {c.get('rel_to_scale', 0):.2e} | "
                     f"{fmt_ms(c.get('first_run_ms'))} | {len(c.get('reference_kernels', []))} |")
        L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="bert,gpt2,llama", help="comma list of: " + ", ".join(MODELS))
    ap.add_argument("--shapes", default="1x128,8x512", help="comma list of BATCHxTOKENS")
    ap.add_argument("--workdir", default="/tmp/tilefuse-cpu-models", help="export cache and traces")
    ap.add_argument("--tilefuse", default=os.path.join(REPO, "build", "tilefuse"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--openblas-coretype", default=None,
                    help="comma list of tilefuse variants: inherit, auto, or a core name (default: inherit, plus "
                         "auto when the environment sets OPENBLAS_CORETYPE)")
    ap.add_argument("--large-tokens", type=int, default=2048,
                    help="shapes with batch x tokens at least this use the --large-* settings")
    ap.add_argument("--large-warmup", type=int, default=1)
    ap.add_argument("--large-repeats", type=int, default=3)
    ap.add_argument("--large-rounds", type=int, default=1)
    ap.add_argument("--quiet-busy", type=float, default=0.15, help="busy fraction below which the machine is quiet")
    ap.add_argument("--wait-quiet", type=float, default=300, help="seconds to wait for quiet before each round")
    ap.add_argument("--max-interference", type=float, default=0.05,
                    help="a measurement during which other processes used more of the CPUs than this is repeated")
    ap.add_argument("--retries", type=int, default=3, help="repeats of a measurement other processes disturbed (only while no undisturbed round of it exists)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per tilefuse command")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    ap.add_argument("--force-export", action="store_true")
    ap.add_argument("--out", action="store_true", help="write bench/results/<date>-cpu-models.md and .json")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--json-out", help="write the JSON here (default: stdout summary only)")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    import onnx
    import onnxruntime as ort
    import torch
    import transformers

    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            ap.error(f"unknown model {m}")
    shapes = []
    for s in args.shapes.split(","):
        b, t = s.lower().split("x")
        shapes.append((int(b), int(t)))
    env_core = os.environ.get("OPENBLAS_CORETYPE")
    coretypes = (args.openblas_coretype.split(",") if args.openblas_coretype
                 else (["inherit", "auto"] if env_core else ["inherit"]))
    os.makedirs(args.workdir, exist_ok=True)
    torch.set_num_threads(args.threads)

    res = {"date": args.date, "command": "python " + " ".join([os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:]),
           "machine": machine_info(args.threads), "threads": args.threads, "warmup": args.warmup,
           "repeats": args.repeats, "rounds": args.rounds, "quiet_busy": args.quiet_busy,
           "wait_quiet": args.wait_quiet, "max_interference": args.max_interference, "retries": args.retries, "coretypes": coretypes, "env_openblas_coretype": env_core,
           "shapes": [f"{b}x{t}" for b, t in shapes], "rows": []}
    res["loadavg_start"] = [round(x, 2) for x in os.getloadavg()]
    res["versions"] = {"onnxruntime": ort.__version__, "torch": torch.__version__,
                       "transformers": transformers.__version__, "onnx": onnx.__version__,
                       "python": platform.python_version(), "tilefuse_commit": git_commit(),
                       "tilefuse_binary": binary_identity(args.tilefuse)}
    try:
        res["versions"]["openblas"] = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${Version}", "libopenblas0-openmp"],
            capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    res["openblas_cores"] = {c: openblas_corename(tilefuse_env(args.threads, c)) for c in coretypes}

    # Exports first (they load the CPU; nothing is timed meanwhile).
    exports = {}
    for name in models:
        for b, t in shapes:
            log(f"export {name} {b}x{t}")
            try:
                exports[(name, b, t)] = ensure_export(name, b, t, args.workdir, log, args.force_export)
            except Exception as e:  # report, go on with the others
                log(f"  export FAILED: {type(e).__name__}: {e}")
                res["rows"].append({"model": name, "shape": f"{b}x{t}", "export_error": f"{type(e).__name__}: {e}"})
    metas = [m for _, m in exports.values()]
    res["exporter_summary"] = "; ".join(sorted({m["exporter"] for m in metas})) or "?"
    res["export_notes"] = sorted({n for m in metas for n in m.get("notes", [])})

    for (name, b, t), (folder, meta) in exports.items():
        shape = f"{b}x{t}"
        row = {"model": name, "shape": shape, "folder": folder, "meta": meta,
               "ort": {"round_ms": [], "runs": []}, "tilefuse": {c: {"round_ms": [], "errors": []} for c in coretypes}}
        log(f"time {name} {shape}")
        large = b * t >= args.large_tokens
        warmup = min(args.warmup, args.large_warmup) if large else args.warmup
        repeats = min(args.repeats, args.large_repeats) if large else args.repeats
        rounds = min(args.rounds, args.large_rounds) if large else args.rounds
        row["warmup"], row["repeats"], row["rounds"] = warmup, repeats, rounds
        for rnd in range(rounds):
            busy = wait_quiet(args.quiet_busy, args.wait_quiet, log)
            order = ["ort"] + coretypes if rnd % 2 == 0 else coretypes[::-1] + ["ort"]
            for who in order:
                for attempt in range(args.retries + 1):
                    if attempt:
                        busy = wait_quiet(args.quiet_busy, args.wait_quiet, log)
                    with Interference() as noise:
                        if who == "ort":
                            try:
                                x = time_ort(folder, args.threads, warmup, repeats)
                            except Exception as e:
                                x = {"error": f"{type(e).__name__}: {e}"}
                        else:
                            x = time_tilefuse(args, folder, tilefuse_env(args.threads, who), warmup, repeats)
                    x["busy_before"] = round(busy, 3)
                    x["loadavg_after"] = os.getloadavg()
                    x["others_cpu_fraction"] = round(noise.fraction, 3)
                    label = "onnxruntime" if who == "ort" else f"tilefuse ({who})"
                    dest = row["ort"] if who == "ort" else row["tilefuse"][who]
                    have_clean = any(not r["contaminated"] for r in dest.get("runs", []))
                    if "error" in x or noise.fraction <= args.max_interference or attempt == args.retries or have_clean:
                        break
                    dest.setdefault("discarded", []).append({"ms": x.get("ms"), "others_cpu_fraction": x["others_cpu_fraction"]})
                    log(f"  round {rnd}: {label} {x['ms']:.2f} ms discarded: other processes used "
                        f"{noise.fraction:.0%} of the CPUs meanwhile; again")
                dest = row["ort"] if who == "ort" else row["tilefuse"][who]
                if "error" in x:
                    dest.setdefault("errors", []).append(x["error"])
                    log(f"  round {rnd}: {label} FAILED: {x['error'][:400]}")
                    continue
                x["contaminated"] = noise.fraction > args.max_interference
                dest.setdefault("runs", []).append(x)
                dest["round_ms"].append(x["ms"])
                if who != "ort":
                    dest["last"] = x
                extra = f" (unfused {x['unfused_ms']:.2f})" if who != "ort" else ""
                log(f"  round {rnd}: {label} {x['ms']:.2f} ms{extra}; others used {noise.fraction:.0%} of the CPUs"
                    + (" — CONTAMINATED" if x["contaminated"] else ""))
        for dest in [row["ort"]] + [row["tilefuse"][c] for c in coretypes]:
            runs = dest.get("runs", [])
            clean = [r["ms"] for r in runs if not r["contaminated"]]
            pool = clean or [r["ms"] for r in runs]
            dest["best_ms"] = min(pool) if pool else None
            dest["best_contaminated"] = bool(runs) and not clean
            dest["median_of_rounds_ms"] = statistics.median(dest["round_ms"]) if dest["round_ms"] else None
        if not args.no_check:
            row["check"] = check_tilefuse(args, folder, tilefuse_env(args.threads, coretypes[0]), meta)
            log(f"  check: {json.dumps({k: v for k, v in row['check'].items() if k != 'reference_kernels'})[:400]}")
        res["rows"].append(row)
        if args.json_out:  # partial results as they come
            with open(args.json_out + ".partial", "w") as f:
                json.dump(res, f, indent=1, default=str)
    res["export_errors"] = {f"{r['model']} {r['shape']}": r["export_error"] for r in res["rows"] if "export_error" in r}
    res["rows"] = [r for r in res["rows"] if "export_error" not in r]

    if args.out:
        base = os.path.join(REPO, "bench", "results", f"{args.date}-cpu-models")
        with open(base + ".json", "w") as f:
            json.dump(res, f, indent=1, default=str)
        write_markdown(res, base + ".md")
        log(f"wrote {base}.md and .json")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    tmp = tempfile.NamedTemporaryFile("w", suffix=".md", delete=False)
    tmp.close()
    write_markdown(res, tmp.name)
    with open(tmp.name) as f:
        print(f.read())
    os.unlink(tmp.name)


if __name__ == "__main__":
    main()


#!/usr/bin/env python3
"""The model zoo (issue 47): real models as users bring them, tilefuse against torch.compile, one
command on a machine with a GPU.

    python3 bench/zoo.py --json zoo.json --markdown zoo.md
    python3 bench/zoo.py --models resnet18,mobilenet_v3_small --dtypes bf16 --json zoo.json --markdown zoo.md

Models, random weights (from configs; nothing downloaded): transformers' GPT-2 small with its LM
head, BERT-base and a 4-layer LLaMA-style model of hidden 2048 (bench/torch_frontend.py's), at
1x128 and 8x512 tokens; timm's ViT-B/16 and torchvision's ResNet-18, ResNet-50, MobileNetV3-small
and ConvNeXt-tiny (BatchNorms calibrated as bench/conv_models.py does), at batch 1 and 32. Each in
f32 and bf16. The convolution networks run channels-last on every side (PyTorch's best layout on
tensor cores; the ONNX exports are of the same module, ONNX having no memory format).

Each row (model, dtype, shape) runs in its own process (a crash or a hang, --row-timeout, costs that
row only), and measures, CUDA events around 20 calls after warm-up, the median of --repeats:
- peers (--peers): eager, torch.compile() (default mode), torch.compile(mode="reduce-overhead") (CUDA
  graphs), and on request torch.compile(mode="max-autotune") (CUDA graphs too; minutes a model);
- tilefuse by each --paths: "fx", torch.compile(backend="tilefuse"); "onnx", the module exported by
  torch.onnx.export's TorchScript exporter (dynamo=False, opset 17) and run by tilefuse.compile;
  "onnx-dynamo", the same by the dynamo exporter (dynamo=True). Each replays its compiled graph as
  one CUDA graph; its first call (fx) or compile (onnx) is timed, its background compiles finished
  before timing.
- the output's error to eager and to an exact f32 result (TF32 off, the weights widened for bf16),
  relative to the output's scale; each tilefuse path's kernels by mode (generated, gemm template,
  attention template, gemm = cuBLASLt, host, reference) and what ran outside tilefuse.

f32 follows --tf32 on both sides: "on" (the default, issue 47's "f32 with TF32 allowed on both
sides") sets torch.backends.cuda.matmul.allow_tf32 and cudnn.allow_tf32 and compiles the ONNX
exports with precision="high"; "off" is exact f32 everywhere (precision="highest").

--json keeps every row measured so far (rows of other runs kept, a row measured again replaced), so
a zoo can be measured over several runs; --markdown writes the table of all of them. --table-only
rewrites the table from the JSON without measuring. --device cpu runs the same on tilefuse's CPU
backend with the host's clock: a smoke test of the script, not a benchmark. Needs torch,
transformers, torchvision, timm and onnx; tilefuse on PYTHONPATH.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

LANGUAGE = ("gpt2", "bert", "llama")
CNN = ("resnet18", "resnet50", "mobilenet_v3_small", "convnext_tiny")
MODELS = LANGUAGE + ("vit",) + CNN
SHAPES = {"language": ("1x128", "8x512"), "vision": ("1", "32")}
PATHS = ("fx", "onnx", "onnx-dynamo")
PEERS = ("torch_compile", "torch_compile_cudagraphs", "max_autotune")
ROW_MARK = "ZOO-ROW "


def shapes_of(model):
    return SHAPES["language" if model in LANGUAGE else "vision"]


def tf32_of(args, dtype):
    """Whether a row's f32 products run on TF32 (on the GPU, where --tf32 allows it)."""
    return "on" if dtype == "f32" and args.tf32 == "on" and args.device == "cuda" else "off"


def row_key(row):
    return (row["model"], row["dtype"], row["shape"], row.get("tf32", "off"))


# ---------------------------------------------------------------------------------------------
# One row, in its own process.

def build(name, torch):
    """The module (eval mode, f32, on the CPU) and its input's vocabulary (None for images)."""
    if name in CNN:  # ResNet-50's BatchNorms too (bench/torch_frontend.py keeps its own uncalibrated)
        from conv_models import make_torch_model
        return make_torch_model(name)[0], None
    import transformers
    from torch_frontend import build_model
    return build_model(name, torch, transformers)


def tensor_output(torch, model, name):
    """`model` returning its tensor output, as a module an exporter can trace (transformers'
    models return dataclasses with caches)."""
    from torch_frontend import first_output

    class TensorOutput(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            if name in LANGUAGE and name != "bert":
                return first_output(self.model(x, use_cache=False))
            return first_output(self.model(x))

    return TensorOutput().eval()


def kernel_modes(kernels):
    """How many of the kernels run each way: the GPU's modes (generated, gemm template, attention
    template, gemm = cuBLASLt, host), on the CPU generated or reference."""
    return dict(collections.Counter(k.mode or ("generated" if k.generated else "reference") for k in kernels))


def time_calls(torch, fn, x, args):
    """µs a call: CUDA events on the GPU (bench/torch_frontend.py's), the host's clock on the CPU."""
    if args.device == "cuda":
        from torch_frontend import time_calls as on_gpu
        return on_gpu(torch, fn, x, args.repeats)
    fn(x)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - start) * 1e6)
    return sorted(times)[len(times) // 2]


def first_call(torch, fn, x):
    if torch.cuda.is_available():
        from torch_frontend import first_call as on_gpu
        return on_gpu(torch, fn, x)
    start = time.perf_counter()
    y = fn(x)
    return time.perf_counter() - start, y


def run_fx(torch, module, x, expected, exact, args):
    import tilefuse.torch_backend as backend
    from torch_frontend import error_to_scale

    out = {}
    torch._dynamo.reset()
    backend._MODELS.clear()
    compiled = torch.compile(module, backend="tilefuse")
    out["first_call_s"], y = first_call(torch, compiled, x)
    backend.finish_compiles()
    y = compiled(x)
    out["error_to_eager"] = error_to_scale(torch, y, expected)
    out["error_to_exact"] = error_to_scale(torch, y, exact)
    out["us"] = time_calls(torch, compiled, x, args)
    graphs = backend._live_graphs()
    out["graphs"] = len(graphs)
    out["kernel_modes"] = kernel_modes(k for g in graphs for s in g.compiled.values() if s is not None for k in s.model.kernels)
    out["outside_tilefuse"] = sorted({line for g in graphs for line in g.in_pytorch})
    torch._dynamo.reset()
    return out


def export_onnx(torch, module, x, path, dynamo):
    kwargs = dict(input_names=["x"], output_names=["y"], opset_version=17 if not dynamo else 18, dynamo=dynamo)
    if dynamo:
        kwargs["external_data"] = True
    torch.onnx.export(module, (x,), path, **kwargs)


def run_onnx(torch, module, x, expected, exact, args, dynamo):
    import tilefuse
    from torch_frontend import error_to_scale

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.onnx")
        start = time.perf_counter()
        # The exporter traces the module as users export it: contiguous (NCHW) input.
        export_onnx(torch, module, x.contiguous(), path, dynamo)
        out["export_s"] = time.perf_counter() - start
        precision = "high" if tf32_of(args, args.dtype) == "on" else "highest"
        start = time.perf_counter()
        model = tilefuse.compile(path, backend=args.device, precision=precision)
        out["compile_s"] = time.perf_counter() - start
    model.finish_compiles()
    call = lambda t: model(t)[0]  # noqa: E731
    x = x.contiguous()  # the exported model's input is NCHW: given so, not copied in the timed calls
    y = call(x)
    out["error_to_eager"] = error_to_scale(torch, y, expected)
    out["error_to_exact"] = error_to_scale(torch, y, exact)
    out["us"] = time_calls(torch, call, x, args)
    out["kernel_modes"] = kernel_modes(model.kernels)
    out["outside_tilefuse"] = sorted(set(model.warnings))
    return out


def measure_row(args):
    import torch
    from torch_frontend import error_to_scale, exact_f32_output, f32_twin_output, model_input
    import tilefuse.torch_backend  # noqa: F401  (registers the backend)

    tf32 = tf32_of(args, args.dtype)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32 == "on"
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[args.dtype]
    module, vocab = build(args.model, torch)
    module = tensor_output(torch, module, args.model).to(args.device, dtype)
    x = model_input(torch, "vit" if args.model not in LANGUAGE else args.model, args.shape, vocab, dtype, args.device)
    if args.model in CNN:
        module = module.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    row = {"model": args.model, "dtype": args.dtype, "shape": "x".join(str(d) for d in x.shape),
           "tf32": tf32,
           "device": torch.cuda.get_device_name() if args.device == "cuda" else f"CPU ({os.cpu_count()} cores)",
           "torch": torch.__version__, "date": time.strftime("%Y-%m-%d")}
    with torch.no_grad():
        expected = module(x)
        if dtype == torch.float32:
            exact = exact_f32_output(torch, module, x)
        else:
            exact = f32_twin_output(torch, module, "vit", x)  # "vit": called as module(x)
        row["eager_error_to_exact"] = error_to_scale(torch, expected, exact)
        row["eager_us"] = time_calls(torch, module, x, args)
        for path in args.paths.split(","):
            try:
                result = run_fx(torch, module, x, expected, exact, args) if path == "fx" else \
                    run_onnx(torch, module, x, expected, exact, args, dynamo=path == "onnx-dynamo")
            except Exception as e:  # a path that fails is a row's finding, not the zoo's end
                result = {"failed": f"{type(e).__name__}: {str(e)[:600]}"}
            row[path] = result
            print(f"  {path}: {json.dumps(result)[:800]}", file=sys.stderr, flush=True)
        modes = {"compile": ("torch_compile", {}), "cudagraphs": ("torch_compile_cudagraphs", {"mode": "reduce-overhead"}),
                 "max-autotune": ("max_autotune", {"mode": "max-autotune"})}
        for peer, kwargs in (modes[p] for p in args.peers.split(",") if p):
            try:
                torch._dynamo.reset()
                compiled = torch.compile(module, **kwargs)
                row[peer + "_first_call_s"], y = first_call(torch, compiled, x)
                row[peer + "_error_to_exact"] = error_to_scale(torch, y, exact)
                row[peer + "_us"] = time_calls(torch, compiled, x, args)
            except Exception as e:
                row[peer + "_failed"] = f"{type(e).__name__}: {str(e)[:600]}"
        torch._dynamo.reset()
    return row


# ---------------------------------------------------------------------------------------------
# The table.

def best_peer(row):
    times = [row[p + "_us"] for p in PEERS if p + "_us" in row]
    return min(times) if times else None


def cell_us(value):
    return f"{value:.1f}" if isinstance(value, (int, float)) else "—"


def path_cell(row, path):
    result = row.get(path)
    if result is None:
        return "—"
    if "failed" in result:
        return "failed"
    peer = best_peer(row)
    ratio = f" ({peer / result['us']:.2f}x)" if peer else ""
    return f"{result['us']:.1f}{ratio}"


def fallbacks(row):
    """Kernels off tilefuse's generated and template code, and what ran outside it, per path."""
    notes = []
    for path in PATHS:
        result = row.get(path)
        if not result:
            continue
        if "failed" in result:
            notes.append(f"{path}: {result['failed'][:160]}")
            continue
        off = {m: n for m, n in result.get("kernel_modes", {}).items()
               if m not in ("generated", "gemm template", "attention template")}
        parts = [f"{n} {m}" for m, n in sorted(off.items())]
        if result.get("outside_tilefuse"):
            parts.append(f"{len(result['outside_tilefuse'])} outside")
        if parts:
            notes.append(f"{path}: " + ", ".join(parts))
    return "; ".join(notes) or "none"


def errors(row):
    parts = []
    for path in PATHS:
        result = row.get(path)
        if result and "error_to_eager" in result:
            parts.append(f"{path} {result['error_to_eager']:.1e}")
    return ", ".join(parts)


def markdown(rows):
    lines = [
        "| model | dtype | shape | eager | torch.compile | + CUDA graphs | max-autotune | tilefuse fx | tilefuse onnx | "
        "tilefuse onnx (dynamo) | error to eager | off the generated kernels |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (MODELS.index(r["model"]) if r["model"] in MODELS else 99, r["dtype"],
                                           int(r["shape"].split("x")[0]), r["shape"])):
        dtype = row["dtype"] + (", TF32" if row.get("tf32") == "on" else "")
        if "failed" in row:
            lines.append(f"| {row['model']} | {dtype} | {row['shape']} | failed: {row['failed'][:200]} |" + " |" * 9)
            continue
        lines.append(" | ".join([
            f"| {row['model']}", dtype, row["shape"], cell_us(row.get("eager_us")), cell_us(row.get("torch_compile_us")),
            cell_us(row.get("torch_compile_cudagraphs_us")), cell_us(row.get("max_autotune_us")),
            path_cell(row, "fx"), path_cell(row, "onnx"), path_cell(row, "onnx-dynamo"), errors(row),
            fallbacks(row) + " |"]))
    devices = sorted({r.get("device", "?") for r in rows})
    dates = sorted({r.get("date", "?") for r in rows})
    head = (f"Times in µs a call (median of repeats of 20 calls, CUDA events); a tilefuse path's ratio is to the best "
            f"torch.compile mode timed in the same process. Devices: {', '.join(devices)}; dates: {', '.join(dates)}.\n\n")
    return head + "\n".join(lines) + "\n"


def load_rows(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return []


def save_rows(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(rows, f, indent=1)
    os.replace(tmp, path)  # never a half-written file


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--dtypes", default="bf16,f32")
    parser.add_argument("--shapes", default="", help="comma-separated, e.g. 1x128,32 (default: each model's two)")
    parser.add_argument("--paths", default="fx,onnx,onnx-dynamo", help=f"tilefuse's ways in, comma-separated, of {', '.join(PATHS)}")
    parser.add_argument("--tf32", choices=["on", "off"], default="on", help="f32 products on TF32 on every side")
    parser.add_argument("--peers", default="compile,cudagraphs",
                        help="torch.compile's modes timed, comma-separated, of compile, cudagraphs (mode='reduce-overhead') "
                             "and max-autotune (minutes a model); empty for none")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a smoke test of the script (tilefuse's CPU backend, the host's clock)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--row-timeout", type=int, default=900, help="seconds a row may take")
    parser.add_argument("--json", help="rows kept here (merged with the file's)")
    parser.add_argument("--markdown", help="the table of every row in --json written here")
    parser.add_argument("--table-only", action="store_true", help="write --markdown from --json, measuring nothing")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # MODEL:DTYPE:SHAPE, in the row's own process
    args = parser.parse_args()

    if args.one:
        args.model, args.dtype, args.shape = args.one.split(":")
        print(ROW_MARK + json.dumps(measure_row(args)), flush=True)
        return 0
    for peer in (p for p in args.peers.split(",") if p):
        if peer not in ("compile", "cudagraphs", "max-autotune"):
            parser.error(f"--peers: unknown mode '{peer}' (known: compile, cudagraphs, max-autotune)")
    for path in args.paths.split(","):
        if path not in PATHS:
            parser.error(f"--paths: unknown path '{path}' (known: {', '.join(PATHS)})")
    for model in args.models.split(","):
        if model not in MODELS:
            parser.error(f"--models: unknown model '{model}' (known: {', '.join(MODELS)})")
    if args.table_only and not (args.json and args.markdown):
        parser.error("--table-only needs --json and --markdown")

    rows = load_rows(args.json)
    if not args.table_only:
        for model in args.models.split(","):
            for dtype in args.dtypes.split(","):
                wanted = [s for s in args.shapes.split(",") if s] or shapes_of(model)
                for shape in wanted:
                    if model in LANGUAGE and "x" not in shape or model not in LANGUAGE and "x" in shape:
                        continue  # a vision batch for a language model, or tokens for an image model
                    row = measure_in_process(args, model, dtype, shape)
                    rows = [r for r in rows if row_key(r) != row_key(row)] + [row]
                    if args.json:
                        save_rows(args.json, rows)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows))
    print(markdown(rows))
    return 0


def measure_in_process(args, model, dtype, shape):
    """One row measured by this script in a process of its own."""
    command = [sys.executable, os.path.abspath(__file__), "--one", f"{model}:{dtype}:{shape}", "--paths", args.paths,
               "--tf32", args.tf32, "--repeats", str(args.repeats), "--peers", args.peers, "--device", args.device]
    print(f"== {model} {dtype} {shape}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    stub = {"model": model, "dtype": dtype, "shape": shape, "tf32": tf32_of(args, dtype)}
    if model not in LANGUAGE:
        stub["shape"] = f"{shape}x3x224x224"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.row_timeout)
    except subprocess.TimeoutExpired:
        return {**stub, "failed": f"no result in {args.row_timeout} s"}
    sys.stderr.write(done.stderr[-4000:])
    for line in done.stdout.splitlines():
        if line.startswith(ROW_MARK):
            row = json.loads(line[len(ROW_MARK):])
            row["row_s"] = time.perf_counter() - start
            return row
    return {**stub, "failed": f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:] or ''}"}


if __name__ == "__main__":
    sys.exit(main())

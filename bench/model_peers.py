#!/usr/bin/env python3
"""onnxruntime as the peer of `tilefuse bench MODEL --backend cuda` (issue 16), for any model.

Times the same ONNX model in onnxruntime on the GPU (CUDAExecutionProvider, inputs and outputs
bound on the device through IOBinding, so no host copy is timed), on seeded random inputs of the
model's own shapes and dtypes: `--warmup` untimed runs, then the median of `--repeats` runs, each
timed from before the run to the device being idle after it. Where onnxruntime has no CUDA provider
(the CPU-only wheel) it says so and times the CPU provider instead, marked as such.
Then runs `tilefuse bench MODEL --backend cuda --json` in the same process tree, same GPU, and
prints both with the ratio (onnxruntime time / tilefuse fused time: above 1, tilefuse is faster).

PyTorch eager and torch.compile need the module the model was exported from, which an ONNX file
does not carry. For the models of tests/models, whose modules tests/models/export_models.py
defines, `--torch NAME` (default: the model's folder name, when export_models.py knows it) builds
that module with fresh random weights (timing does not depend on their values), puts it on the GPU
with the test folder's inputs, and times PyTorch eager, torch.compile (default mode) and
torch.compile with CUDA graphs (mode="reduce-overhead": what a latency-minded user picks for
batch-1 models) with CUDA events, warm-up first, median of repeats. For the fixed benchmark
cases bench/peers.py times them.

  python3 bench/model_peers.py MODEL.onnx [--tilefuse build/tilefuse] [--torch NAME|none] [--json out.json]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

ONNX_TO_NUMPY = {1: "float32", 10: "float16", 11: "float64", 6: "int32", 7: "int64", 9: "bool", 2: "uint8", 3: "int8"}


def random_inputs(session, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        kind = i.type  # "tensor(float)", "tensor(int64)", ...
        if "int" in kind:
            feeds[i.name] = rng.integers(0, 100, size=shape).astype("int64" if "int64" in kind else "int32")
        elif "bool" in kind:
            feeds[i.name] = rng.integers(0, 2, size=shape).astype(bool)
        elif "float16" in kind:
            feeds[i.name] = rng.standard_normal(shape).astype("float16")
        elif "bfloat16" in kind:
            return None, f"input {i.name} is bfloat16, which onnxruntime's Python API cannot feed from NumPy"
        else:
            feeds[i.name] = rng.standard_normal(shape).astype("float64" if "double" in kind else "float32")
    return feeds, None


def time_onnxruntime(model, warmup, repeats, seed):
    import onnxruntime as ort

    providers = ort.get_available_providers()
    provider = "CUDAExecutionProvider" if "CUDAExecutionProvider" in providers else "CPUExecutionProvider"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model, options, providers=[provider])
    feeds, why = random_inputs(session, seed)
    if feeds is None:
        return {"error": why, "provider": provider, "onnxruntime": ort.__version__}
    device = "cuda" if provider == "CUDAExecutionProvider" else "cpu"
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, device, 0))
    for o in session.get_outputs():
        binding.bind_output(o.name, device)

    def once():
        start = time.perf_counter()
        session.run_with_iobinding(binding)
        binding.synchronize_outputs()
        return (time.perf_counter() - start) * 1e6

    for _ in range(warmup):
        once()
    times = [once() for _ in range(repeats)]
    return {"provider": provider, "onnxruntime": ort.__version__, "us": statistics.median(times), "repeats": repeats}


def zoo_module(name):
    """(module factory, input tensors' names) of `name` in tests/models/export_models.py, or None."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models", "export_models.py")
    spec = importlib.util.spec_from_file_location("export_models", path)
    export_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_models)
    return export_models.module_factory(name)


def load_test_inputs(model):
    """The inputs of the backend-test folder beside MODEL (test_data_set_0/input_i.pb), as NumPy."""
    import glob
    import os

    import onnx
    from onnx import numpy_helper

    folder = os.path.join(os.path.dirname(os.path.abspath(model)), "test_data_set_0")
    arrays = []
    for path in sorted(glob.glob(os.path.join(folder, "input_*.pb")), key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0])):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        arrays.append(numpy_helper.to_array(t))
    return arrays


def time_torch(name, model, warmup, repeats):
    """PyTorch eager, torch.compile and torch.compile with CUDA graphs on the module `name`."""
    import torch

    factory = zoo_module(name)
    if factory is None:
        return {"error": f"tests/models/export_models.py defines no module named {name}"}
    if not torch.cuda.is_available():
        return {"error": "PyTorch sees no GPU"}
    inputs = [torch.from_numpy(a).cuda() for a in load_test_inputs(model)]
    module = factory().cuda().eval()
    result = {"torch": torch.__version__, "module": name}

    def median_us(fn):
        with torch.no_grad():
            for _ in range(warmup):
                fn(*inputs)
            torch.cuda.synchronize()
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1000)
        return statistics.median(times)

    peers = [("eager", lambda: module), ("compile", lambda: torch.compile(module)),
             ("compile_cudagraphs", lambda: torch.compile(module, mode="reduce-overhead"))]
    for peer, make in peers:
        try:
            torch._dynamo.reset()
            result[peer] = {"us": median_us(make())}
        except Exception as e:  # a peer that fails is reported, not a crash of the script
            result[peer] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--tilefuse", default="build/tilefuse")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write both results here")
    parser.add_argument("--torch", help="the module of tests/models/export_models.py to time in PyTorch "
                        "(default: the model's folder name if it names one; 'none': skip)")
    args = parser.parse_args()
    import os

    torch_name = args.torch or os.path.basename(os.path.dirname(os.path.abspath(args.model)))

    result = {"model": args.model}
    try:
        result["onnxruntime"] = time_onnxruntime(args.model, args.warmup, args.repeats, args.seed)
    except ImportError as e:
        result["onnxruntime"] = {"error": f"onnxruntime not importable: {e}"}
    except Exception as e:  # a model onnxruntime refuses is reported, not a crash of the script
        result["onnxruntime"] = {"error": f"{type(e).__name__}: {e}"}
    bench = subprocess.run([args.tilefuse, "bench", args.model, "--backend", "cuda", "--json", "--repeats", str(args.repeats)],
                           capture_output=True, text=True)
    if bench.returncode != 0:
        result["tilefuse"] = {"error": (bench.stderr or bench.stdout).strip()}
    else:
        result["tilefuse"] = json.loads(bench.stdout)

    if torch_name != "none":
        try:
            result["pytorch"] = time_torch(torch_name, args.model, args.warmup, args.repeats)
        except ImportError as e:
            result["pytorch"] = {"error": f"not importable: {e}"}
        except Exception as e:
            result["pytorch"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}

    ort_result, tf = result["onnxruntime"], result["tilefuse"]
    print(f"model: {args.model}")
    if "us" in ort_result:
        print(f"  onnxruntime {ort_result['onnxruntime']} ({ort_result['provider']}): {ort_result['us']:.1f} us")
    else:
        print(f"  onnxruntime: {ort_result['error']}")
    if "fused" in tf:
        fused_us = tf["fused"]["ms"] * 1000
        print(f"  tilefuse fused: {fused_us:.1f} us ({tf['fused']['kernels']} kernels), unfused {tf['unfused']['ms'] * 1000:.1f} us")
        if "us" in ort_result:
            result["ratio_onnxruntime_over_tilefuse"] = ort_result["us"] / fused_us
            note = "" if ort_result["provider"] == "CUDAExecutionProvider" else " (onnxruntime on the CPU: not a like-for-like peer)"
            print(f"  onnxruntime / tilefuse: {result['ratio_onnxruntime_over_tilefuse']:.2f}x{note}")
    else:
        print(f"  tilefuse: {tf['error']}")
    pt = result.get("pytorch", {})
    if "error" in pt:
        print(f"  PyTorch: {pt['error']}")
    for peer in ("eager", "compile", "compile_cudagraphs"):
        if peer not in pt:
            continue
        if "us" not in pt[peer]:
            print(f"  PyTorch {peer}: {pt[peer]['error']}")
            continue
        line = f"  PyTorch {peer}: {pt[peer]['us']:.1f} us"
        if "fused" in tf:
            pt[peer]["ratio_over_tilefuse"] = pt[peer]["us"] / (tf["fused"]["ms"] * 1000)
            line += f" ({pt[peer]['ratio_over_tilefuse']:.2f}x tilefuse's time)"
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if "fused" in tf else 1


if __name__ == "__main__":
    sys.exit(main())

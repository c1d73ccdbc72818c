#!/usr/bin/env python3
"""PyTorch peers for tilefuse's GPU cases (bench/cases/cases.json, shared/ANCHORS.md).

For each case it times these peers on the GPU with CUDA events (warm-up, then the median of
--repeats calls):
  eager    the case's formula op by op, as the seeds wrote it (one kernel per op)
  library  PyTorch's own op (F.gelu, torch.softmax, F.layer_norm, F.rms_norm; for GEMMs the
           cuBLASLt fused epilogue: torch.addmm, torch._addmm_activation); "-" where none exists
  compile  torch.compile of the eager formula (default mode, static shapes)
  compile_max_autotune  torch.compile(mode="max-autotune-no-cudagraphs") of the eager formula
           (its kernels' configurations tuned, reductions' too), for cases whose manifest peers
           name it (the GEMM cases), and for every case when --peers names it
  compile_sdpa  torch.compile of the "library" expression, only for cases whose manifest peers
           name it (the GPT blocks: their library peer is the block with the attention through
           F.scaled_dot_product_attention, the eager one writes it by hand)
  tilefuse  tilefuse itself, through its Python package (the case's model file compiled for the
           GPU, run on the same tensors on PyTorch's stream), only when --peers names it: timed
           by this same harness beside the others in one process, so the ratio to torch.compile
           does not carry two harnesses' or two calls' differences (the package must be
           importable: scripts/gpu-python-ext.sh builds it on the GPU machine)
  tilefuse_tuned  the same with tune=True: its kernels' configurations measured first (by the
           tuner, cached), only when --peers names it
and one large device-to-device copy, the bandwidth every case is quoted against ("% bw").
Bytes per case are the manifest's bytes_moved: each input read once, each output written once.
Cases with "flops" (GEMMs: 2*M*N*K summed over the matmuls) are also quoted in TF/s, and against
"gemm_alone": a plain `a @ b` (cuBLAS) of each of the case's matmul shapes, times summed, the
rate a fused GEMM epilogue is held to (>= 0.95x). Attention cases (manifest "attention": the
attention cases and GPT blocks of attention_cases.py) get a table of their own: TF/s of eager, SDPA
(library), torch.compile and torch.compile of the SDPA block.
Times are GPU time: the calls are queued behind a GPU sleep so host overhead (Python, dynamo
guards, launches) stays hidden; the report gives each peer's host time per call apart (host_us).

Each peer is first checked against an f64 evaluation of the eager formula on the same inputs
(on the GPU, f64 matmuls included; norm-wise relative error ||a - e|| / ||e||: bf16 1e-2, f32
1e-4; a bf16 GEMM's error is its output's rounding, not K's: the GEMM peers measured 1.7e-3 to
3.4e-3 on an H100 up to K = 8192): a peer that disagrees is reported, not timed.
Inputs are seeded random normals (times the input's manifest "std" where it has one: the GPT
blocks' weights and biases get 1/sqrt(fan_in), like nn.Linear's initialisation, so the softmax is
not an argmax that bf16 rounding flips); calls rotate among enough input sets that together they are
several times the L2 (60 MB on an H200), so no call reads what the previous one left in L2.

  python3 bench/peers.py --list              # the cases and their peer expressions
  python3 bench/peers.py --dry-run           # what would run; needs no GPU and no torch
  python3 bench/peers.py --json peers.json   # run everything; markdown table on stdout
  python3 bench/peers.py --cases gemm_bf16_4096 --peers library,gemm_alone   # a few cases and peers
"""
import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

MANIFEST = Path(__file__).resolve().parent / "cases" / "cases.json"
PEERS = ("eager", "library", "compile")
OPTIONAL_PEERS = ("compile_max_autotune", "compile_sdpa")  # timed only for cases whose manifest peers name them
TILEFUSE = "tilefuse"  # timed only where --peers names it
TILEFUSE_TUNED = "tilefuse_tuned"  # the same, its kernels tuned first
TILEFUSE_PEERS = (TILEFUSE, TILEFUSE_TUNED)
COMPILE_MODES = {"compile": None, "compile_max_autotune": "max-autotune-no-cudagraphs", "compile_sdpa": None}
COMPILED_FROM = {"compile": "eager", "compile_max_autotune": "eager", "compile_sdpa": "library"}  # the expression compiled
PEER_WIDTH = 14  # the peer column of --list and --dry-run (longer names push their line along)
SELECTED_PEERS = None  # --peers: time only these (None: all)
ROTATION_BYTES = 256 << 20  # input bytes in flight across the rotated sets: > 4x an H200's L2
COPY_BYTES = 1 << 30        # the copy-bandwidth probe's source tensor
TIMED_CHUNK = 50            # calls queued behind one GPU sleep (well under the launch queue's depth)
SLEEP_CYCLES_PER_SECOND = 2_000_000_000  # torch.cuda._sleep counts GPU cycles: ~2 GHz on an H100/H200
TOLERANCE = {"bfloat16": 1e-2, "float32": 1e-4}
SEED = 1234


def load_cases(selected):
    cases = json.loads(MANIFEST.read_text())["cases"]
    if not selected:
        return cases
    names = selected.split(",")
    unknown = sorted(set(names) - {c["name"] for c in cases})
    if unknown:
        sys.exit(f"unknown case(s): {', '.join(unknown)}; see --list")
    return [c for c in cases if c["name"] in names]


def case_peers(case):
    """The peers timed for the case: the three of every case, the optional ones it names (and
    torch.compile's max-autotune mode wherever --peers names it: it compiles the eager formula
    every case has), then tilefuse (tuned or not) where --peers names it."""
    asked_for = {"compile_max_autotune"} if SELECTED_PEERS and "compile_max_autotune" in SELECTED_PEERS else set()
    peers = PEERS + tuple(p for p in OPTIONAL_PEERS if p in case["peers"] or p in asked_for)
    peers = tuple(p for p in peers if SELECTED_PEERS is None or p in SELECTED_PEERS)
    return peers + tuple(p for p in TILEFUSE_PEERS if SELECTED_PEERS is not None and p in SELECTED_PEERS)


def peer_source(case, peer):
    """The peer as Python source: a lambda over the case's input names (None: no such peer)."""
    if peer in TILEFUSE_PEERS:
        tune = ", tune=True" if peer == TILEFUSE_TUNED else ""
        return f"tilefuse.compile({str(MANIFEST.parent / case['file'])!r}, backend='cuda'{tune})"
    expression = case["peers"][COMPILED_FROM.get(peer, peer)]
    if expression is None:
        return None
    return f"lambda {', '.join(v['name'] for v in case['inputs'])}: {expression}"


def input_bytes(case):
    size = {"float32": 4, "int64": 8}
    return sum(math.prod(v["shape"]) * size.get(v["dtype"], 2) for v in case["inputs"])


def input_set_count(case):
    return max(1, math.ceil(ROTATION_BYTES / input_bytes(case)))


def gemm_alone_cases(case):
    """The plain GEMMs `a @ b` behind a case's "gemm_alone" rate, as cases of their own: one per
    matmul shape [M, N, K], in the case's input dtype."""
    dtype = case["inputs"][0]["dtype"]
    return [{"name": f"{case['name']} gemm_alone {m}x{n}x{k}", "flops": 2 * m * n * k,
             "inputs": [{"name": "a", "shape": [m, k], "dtype": dtype}, {"name": "b", "shape": [k, n], "dtype": dtype}],
             "peers": {"eager": "a @ b"}} for m, n, k in case.get("gemm_alone", [])]


def describe(v):
    std = f" (std {v['std']:g})" if "std" in v else ""
    return f"{v['name']}: {v['dtype']}[{','.join(map(str, v['shape']))}]{std}"


def size_note(case):
    flops = f", {case['flops'] / 1e9:.1f} GFLOP" if "flops" in case else ""
    return f"{case['bytes_moved'] / 1e6:.1f} MB moved{flops}"


def gemm_alone_note(case):
    return " + ".join(f"{m}x{n}x{k}" for m, n, k in case.get("gemm_alone", []))


def list_cases(cases):
    for case in cases:
        print(f"{case['name']}  ({case['file']}, {size_note(case)})")
        print(f"    in  {'; '.join(map(describe, case['inputs']))}")
        print(f"    out {'; '.join(map(describe, case['outputs']))}")
        for peer in case_peers(case):
            expression = peer_source(case, peer) if peer in TILEFUSE_PEERS else case["peers"][peer]
            print(f"    {peer:{PEER_WIDTH}} {expression or '-'}")
        if "gemm_alone" in case:
            print(f"    {'gemm_alone':{PEER_WIDTH}} a @ b (cuBLAS) at M x N x K = {gemm_alone_note(case)}")


def dry_run(cases, args):
    print(f"device-to-device copy: {COPY_BYTES >> 20} MiB read + written, median of {args.repeats}")
    for case in cases:
        assert (MANIFEST.parent / case["file"]).is_file(), f"missing {case['file']}"
        sets = input_set_count(case)
        print(f"{case['name']}: {sets} input set(s) of {input_bytes(case) / 1e6:.1f} MB, {size_note(case)}, "
              f"{args.warmup} warm-up + {args.repeats} timed calls per peer")
        for peer in case_peers(case):
            source = peer_source(case, peer)
            if source is not None:
                compile(source, case["name"], "eval")  # the expression must at least parse
            shown = "-" if source is None else source
            if source is not None and peer in COMPILE_MODES:
                mode = COMPILE_MODES[peer]
                shown = f"torch.compile({source}" + (f", mode={mode!r})" if mode else ")")
            print(f"    {peer:{PEER_WIDTH}} {shown}")
        for alone in gemm_alone_cases(case) if SELECTED_PEERS is None or "gemm_alone" in SELECTED_PEERS else []:
            a, b = alone["inputs"]
            print(f"    {'gemm_alone':{PEER_WIDTH}} lambda a, b: a @ b over {describe(a)}, {describe(b)}; "
                  f"{input_set_count(alone)} input set(s)")


# ---------------------------------------------------------------------------------------------
# Everything below needs torch and a GPU; imported lazily so --list and --dry-run run anywhere.

def make_inputs(torch, case, set_index):
    generator = torch.Generator(device="cuda").manual_seed(SEED + set_index)
    inputs = []
    for v in case["inputs"]:
        if "high" in v:  # integer inputs (targets, indices): uniform in [0, high)
            inputs.append(torch.randint(0, v["high"], v["shape"], dtype=getattr(torch, v["dtype"]), device="cuda", generator=generator))
            continue
        t = torch.randn(v["shape"], dtype=getattr(torch, v["dtype"]), device="cuda", generator=generator)
        inputs.append(t.mul_(v["std"]) if "std" in v else t)
    return inputs


def median_us(torch, fn, input_sets, warmup, repeats):
    """Median GPU time of one call, and the host's time to queue one (µs). Each chunk of calls
    is queued behind a GPU sleep longer than the host needs to queue it, so the GPU never waits
    for Python, guard checks or launches: the events time the kernels alone (a small case would
    otherwise time torch.compile's host overhead: 43 µs instead of 22 on an H200)."""
    call = lambda i: fn(*input_sets[i % len(input_sets)])
    for i in range(warmup):
        call(i)
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP_CYCLES_PER_SECOND // 100)  # 10 ms: time the host queueing a few calls
    host_start = time.perf_counter()
    for i in range(4):
        call(i)
    host_seconds = (time.perf_counter() - host_start) / 4
    times = []
    for chunk_start in range(0, repeats, TIMED_CHUNK):
        chunk = range(chunk_start, min(repeats, chunk_start + TIMED_CHUNK))
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in chunk]
        torch.cuda.synchronize()
        torch.cuda._sleep(int(SLEEP_CYCLES_PER_SECOND * (2 * host_seconds * len(chunk) + 1e-3)))
        for i, (start, end) in zip(chunk, events):
            start.record()
            call(i)
            end.record()
        torch.cuda.synchronize()
        times += [start.elapsed_time(end) * 1e3 for start, end in events]
    return statistics.median(times), host_seconds * 1e6


def copy_bandwidth(torch, args):
    """Bytes read + written per second by one large device-to-device copy."""
    source = torch.randn(COPY_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    target = torch.empty_like(source)
    us, _ = median_us(torch, lambda: target.copy_(source), [()], args.warmup, args.repeats)
    return {"bytes": 2 * COPY_BYTES, "us": us, "gbps": 2 * COPY_BYTES / us / 1e3}


def relative_error(torch, actual, expected):
    if isinstance(expected, tuple):  # several outputs: the worst
        return max(relative_error(torch, a, e) for a, e in zip(actual, expected))
    expected = expected.double()
    return ((actual.double() - expected).norm() / expected.norm()).item()


def dropout_keep_mask(torch, fn, case):
    """Which elements the peer's dropout keeps on its next call after torch.manual_seed(SEED).

    Found by calling the peer itself on x = residual = scale = 1, bias = 0: a kept element
    becomes 1/(1-p) + 1 and a dropped one 1, so after the layer norm kept elements are positive.
    """
    probe = [torch.ones(v["shape"], dtype=getattr(torch, v["dtype"]), device="cuda") for v in case["inputs"]]
    probe[-1].zero_()
    torch.manual_seed(SEED)
    return fn(*probe) > 0


def check(torch, F, fn, case, inputs):
    """Norm-wise relative error of the peer against the eager formula evaluated in f64."""
    reference_fn = eval(peer_source(case, "eager"), {"torch": torch, "F": F})
    wide = [t.double() if t.is_floating_point() else t for t in inputs]
    p = case.get("dropout_p")
    if p is None:
        return relative_error(torch, fn(*inputs), reference_fn(*wide))
    # Dropout draws a fresh mask per call: find the peer's mask for one seed, then compare the
    # same seed's output with the formula under that mask (and check that ~p were dropped).
    keep = dropout_keep_mask(torch, fn, case)
    dropped = 1.0 - keep.double().mean().item()
    if abs(dropped - p) > 0.01:
        raise RuntimeError(f"dropped {dropped:.4f} of the elements, expected {p}")
    torch.manual_seed(SEED)
    actual = fn(*inputs)
    x, residual, scale, bias = wide
    expected = F.layer_norm(torch.where(keep, x / (1 - p), 0.0) + residual, x.shape[-1:], scale, bias, eps=1e-5)
    return relative_error(torch, actual, expected)


def run_peer(torch, F, case, peer, input_sets, args):
    source = peer_source(case, peer)
    if source is None:
        return None
    try:
        fn = build_peer(torch, F, peer, source)
        error = check(torch, F, fn, case, input_sets[0])  # also compiles (c): first call
        if not error <= TOLERANCE[case["inputs"][0]["dtype"]]:
            return {"error": f"wrong result: relative error {error:.3g}", "rel_err": error}
        us, host_us = median_us(torch, fn, input_sets, args.warmup, args.repeats)
    except Exception as e:  # a peer that fails (torch.compile, out of memory) is reported, not fatal
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]}
    finally:
        torch.cuda.empty_cache()
    timing = {"us": us, "rel_err": error, "host_us": host_us}
    if "bytes_moved" in case:
        timing["gbps"] = case["bytes_moved"] / us / 1e3
    if "flops" in case:
        timing["tflops"] = case["flops"] / us / 1e6
    return timing


def build_peer(torch, F, peer, source):
    """The peer as a function of the case's inputs (not yet compiled: the first call compiles)."""
    if peer in TILEFUSE_PEERS:
        return tilefuse_peer(source)
    fn = eval(source, {"torch": torch, "F": F})
    if peer in COMPILE_MODES:
        # Static shapes, one compiled function per case: one function reused across shapes
        # recompiles for dynamic shapes (layernorm 65536x1024 on an H200: 208 µs, not 68).
        fn = torch.compile(fn, dynamic=False, mode=COMPILE_MODES[peer])
    return fn


def tilefuse_peer(source):
    """The case's model compiled by tilefuse for the GPU, called as the formula peers are: its
    one output, or a tuple of them."""
    import tilefuse
    model = eval(source, {"tilefuse": tilefuse})
    if model.backend != "cuda":
        raise RuntimeError(f"compiled for {model.backend}, not the GPU: {model.backend_note}")

    def run(*inputs):
        outputs = model(*inputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return run


def gemm_alone(torch, F, case, args):
    """cuBLAS's plain GEMM at each of the case's matmul shapes: summed time and rate (None: the
    case has no "gemm_alone"; an "error" when one of the GEMMs failed)."""
    parts = []
    for alone in gemm_alone_cases(case):
        input_sets = [make_inputs(torch, alone, i) for i in range(input_set_count(alone))]
        timing = run_peer(torch, F, alone, "eager", input_sets, args)
        del input_sets
        torch.cuda.empty_cache()
        if "us" not in timing:
            return {"error": f"{alone['name']}: {timing['error']}"}
        parts.append({"shape": alone["name"].rsplit(" ", 1)[1], **timing})
    if not parts:
        return None
    us = sum(p["us"] for p in parts)
    return {"us": us, "tflops": case["flops"] / us / 1e6, "rel_err": max(p["rel_err"] for p in parts),
            "parts": parts}


def run_case(torch, F, case, args, copy_gbps):
    torch._dynamo.reset()
    input_sets = [make_inputs(torch, case, i) for i in range(input_set_count(case))]
    result = {"name": case["name"], "bytes_moved": case["bytes_moved"], "input_sets": len(input_sets), "peers": {}}
    if "flops" in case:
        result["flops"] = case["flops"]
    if "attention" in case:
        result["attention"] = case["attention"]
    for peer in case_peers(case):
        timing = run_peer(torch, F, case, peer, input_sets, args)
        if timing and "gbps" in timing:
            timing["pct_copy_bw"] = 100 * timing["gbps"] / copy_gbps
        result["peers"][peer] = timing
        print(f"  {case['name']} {peer}: {cell(timing)}", file=sys.stderr, flush=True)
    del input_sets
    torch.cuda.empty_cache()
    if "gemm_alone" in case and (SELECTED_PEERS is None or "gemm_alone" in SELECTED_PEERS):
        result["gemm_alone"] = gemm_alone(torch, F, case, args)
        print(f"  {case['name']} gemm_alone: {cell(result['gemm_alone'])}", file=sys.stderr, flush=True)
    return result


def microseconds(us):
    """A time as the table shows it: tenths below 100 µs, where 1% is under a microsecond."""
    return f"{us:.1f} µs" if round(us, 1) < 100 else f"{us:.0f} µs"


def cell(timing):
    if timing is None:
        return "—"
    if "us" not in timing:
        return f"failed: {timing['error']}"
    if "tflops" in timing:
        return f"{microseconds(timing['us'])} ({timing['tflops']:.0f} TF/s)"
    return f"{microseconds(timing['us'])} ({timing['pct_copy_bw']:.0f}%)" if "pct_copy_bw" in timing else microseconds(timing['us'])


def ratio(peer, ours):
    """The peer's time over tilefuse's (> 1: tilefuse faster)."""
    return f"{peer['us'] / ours['us']:.2f}x" if peer and ours and "us" in peer and "us" in ours else "—"


def markdown(report):
    copy = report["copy"]
    lines = [f"{report['device']}, PyTorch {report['torch']}, Triton {report['triton']}; median of "
             f"{report['repeats']} after {report['warmup']} warm-up; % bw: share of the device-to-device copy "
             f"rate {copy['gbps'] / 1e3:.2f} TB/s (bytes read + written)"]
    memory_bound = [case for case in report["cases"] if "flops" not in case]
    # The tilefuse peers timed beside the others, each with its ratio to torch.compile; where
    # max-autotune was timed too, tuned against tuned.
    timed = lambda peer: any(peer in case["peers"] for case in memory_bound)
    shown = list(PEERS) + (["compile_max_autotune"] if timed("compile_max_autotune") else [])
    ours = [p for p in TILEFUSE_PEERS if timed(p)]
    ratios = [(p, "compile") for p in ours]
    if "compile_max_autotune" in shown and TILEFUSE_TUNED in ours:
        ratios.append((TILEFUSE_TUNED, "compile_max_autotune"))
    if memory_bound:
        names = {"eager": "eager, op by op", "library": "PyTorch library op", "compile": "torch.compile",
                 "compile_max_autotune": "torch.compile max-autotune"}
        lines += ["", "| case | " + " | ".join([names[p] for p in shown] + ours +
                                               [f"{names[peer]} / {p}" for p, peer in ratios]) + " |",
                  "|---|" + "---|" * (len(shown) + len(ours) + len(ratios))]
    for case in memory_bound:
        cells = [cell(case["peers"].get(p)) for p in shown + ours]
        cells += [ratio(case["peers"].get(peer), case["peers"].get(p)) for p, peer in ratios]
        lines.append(f"| {case['name']} | " + " | ".join(cells) + " |")
    gemms = [case for case in report["cases"] if "flops" in case and "attention" not in case]
    if gemms:
        lines += ["", "GEMM cases, TF/s = flops / time; cuBLAS GEMM alone: plain `a @ b` of the same shape(s)", "",
                  "| case | eager, op by op | library (cuBLASLt epilogue) | torch.compile | torch.compile max-autotune "
                  "| cuBLAS GEMM alone |", "|---|---|---|---|---|---|"]
        for case in gemms:
            peers = [cell(case["peers"].get(p)) for p in PEERS + ("compile_max_autotune",)]
            lines.append(f"| {case['name']} | " + " | ".join(peers + [cell(case.get("gemm_alone"))]) + " |")
    attention = [case for case in report["cases"] if "attention" in case]
    if attention:
        lines += ["", "Attention cases, TF/s = flops / time (4·B·H·N²·D, halved when causal; GPT blocks: their linears "
                  "too); GPT blocks' library: the block with SDPA for the attention", "",
                  "| case | eager, attention by hand | library (SDPA) | torch.compile | torch.compile, SDPA |",
                  "|---|---|---|---|---|"]
        for case in attention:
            peers = [cell(case["peers"].get(p)) for p in ("eager", "library", "compile", "compile_sdpa")]
            lines.append(f"| {case['name']} | " + " | ".join(peers) + " |")
    return "\n".join(lines)


def measure(cases, args):
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: use --list or --dry-run on a machine without a GPU")
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    copy = copy_bandwidth(torch, args)
    print(f"copy: {copy['gbps']:.0f} GB/s", file=sys.stderr, flush=True)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton_version,
              "repeats": args.repeats, "warmup": args.warmup, "copy": copy,
              "cases": [run_case(torch, F, case, args, copy["gbps"]) for case in cases]}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--peers", help=f"comma-separated peers to time (default: all but tilefuse; of "
                        f"{', '.join(PEERS + OPTIONAL_PEERS)}, gemm_alone, {', '.join(TILEFUSE_PEERS)})")
    parser.add_argument("--repeats", type=int, default=100, help="timed calls per peer (median; at least 50)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls per peer first")
    parser.add_argument("--json", metavar="FILE", help="write the full report as JSON")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    parser.add_argument("--dry-run", action="store_true", help="print what would run; needs no GPU")
    args = parser.parse_args()
    if args.repeats < 50:
        parser.error("--repeats must be at least 50")
    cases = load_cases(args.cases)
    if args.peers:
        global SELECTED_PEERS
        SELECTED_PEERS = set(args.peers.split(","))
        unknown = sorted(SELECTED_PEERS - set(PEERS + OPTIONAL_PEERS + ("gemm_alone",) + TILEFUSE_PEERS))
        if unknown:
            parser.error(f"unknown peer(s): {', '.join(unknown)}")
    if args.list:
        list_cases(cases)
    elif args.dry_run:
        dry_run(cases, args)
    else:
        measure(cases, args)


if __name__ == "__main__":
    main()

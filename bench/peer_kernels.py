#!/usr/bin/env python3
"""The kernels a PyTorch peer of a GPU case launches: name, grid, block, registers, time.

For each case (bench/cases/cases.json) and peer (default: compile; tilefuse too), runs the peer as
bench/peers.py builds it a few times under torch.profiler and prints the kernels of the last
calls, so a tilefuse kernel can be set beside the peer's launch shape (grid, block, registers
a thread, dynamic shared memory) and not only its time. With TORCH_LOGS=output_code in the
environment, torch.compile also prints the Triton source it generated.

  python3 bench/peer_kernels.py --cases layernorm_bf16_65536x1024,gelu_tanh_f32
  python3 bench/peer_kernels.py --cases softmax_bf16_16384x1024 --peers compile,library
"""
import argparse
import json
import os
import sys
import tempfile

import peers


def kernel_rows(torch, fn, input_sets, calls):
    """(name, grid, block, registers, shared bytes, µs) of each kernel of the last `calls` calls."""
    from torch.profiler import ProfilerActivity, profile
    for i in range(3):  # compile and warm up outside the profile
        fn(*input_sets[i % len(input_sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(*input_sets[i % len(input_sets)])
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:  # the trace holds the launch shapes
        trace_path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(trace_path)
        with open(trace_path) as f:
            trace = json.load(f)
    rows = []
    for event in trace["traceEvents"]:
        if event.get("cat") != "kernel":
            continue
        a = event.get("args", {})
        rows.append((event["name"], a.get("grid"), a.get("block"), a.get("registers per thread"), a.get("shared memory"), event.get("dur", 0.0)))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", required=True, help="comma-separated case names")
    parser.add_argument("--peers", default="compile", help="comma-separated peers (default: compile; tilefuse: tilefuse's own, "
                        "through its Python package; tilefuse_tuned: the same, tuned first)")
    parser.add_argument("--calls", type=int, default=3, help="profiled calls per peer")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F
    wanted = args.peers.split(",")
    unknown = sorted(set(wanted) - set(peers.PEERS + peers.OPTIONAL_PEERS + peers.TILEFUSE_PEERS))
    if unknown:
        parser.error(f"unknown peer(s): {', '.join(unknown)}")
    peers.SELECTED_PEERS = set(wanted)
    for case in peers.load_cases(args.cases):
        input_sets = [peers.make_inputs(torch, case, i) for i in range(peers.input_set_count(case))]
        for peer in peers.case_peers(case):  # the ones this case has, as bench/peers.py would time them
            source = peers.peer_source(case, peer)
            if source is None:
                print(f"{case['name']} {peer}: no such peer")
                continue
            fn = peers.build_peer(torch, F, peer, source)
            print(f"## {case['name']} {peer}: {source}")
            print("| kernel | grid | block | registers | shared bytes | µs |\n|---|---|---|---|---|---|")
            for name, grid, block, registers, shared, us in kernel_rows(torch, fn, input_sets, args.calls):
                print(f"| {name[:90]} | {grid} | {block} | {registers} | {shared} | {us:.1f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

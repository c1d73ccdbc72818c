#!/usr/bin/env python3
"""Merges a tilefuse GPU benchmark (bench/gpu_cases_bench.cc --json) and the PyTorch peers
of the same run (bench/peers.py --json) into one Markdown table: per case tilefuse fused and
unfused, % of the copy bandwidth each side measured, and the ratio to each peer
(peer time / tilefuse time: above 1 means tilefuse is faster).

    python3 bench/report.py tilefuse.json peers.json > summary.md
"""
import json
import math
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2]))
    by_name = {c["name"]: c for c in peers.get("cases", [])}
    print(f"device: {ours['device']}; copy rate: tilefuse {ours['copy_bandwidth_gbs']:.0f} GB/s, "
          f"peers {peers.get('copy', {}).get('gbps', float('nan')):.0f} GB/s; torch {peers.get('torch')}, triton {peers.get('triton')}\n")
    print("| case | tilefuse fused µs (% copy) | unfused µs | eager µs | library op µs | torch.compile µs | vs eager | vs library | vs torch.compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for c in ours["cases"]:
        name = c["name"]
        if "error" in c:
            print(f"| {name} | error: {c['error']} | | | | | | | |")
            continue
        p = by_name.get(name, {}).get("peers", {})

        def peer(kind):
            r = p.get(kind)
            return r["us"] if isinstance(r, dict) and r.get("us") else None

        def cell(us):
            return f"{us:.1f}" if us else "—"

        def ratio(us):
            return f"{us / c['fused_us']:.2f}x" if us else "—"

        compiled = peer("compile")
        if compiled:
            ratios.append(compiled / c["fused_us"])
        print(f"| {name} | {c['fused_us']:.1f} ({c['percent_of_copy']:.0f}%) | {c['unfused_us']:.1f} | {cell(peer('eager'))} | "
              f"{cell(peer('library'))} | {cell(compiled)} | {ratio(peer('eager'))} | {ratio(peer('library'))} | {ratio(compiled)} |")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\ngeomean vs torch.compile: {geomean:.2f}x over {len(ratios)} cases; "
              f"at or above 1.0x on {sum(r >= 1.0 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()

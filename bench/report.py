#!/usr/bin/env python3
"""Merges a tilefuse GPU benchmark (bench/gpu_cases_bench.cc --json) and the PyTorch peers
of the same run (bench/peers.py --json) into Markdown tables.

Memory-bound cases: per case tilefuse fused and unfused, % of the copy bandwidth each side
measured, and the ratio to each peer (peer time / tilefuse time: above 1 means tilefuse is
faster). GEMM cases (those with "flops"): TF/s (flops / time) of tilefuse and of every peer, and
tilefuse's ratio to torch.compile, to torch.compile max-autotune and to cuBLAS's plain GEMM of
the same shape(s) (the target: >= 0.95x). Attention cases (those whose manifest entry, or peers
record, has "attention": bench/cases/attention_cases.py): TF/s of tilefuse and every peer, and
tilefuse's ratio to the library peer (F.scaled_dot_product_attention; for the GPT blocks the
block in eager with SDPA), to torch.compile, and for the GPT blocks to torch.compile of the SDPA
block (the targets: attention >= 1.0x SDPA, blocks >= 1.2x torch.compile of the SDPA block).

    python3 bench/report.py tilefuse.json peers.json > summary.md
"""
import json
import math
import sys
from pathlib import Path

GEMM_TARGET = 0.95  # of cuBLAS's plain GEMM rate (shared/ANCHORS.md)
ATTENTION_TARGET = 1.0  # forward attention vs SDPA (shared/ANCHORS.md)
BLOCK_TARGET = 1.2  # whole GPT block vs torch.compile of the SDPA block (shared/ANCHORS.md)
MANIFEST = Path(__file__).resolve().parent / "cases" / "cases.json"


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def peer_us(record):
    return record["us"] if isinstance(record, dict) and record.get("us") else None


def memory_bound_table(rows, by_name):
    print("| case | tilefuse fused µs (% copy; % of a same-size copy) | unfused µs | eager µs | library op µs | torch.compile µs | vs eager | vs library | vs torch.compile |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for c in rows:
        name = c["name"]
        if "error" in c:
            print(f"| {name} | error: {c['error']} | | | | | | | |")
            continue
        p = by_name.get(name, {}).get("peers", {})

        def peer(kind):
            return peer_us(p.get(kind))

        def cell(us):
            return f"{us:.1f}" if us else "—"

        def ratio(us):
            return f"{us / c['fused_us']:.2f}x" if us else "—"

        compiled = peer("compile")
        if compiled:
            ratios.append(compiled / c["fused_us"])
        same = f"; {c['percent_of_same_size_copy']:.0f}%" if "percent_of_same_size_copy" in c else ""
        print(f"| {name} | {c['fused_us']:.1f} ({c['percent_of_copy']:.0f}%{same}) | {c['unfused_us']:.1f} | {cell(peer('eager'))} | "
              f"{cell(peer('library'))} | {cell(compiled)} | {ratio(peer('eager'))} | {ratio(peer('library'))} | {ratio(compiled)} |")
    if ratios:
        print(f"\ngeomean vs torch.compile: {geomean(ratios):.2f}x over {len(ratios)} cases; "
              f"at or above 1.0x on {sum(r >= 1.0 for r in ratios)} of {len(ratios)}")


def gemm_table(rows, by_name, flops_of):
    print("| case | GFLOP | tilefuse fused TF/s (µs) | unfused TF/s | eager TF/s | library op TF/s | torch.compile TF/s "
          "| max-autotune TF/s | cuBLAS GEMM alone TF/s | vs torch.compile | vs max-autotune | vs cuBLAS GEMM alone |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = {"compile": [], "compile_max_autotune": [], "gemm_alone": []}
    for c in rows:
        name, flops = c["name"], flops_of(c)
        if "error" in c:
            print(f"| {name} | {flops / 1e9:.1f} | error: {c['error']} | | | | | | | | | |")
            continue
        peers_case = by_name.get(name, {})
        p = dict(peers_case.get("peers", {}), gemm_alone=peers_case.get("gemm_alone"))

        def rate(us):
            return f"{flops / us / 1e6:.0f}" if us else "—"

        def ratio(kind):
            us = peer_us(p.get(kind))
            if not us:
                return "—"
            ratios[kind].append(us / c["fused_us"])
            return f"{us / c['fused_us']:.2f}x"

        peer_rates = " | ".join(rate(peer_us(p.get(k))) for k in ("eager", "library", "compile", "compile_max_autotune", "gemm_alone"))
        print(f"| {name} | {flops / 1e9:.1f} | {rate(c['fused_us'])} ({c['fused_us']:.1f}) | {rate(c['unfused_us'])} | {peer_rates} | "
              f"{ratio('compile')} | {ratio('compile_max_autotune')} | {ratio('gemm_alone')} |")
    print()
    for kind, label in (("gemm_alone", "cuBLAS GEMM alone"), ("compile", "torch.compile"),
                        ("compile_max_autotune", "torch.compile max-autotune")):
        r = ratios[kind]
        if not r:
            continue
        target = f"at or above {GEMM_TARGET}x" if kind == "gemm_alone" else "at or above 1.0x"
        bar = GEMM_TARGET if kind == "gemm_alone" else 1.0
        print(f"geomean vs {label}: {geomean(r):.2f}x over {len(r)} GEMM cases; {target} on {sum(x >= bar for x in r)} of {len(r)}")


def attention_table(rows, by_name, flops_of, is_block):
    print("| case | GFLOP | tilefuse fused TF/s (µs) | unfused TF/s | eager TF/s | library (SDPA) TF/s | torch.compile TF/s "
          "| torch.compile SDPA TF/s | vs library (SDPA) | vs torch.compile | vs torch.compile SDPA |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    ratios = {(block, kind): [] for block in (False, True) for kind in ("library", "compile", "compile_sdpa")}
    for c in rows:
        name, flops = c["name"], flops_of(c)
        if "error" in c:
            print(f"| {name} | {flops / 1e9:.1f} | error: {c['error']} | | | | | | | | |")
            continue
        p = by_name.get(name, {}).get("peers", {})

        def rate(us):
            return f"{flops / us / 1e6:.0f}" if us else "—"

        def ratio(kind):
            us = peer_us(p.get(kind))
            if not us:
                return "—"
            ratios[(is_block(name), kind)].append(us / c["fused_us"])
            return f"{us / c['fused_us']:.2f}x"

        peer_rates = " | ".join(rate(peer_us(p.get(k))) for k in ("eager", "library", "compile", "compile_sdpa"))
        print(f"| {name} | {flops / 1e9:.1f} | {rate(c['fused_us'])} ({c['fused_us']:.1f}) | {rate(c['unfused_us'])} | {peer_rates} | "
              f"{ratio('library')} | {ratio('compile')} | {ratio('compile_sdpa')} |")
    print()
    for block, kind, label, bar in ((False, "library", "SDPA", ATTENTION_TARGET), (False, "compile", "torch.compile", 1.0),
                                    (True, "compile_sdpa", "torch.compile of the SDPA block", BLOCK_TARGET),
                                    (True, "library", "eager with SDPA", 1.0), (True, "compile", "torch.compile", 1.0)):
        r = ratios[(block, kind)]
        if r:
            print(f"geomean vs {label}: {geomean(r):.2f}x over {len(r)} {'GPT block' if block else 'attention'} cases; "
                  f"at or above {bar}x on {sum(x >= bar for x in r)} of {len(r)}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ours = json.load(open(sys.argv[1]))
    peers = json.load(open(sys.argv[2]))
    by_name = {c["name"]: c for c in peers.get("cases", [])}

    def flops_of(c):  # tilefuse's row carries it; older JSONs: the peers' case
        return c.get("flops") or by_name.get(c["name"], {}).get("flops")

    manifest = {c["name"]: c for c in json.loads(MANIFEST.read_text())["cases"]} if MANIFEST.is_file() else {}

    def is_attention(c):
        return "attention" in manifest.get(c["name"], {}) or "attention" in by_name.get(c["name"], {})

    def is_block(name):  # a GPT block: its peers include torch.compile of the SDPA block
        return "compile_sdpa" in manifest.get(name, {}).get("peers", {}) or "compile_sdpa" in by_name.get(name, {}).get("peers", {})

    print(f"device: {ours['device']}; copy rate: tilefuse {ours['copy_bandwidth_gbs']:.0f} GB/s, "
          f"peers {peers.get('copy', {}).get('gbps', float('nan')):.0f} GB/s; torch {peers.get('torch')}, triton {peers.get('triton')}\n")
    memory_bound = [c for c in ours["cases"] if not flops_of(c)]
    gemms = [c for c in ours["cases"] if flops_of(c) and not is_attention(c)]
    attention = [c for c in ours["cases"] if flops_of(c) and is_attention(c)]
    if memory_bound:
        memory_bound_table(memory_bound, by_name)
    if gemms:
        if memory_bound:
            print()
        print("GEMM cases: TF/s = flops / time (2·M·N·K per matmul); ratios = peer time / tilefuse time, above 1 means "
              "tilefuse is faster; cuBLAS GEMM alone: a plain `a @ b` of the same shape(s) through PyTorch\n")
        gemm_table(gemms, by_name, flops_of)
    if attention:
        if memory_bound or gemms:
            print()
        print("Attention cases: TF/s = flops / time (4·B·H·N²·D, halved when causal, as FlashAttention counts; GPT blocks: "
              "2·M·N·K of their four linears + their causal attention); ratios = peer time / tilefuse time, above 1 means "
              "tilefuse is faster; library: F.scaled_dot_product_attention (GPT blocks: the block in eager with SDPA); "
              "torch.compile SDPA: torch.compile of the block with SDPA\n")
        attention_table(attention, by_name, flops_of, is_block)


if __name__ == "__main__":
    main()

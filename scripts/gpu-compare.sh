#!/usr/bin/env bash
# On a machine with a GPU: the benchmark cases timed by two tilefuse builds in one run, in
# turn, for refactors that must not change speed (issue 44's "within 2%"). Expects
# build-gpu/cmp.tar.xz holding cmp/old and cmp/new (tilefuse, tilefuse_bench_gpu_cases) and
# cmp/lib; writes $OUT/bench-{old,new}-round{1,2}.json and a comparison table.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/tilefuse-gpu-out}
mkdir -p "$OUT"
[ -d build-gpu/cmp ] || tar -C build-gpu -xJf build-gpu/cmp.tar.xz
export LD_LIBRARY_PATH="$PWD/build-gpu/cmp/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/compare.log"
REPEATS=${REPEATS:-30}
# Old then new, then new then old: a drift over the run (clocks, temperature) cancels out.
start=$SECONDS
for round in 1 2; do
  # A second round only where the first left time for it within the call's budget.
  [ "$round" = 2 ] && [ $((SECONDS - start)) -gt "${SECOND_ROUND_BEFORE_S:-240}" ] && break
  order="old new"
  [ "$round" = 2 ] && order="new old"
  for side in $order; do
    echo "== round $round, $side" | tee -a "$OUT/compare.log"
    TILEFUSE_CACHE_DIR=/tmp/tilefuse-cache-$side "build-gpu/cmp/$side/tilefuse_bench_gpu_cases" --root . --repeats "$REPEATS" \
      ${CASES:+--cases "$CASES"} --json "$OUT/bench-$side-round$round.json" >>"$OUT/compare.log" 2>&1
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/compare.md"
import json, sys, statistics, glob, os
out = sys.argv[1]
def load(side):
    runs = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"bench-{side}-round*.json")))]
    times = {}
    for r in runs:
        for c in r.get("cases", r if isinstance(r, list) else []):
            t = c.get("fused_us") or c.get("tilefuse_us") or c.get("time_us")
            if t: times.setdefault(c["name"], []).append(t)
    return times
old, new = load("old"), load("new")
print("| case | old µs (best of rounds) | new µs | new / old |\n|---|---|---|---|")
ratios = []
for name in old:
    if name not in new: continue
    o, n = min(old[name]), min(new[name])
    ratios.append(n / o)
    print(f"| {name} | {o:.1f} | {n:.1f} | {n / o:.3f} |")
if ratios:
    print(f"\ngeomean new/old {statistics.geometric_mean(ratios):.4f}; worst {max(ratios):.3f}; cases {len(ratios)}")
PY

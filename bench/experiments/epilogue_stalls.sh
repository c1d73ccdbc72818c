#!/usr/bin/env bash
# Where the GEMM template's warps wait in an epilogue-heavy product (ViT-B's fc1 with its erf
# GELU at 6304 rows, or GRAPH at ROWS): Nsight Compute's stall reasons per issued instruction,
# then its per-instruction samples (SASS), the 40 instructions most waited on and the samples
# by opcode. On a machine with a GPU; carries build-gpu/bundle.tar.xz. A GRAPH ending in .onnx is
# taken as it is (e.g. GRAPH=bench/cases/fp8/gemm_e4m3_weight_blocks_8192.onnx against
# gemm_e4m3_8192.onnx: where block-scaled FP8 steps wait that per-tensor ones do not).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/epilogue-stalls-out}
ROWS=${ROWS:-6304}
GRAPH=${GRAPH:-bench/experiments/vit_gemms/vit_fc1_bias_gelu.onnxtxt}
FORM=${FORM:-}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-stalls}
if [[ "$GRAPH" == *.onnx ]]; then  # a binary model (e.g. bench/cases/fp8/*.onnx) as it is, ROWS unused
  name=$(basename "$GRAPH" .onnx) g=$GRAPH
else
  name=$(basename "$GRAPH" .onnxtxt)-$ROWS
  g="$OUT/$name.onnxtxt"
  sed "s/4096/$ROWS/g" "$GRAPH" > "$g"
fi
"$B/tilefuse" run "$g" --backend cuda --gemm template $FORM > /dev/null 2>&1  # compiled outside the profiler
ncu --clock-control none -k regex:tf_ -c 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$B/tilefuse" run "$g" --backend cuda --gemm template $FORM > "$OUT/$name-stalls.txt" 2>&1
echo "== $name $FORM: stall reasons (warps stalled per issued instruction), largest first"
grep -E "smsp__average_warps_issue_stalled" "$OUT/$name-stalls.txt" | awk '{print $NF, $1}' | sort -gr | head -12
ncu --clock-control none -k regex:tf_ -c 1 --section SourceCounters --section WarpStateStats -o "$OUT/$name" \
    "$B/tilefuse" run "$g" --backend cuda --gemm template $FORM > /dev/null 2>&1
ncu --import "$OUT/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/$name-sass.csv" 2>&1
python3 - "$OUT/$name-sass.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
head = next((i for i, r in enumerate(rows) if "Source" in r), None)
if head is None:
    print("no source page:", rows[:3]); sys.exit()
cols = rows[head]
src = cols.index("Source")
sample = next((i for i, c in enumerate(cols) if c.startswith("Warp Stall Sampling (All")), None)
if sample is None:
    print("columns:", cols); sys.exit()
data = []
for r in rows[head + 1:]:
    try: data.append((float(r[sample] or 0), r[0], r[src]))
    except (ValueError, IndexError): pass
total = sum(d[0] for d in data) or 1
print(f"{len(data)} instructions, {total:.0f} samples")
for s, addr, text in sorted(data, reverse=True)[:40]:
    print(f"  {100 * s / total:5.1f}%  {addr}  {text[:90]}")
by_op = collections.Counter()
for s, _, text in data:
    op = text.split()[0] if text.split() else "?"
    if op.startswith("@"): op = text.split()[1]
    by_op[op.split(".")[0]] += s
print("by opcode:", ", ".join(f"{op} {100 * s / total:.1f}%" for op, s in by_op.most_common(16)))
PY

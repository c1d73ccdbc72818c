#!/usr/bin/env bash
# What bounds a 3xTF32 step at few rows (2026-12-02: 0.51 µs a 64-row step of GPT-2's f32
# products at 128 rows, ~40% of the TF32 rate, the same per SM with one or two consumers):
# Nsight Compute's metrics on tilefuse's kernel in the rule's form (duration, SM active against
# elapsed cycles, the tensor pipe, DRAM and L2 bytes, stall reasons; the CSVs in OUT), for
# GPT-2's four products at ROWS rows in f32 (GRAPHS as in
# small_m_gemms.sh). Candidates: the tensor pipe at the narrow wgmma, B's reads from shared
# memory (bank conflicts of the splitter's transposed writes), the consumers' waits on the
# split, a fixed cost a unit (the tuner's times fit ~10 µs fixed plus ~0.4 µs a step as well as
# a step-bound kernel; 2026-12-02's run: the SMs active about half of each kernel's elapsed
# cycles). GPT-2's weights are [K][N] (the splitter transposes B);
# GRAPHS=bench/experiments/vit_gemms gives the same sizes with B K-major ([N][K], BERT's and
# ViT's nn.Linear). On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/f32-step-ncu-out}
ROWS=${ROWS:-128}
mkdir -p "$OUT/graphs"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-f32-step}
for f in "${GRAPHS:-bench/experiments/gpt2_gemms}"/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)-$ROWS-f32
  g="$OUT/graphs/$name.onnxtxt"
  sed "s/4096/$ROWS/g; s/bfloat16/float/g; s/<to = 16>/<to = 1>/g" "$f" > "$g"
  "$B/tilefuse" run "$g" --backend cuda > /dev/null 2>&1  # the kernel compiled and cached before the profiler
  echo "== $name: $("$B/tilefuse" run "$g" --backend cuda --check 2>&1 | grep -o 'gemm template [^;]*' | head -1)"
  # Where the SMs' time goes: active cycles against elapsed (launch and tail), the tensor
  # pipe's share, and each stall reason's cycles per issued instruction, largest first (the
  # producer warpgroup's waits included: read them beside the consumers' counts).
  ncu --clock-control none --kernel-name regex:gemm --csv --page raw \
    --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__inst_executed.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_bytes.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
    "$B/tilefuse" run "$g" --backend cuda > "$OUT/$name.ncu.csv" 2>&1
  python3 - "$OUT/$name.ncu.csv" <<'PY'
import csv, io, sys
text = open(sys.argv[1]).read()
rows = list(csv.reader(io.StringIO(text[text.index('"ID"'):])))
header, last = rows[0], rows[-1]
values = {h: v for h, v in zip(header, last)}
for key in ("gpu__time_duration.sum", "sm__cycles_active.avg", "sm__cycles_elapsed.avg", "sm__inst_executed.sum",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum", "lts__t_bytes.sum"):
    print(f"    {key}: {values.get(key)}")
stalls = sorted(((float(v.replace(",", "")), h) for h, v in values.items() if "issue_stalled" in h and v.replace(",", "").replace(".", "").isdigit()), reverse=True)
for v, h in stalls[:8]:
    print(f"    {v:8.2f}  {h.replace('smsp__average_warps_issue_stalled_', '').replace('_per_issue_active.ratio', '')}")
PY
done

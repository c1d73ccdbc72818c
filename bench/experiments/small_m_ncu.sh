#!/usr/bin/env bash
# Nsight Compute's view of the 128-row products (2026-12-01): each kernel's duration, grid and
# DRAM/L2 bytes for cuBLAS (F.linear) and for tilefuse's GEMM template in the rule's form,
# where the tuner's and the CUDA-graph timings disagree with the in-model profile. GRAPHS as in
# small_m_gemms.sh; on a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/small-m-ncu-out}
ROWS=${ROWS:-128}
mkdir -p "$OUT/graphs"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-small-m}
M="gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__shared_mem_per_block_dynamic,launch__registers_per_thread,dram__bytes_read.sum,lts__t_bytes.sum"
NCU="ncu --clock-control none --metrics $M --csv"
cat > "$OUT/linear.py" <<'PY'
import sys, torch
import torch.nn.functional as F
m, k, n = map(int, sys.argv[1:4])
x, w = torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
for _ in range(3): F.linear(x, w)
torch.cuda.synchronize()
PY
cat > "$OUT/shape.py" <<'PY'
import re, sys  # K and N of a graph's x [rows, K] and w ([N, K] read through a Transpose, else [K, N])
text = open(sys.argv[1]).read()
shapes = dict((name, [int(d) for d in dims.split(",")]) for dims, name in re.findall(r"bfloat16\[([0-9,]+)\] (\w+)", text.split("=>")[0]))
print(shapes["x"][1], shapes["w"][0] if "Transpose" in text else shapes["w"][1])
PY
summary() {  # the CSV's kernel rows: name, metric, value
  python3 - "$1" <<'PY'
import csv, sys
rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
head, kernels = rows[0], {}
for r in rows[1:]:
    d = dict(zip(head, r))
    key = (d["ID"], d["Kernel Name"][:90])
    kernels.setdefault(key, {})[d["Metric Name"]] = d["Metric Value"]
for (i, name), m in kernels.items():
    print(f"  #{i} {name}")
    print("     " + ", ".join(f"{k.split('__')[1]}={v}" for k, v in sorted(m.items())))
PY
}
for f in "${GRAPHS:-bench/experiments/llama_gemms}"/*.onnxtxt; do
  name=$(basename "$f" .onnxtxt)-$ROWS
  g="$OUT/graphs/$name.onnxtxt"
  sed "s/4096/$ROWS/g" "$f" > "$g"
  read -r k n < <(python3 "$OUT/shape.py" "$g")
  echo "== $name: cuBLAS (F.linear $ROWS x $k -> $n), the last of 3 calls"
  $NCU python3 "$OUT/linear.py" "$ROWS" "$k" "$n" > "$OUT/$name-cublas.csv" 2>&1; summary "$OUT/$name-cublas.csv" | tail -2
  # The rule's form only: tuning under the profiler times every candidate distorted.
  echo "== $name: tilefuse (the rule)"
  $NCU "$B/tilefuse" run "$g" --backend cuda --gemm template > "$OUT/$name-tilefuse.csv" 2>&1
  summary "$OUT/$name-tilefuse.csv" | grep -A1 gemm | tail -2
done

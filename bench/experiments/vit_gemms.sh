#!/usr/bin/env bash
# timm ViT-B/16's layer products at batch 32 (6304 rows: 197 tokens an image), where the model's
# in-graph profile put fc1 with its erf GELU at 304 TF/s (97.7 µs a layer, 2026-12-01): Nsight
# Compute's view of the rule's fc1 with and without the GELU, then small_m_gemms.sh over
# bench/experiments/vit_gemms (the rule's form checked, every template candidate tuned, cuBLAS
# beside them). On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/vit-gemms-out}
ROWS=${ROWS:-6304}
mkdir -p "$OUT/graphs"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-vit-gemms}
for name in ${NCU_GRAPHS:-vit_fc1_bias_gelu vit_fc1_bias}; do
  g="$OUT/graphs/$name-$ROWS.onnxtxt"
  sed "s/4096/$ROWS/g" "bench/experiments/vit_gemms/$name.onnxtxt" > "$g"
  "$B/tilefuse" compile "$g" --backend cuda > /dev/null 2>&1  # compiled outside the profiler
  echo "== $name, the rule's form under Nsight Compute"
  ncu --clock-control none -k regex:tf_ -c 1 --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis \
      --section InstructionStats --section LaunchStats "$B/tilefuse" run "$g" --backend cuda > "$OUT/$name-ncu.txt" 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|Registers Per|Grid Size|Executed Instructions  " "$OUT/$name-ncu.txt" | head -12
done
GRAPHS=bench/experiments/vit_gemms ROWS=$ROWS OUT=$OUT TUNE_LIMIT=${TUNE_LIMIT:-100} bash bench/experiments/small_m_gemms.sh

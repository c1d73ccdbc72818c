#!/usr/bin/env bash
# The TF32 GEMM template's forms on bench/tf32_gemm.py's cases (carry build-gpu/bundle.tar.xz):
# the rule, ping-pong, 128-wide tiles, 3 stages, and cuBLASLt (TF32) in the same harness; then
# mobilenetv3_block's check under --precision high, template and library. Writes under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tf32-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=/tmp/tilefuse-cache
python3 bench/tf32_gemm.py --write-cases /tmp/tfroot
i=0
for v in "" "--gemm-pingpong on" "--gemm-block-n 128" "--gemm-stages 3" "--gemm library" ${VARIANTS:-}; do
  echo "== variant: ${v:-rule}" | tee -a "$OUT/variants.txt"
  "$B/tilefuse_bench_gpu_cases" --root /tmp/tfroot --precision high --repeats 30 --json "$OUT/variant$i.json" $v 2>&1 | tail -n 6 | cut -c1-230 | tee -a "$OUT/variants.txt"
  i=$((i + 1))
done
for g in auto library; do
  "$B/tilefuse" run tests/models/mobilenetv3_block --backend cuda --precision high --gemm $g --check 2>&1 | tail -n 25 > "$OUT/mobilenet_$g.txt"
done
tail -n 12 "$OUT"/mobilenet_*.txt

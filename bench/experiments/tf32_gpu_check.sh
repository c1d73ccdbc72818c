#!/usr/bin/env bash
# The TF32 GEMM template on a machine with a GPU (carry build-gpu/bundle.tar.xz): the f32 real
# models with --precision high checked against the f64 reference (--strict), the Python
# package's TF32 test, then bench/tf32_gemm.py. Writes under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/tf32-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=/tmp/tilefuse-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
for m in tests/models/*/; do
  for p in high highest; do
    r=$("$B/tilefuse" run "$m" --backend cuda --precision $p --check --strict 2>&1 | tail -n 2 | tr '\n' ' ')
    echo "$(basename "$m") $p: $r" | tee -a "$OUT/models.txt"
  done
done
scripts/gpu-python-ext.sh "$B" /tmp/tfp > "$OUT/python-ext.log" 2>&1 || { echo "python ext failed"; tail "$OUT/python-ext.log"; }
PYTHONPATH=/tmp/tfp:$B/python/pytest-lib python3 -m pytest -q -p no:cacheprovider python/tests/test_cuda.py -k "precision or linear" 2>&1 | tail -n 15 | tee "$OUT/pytest.txt"
PYTHONPATH=/tmp/tfp python3 bench/tf32_gemm.py --json "$OUT/tf32_gemm.json" ${TF32_ARGS:-} 2>"$OUT/tf32_gemm.log" | tee "$OUT/tf32_gemm.md"
tail -n 40 "$OUT/tf32_gemm.log"

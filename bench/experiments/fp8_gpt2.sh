#!/usr/bin/env bash
# Issue 50 on a GPU: the device's 8-bit float conversions and its division by a constant against
# the host's and IEEE's (DeviceFloat8Test, DeviceDivisionTest), the FP8 ONNX node tests on the
# CUDA backend with --check (FNUZ included), then GPT-2 quantized to e4m3 by onnxruntime's
# quantization tool against its f32 and bf16 forms (bench/fp8_gpt2.py; SHAPES, default "8x512";
# PROFILE kernels each), then one layer against the reference interpreter. On a machine with a
# GPU; carries build-gpu/bundle.tar.xz and build-gpu/fp8-node-tests.tar (the onnx package's FP8
# node-test folders, which the GPU machine's onnx may not ship: tar -C <onnx>/backend/test/data
# -cf build-gpu/fp8-node-tests.tar node/test_*float8* ...). CONVERSIONS=0 skips the first two.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/fp8-gpt2-out}
mkdir -p "$OUT"
B=build-gpu/bundle X=/tmp/tilefuse-python
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-fp8}
if [ "${CONVERSIONS:-1}" = 1 ]; then
"$B/tilefuse_tests" --gtest_filter='DeviceFloat8*:DeviceDivision*:DeviceBf16*' > "$OUT/device-tests.log" 2>&1
echo "device conversion tests (rc $?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/device-tests.log" | tr '\n' ' ')"
node=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend/test/data/node'))")
if [ ! -d "$node" ] && [ -f build-gpu/fp8-node-tests.tar ]; then
  mkdir -p /tmp/fp8-node-tests && tar -C /tmp/fp8-node-tests -xf build-gpu/fp8-node-tests.tar && node=/tmp/fp8-node-tests/node
fi
pass=0 fail=0
for t in $(ls "$node" | grep -iE 'float8|fnuz|quantizelinear_e|dequantizelinear_e'); do
  if "$B/tilefuse" run "$node/$t" --backend cuda --check > "$OUT/node-$t.log" 2>&1; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "  $t: $(tail -1 "$OUT/node-$t.log")"; fi
done
echo "FP8 node tests on the CUDA backend: $pass PASS, $fail not"
fi
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for shape in ${SHAPES:-8x512}; do
  PYTHONPATH="$X" timeout 420 python3 bench/fp8_gpt2.py --backend cuda --batch "${shape%x*}" --tokens "${shape#*x}" \
    --profile "${PROFILE:-12}" --json "$OUT/gpt2-$shape.json" ${EXTRA:-} > "$OUT/gpt2-$shape.log" 2>&1
  echo "== GPT-2 $shape (rc $?)"
  grep -viE "warn|^\s+(torch|if|mask)|transformers\]" "$OUT/gpt2-$shape.log" | cut -c1-240 | tail -${TAIL:-12}
done
# One layer at 1x128 against the reference interpreter (tilefuse run --check, which says how far
# the reference itself moves under roundings as correct kernels may round: Q/DQ graphs re-round
# every activation to 8 bits).
PYTHONPATH="$X" timeout 200 python3 bench/fp8_gpt2.py --backend cuda --batch 1 --tokens 128 --layers 1 --workdir /tmp/fp8-1layer \
  --json "$OUT/gpt2-1layer.json" > "$OUT/gpt2-1layer.log" 2>&1
echo "== GPT-2, one layer, 1x128 (rc $?)"; grep -E "^GPT-2|error against" "$OUT/gpt2-1layer.log"
"$B/tilefuse" run /tmp/fp8-1layer/gpt2_e4m3.onnx --backend cuda --check > "$OUT/check-1layer.log" 2>&1
echo "tilefuse run --check, e4m3, one layer (rc $?):"; grep -v "^  kernel" "$OUT/check-1layer.log" | tail -14 | cut -c1-300

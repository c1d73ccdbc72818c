#!/usr/bin/env bash
# Models with symbolic dims run at several bindings on a GPU, each checked against the reference
# (--check --strict), with how many kernels each binding compiled. The kernel cache starts
# empty: the first binding compiles every unit, a later one only the kernels whose code its
# sizes change (loop kernels print the sizes the symbols give over launch parameters).
# Usage: bash bench/experiments/symbolic_shapes.sh BUNDLE_DIR OUT_DIR   (GTEST=filter first)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle symbolic-shapes.log
TILEFUSE_CACHE_DIR=$(mktemp -d)
export TILEFUSE_CACHE_DIR
GTEST=${GTEST:-CudaSymbolicSizes*:IndexSizes*:InferSymbolicShapes*:SymExpr*}
gtest_first

# bindings MODEL SHAPE...: each SHAPE run with --check --strict; its verdict, compiles and time.
bindings() {
  local m=$1 s
  shift
  for s in "$@"; do
    timeout 300 "$B/tilefuse" run "$m" --backend cuda --check --strict --json --shape "$s" >"$OUT/run.json" 2>"$OUT/run.err"
    python3 - "$m" "$s" "$OUT/run.json" <<'PY' | tee -a "$log"
import json, sys
model, shape, path = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"FAIL {model} {shape}: no report ({e})"); sys.exit()
kernels = sum(1 for k in j["kernels"] if k["generated"])
print(f"{j['status']} {model} {shape}: {j['backend']}, {kernels} generated kernels, {j['jit_compiles']} compiled, "
      f"compile {j['compile_ms']:.0f} ms, run {j['run_ms']:.3f} ms")
PY
  done
}

bindings tests/shapes/norm_gelu_softmax_symbolic_f32.onnxtxt batch=2,seq=24 batch=3,seq=40 batch=16,seq=128 batch=64,seq=512
bindings tests/models/bert_tiny_dynamic/model.onnx batch=2,sequence=24 batch=3,sequence=24 batch=8,sequence=24 \
  batch=1,sequence=7 batch=3,sequence=40 batch=8,sequence=64

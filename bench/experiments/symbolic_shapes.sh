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

# Every product of tests/gemm (rows written in: the template's runtime rows must not change
# them) against the reference in the rule's form, a few in the other forms, and the 8192^3 bf16
# product's time (REGRESSION=0 skips it).
if [ "${REGRESSION:-1}" = 1 ]; then
  for m in tests/gemm/*.onnxtxt tests/gemm/*.onnx; do check_forms "$m" ""; done
  for m in tests/gemm/gemm_residual_many_tiles_bf16.onnxtxt tests/gemm/gemm_splitk_ragged_tanh_residual_bf16.onnxtxt \
           tests/gemm/gemm_overlap_bias_tanh_ragged_bf16.onnxtxt tests/gemm/gemm_unaligned_vocab_ragged_rows_bf16.onnxtxt; do
    check_forms "$m" "--gemm-form pingpong" "--gemm-form streamk" "--gemm-cluster 2"
  done
  for m in bench/cases/gemm_bf16_8192.onnxtxt bench/cases/gemm_bias_gelu_bf16_8192.onnxtxt; do
    echo "bench $m: $("$B/tilefuse" bench "$m" --backend cuda --repeats 20 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['fused']['ms'])") ms" | tee -a "$log"
  done
fi

# The GEMM template with its rows at launch, in each form, at ragged and whole-tile row counts
# (stream-K keeps its rows in the text), and under compute-sanitizer.
MLP=tests/shapes/mlp_symbolic_bf16.onnxtxt
for s in batch=2,seq=100 batch=3,seq=333 batch=4,seq=512; do
  check_forms $MLP "--shape $s" "--shape $s --gemm-form tail" "--shape $s --gemm-form pingpong" "--shape $s --gemm-form overlap" \
    "--shape $s --gemm-cluster 2" "--shape $s --gemm-form streamk"
done
memcheck $MLP --shape batch=3,seq=333
# Speed: rows at launch against the same model with its dims written as numbers (rows in the text).
for bs in 4:512 8:1024 16:2048 6:512 5:1000 3:333; do
  b=${bs%:*} t=${bs#*:}
  sed "s/batch, seq/$b, $t/g" $MLP >"$OUT/mlp_static.onnxtxt"
  sym=$("$B/tilefuse" bench $MLP --backend cuda --shape batch=$b,seq=$t --repeats 50 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['fused']['ms'])")
  fixed=$("$B/tilefuse" bench "$OUT/mlp_static.onnxtxt" --backend cuda --repeats 50 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['fused']['ms'])")
  echo "speed mlp bf16 ${b}x${t}: rows at launch $sym ms, rows in the text $fixed ms" | tee -a "$log"
done

bindings $MLP batch=2,seq=100 batch=4,seq=512 batch=3,seq=333 batch=6,seq=512 batch=8,seq=1024 batch=16,seq=512
bindings tests/shapes/norm_gelu_softmax_symbolic_f32.onnxtxt batch=2,seq=24 batch=3,seq=40 batch=16,seq=128 batch=64,seq=512
bindings tests/models/bert_tiny_dynamic/model.onnx batch=2,sequence=24 batch=3,sequence=24 batch=8,sequence=24 \
  batch=1,sequence=7 batch=3,sequence=40 batch=8,sequence=64

# torch.compile(dynamic=True): the Python test that a second and third length compile no kernel,
# then GPT-2 small at several lengths (PYTHON=0 skips both).
if [ "${PYTHON:-1}" = 1 ]; then
  X=/tmp/tilefuse-python
  [ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
  PYTHONPATH="$X:$B/python/pytest-lib" TILEFUSE_CLI="$B/tilefuse" python3 -m pytest -q -rs -p no:cacheprovider python/tests/test_cuda.py \
    -k "dynamic_shapes or torch_compile_of_a_cuda_module" 2>&1 | tail -3 | tee -a "$log"
  HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 500 python3 bench/experiments/dynamic_gpt2.py ${GPT2_ARGS:-} 2>&1 | grep -E '^gpt2|Error' | tee -a "$log"
fi

#!/usr/bin/env bash
# The attention template with its batch and lengths at launch, on a GPU: the symbolic self-attention
# and causal attention models at several bindings (--check --strict, the kernels each compiled: the cache starts empty),
# under compute-sanitizer, the fixed-size attention cases' times (their kernels' text changed: the
# lengths now come as a struct the compiler folds), and BERT-base through one compiled model at
# lengths 100 ... 2048 against kernels compiled for each length (bench/dynamic_bert.py).
# Usage: bash bench/experiments/symbolic_attention.sh BUNDLE_DIR OUT_DIR   (GTEST=filter first, BERT=0 skips it,
#        CASES=0 the attention cases' times)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle symbolic-attention.log
TILEFUSE_CACHE_DIR=$(mktemp -d)
export TILEFUSE_CACHE_DIR
GTEST=${GTEST-CudaSymbolicSizes*:*CudaAttention*}  # (GTEST= runs none; * before: the parameterized Attention/ tests too)
gtest_first

A=tests/shapes/attention_symbolic_bf16.onnxtxt
bindings $A batch=2,seq=100 batch=3,seq=333 batch=8,seq=77 batch=4,seq=256 batch=2,seq=1024 batch=1,seq=2000 batch=16,seq=130
memcheck $A --shape batch=3,seq=333
C=tests/shapes/causal_attention_symbolic_bf16.onnxtxt
bindings $C batch=2,seq=1000 batch=2,seq=1100 batch=3,seq=777 batch=1,seq=300 batch=16,seq=2000 batch=4,seq=4000 batch=2,seq=130
memcheck $C --shape batch=2,seq=1100
bindings tests/shapes/decode_attention_symbolic_bf16.onnxtxt batch=1,past=100 batch=1,past=101 batch=1,past=20 batch=1,past=127 \
  batch=1,past=1023 batch=1,past=2000 batch=4,past=333
bindings tests/models/bert_tiny_dynamic/model.onnx batch=2,sequence=24 batch=3,sequence=40 batch=8,sequence=64
[ "${CASES:-1}" = 1 ] && for m in bench/cases/attention_bf16_b4h16n4096d128.onnxtxt bench/cases/attention_bf16_b4h16n4096d64.onnxtxt \
         bench/cases/attention_causal_bf16_b4h16n4096d128.onnxtxt bench/cases/attention_causal_bf16_b4h16n4096d64.onnxtxt \
         bench/cases/gpt_block_bf16_b8t2048d1024h16.onnxtxt; do
  echo "bench $m: $("$B/tilefuse" bench "$m" --backend cuda --repeats 30 --json 2>/dev/null | python3 -c "import json,sys; print(json.load(sys.stdin)['fused']['ms'])") ms" | tee -a "$log"
done
if [ "${BERT:-1}" = 1 ]; then
  timeout 480 python3 bench/dynamic_bert.py "$B/tilefuse" /tmp/tilefuse-bert --json "$OUT/dynamic-bert.json" ${BERT_ARGS:-} 2>&1 \
    | grep -v Warning | tee -a "$log"
fi

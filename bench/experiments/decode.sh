#!/usr/bin/env bash
# Greedy decoding with a KV cache on a GPU: bench/decode.py's modes (eager, torch.compile's modes,
# tilefuse, and the ONNX export with its cache through tilefuse and onnxruntime) for GPT-2 small and
# a LLaMA-style model, and tilefuse's decode step under the
# profiler; first, random graphs over symbolic dims (seq 1 ... 40, a decode step's among them)
# on the CUDA backend against the reference, each at three bindings.
# Usage: bash bench/experiments/decode.sh BUNDLE_DIR OUT_DIR   (MODELS="gpt2 llama", MODES=..., ARGS=...,
#        FUZZ=0 skips the fuzzing, FUZZ_COUNT=100, CHECKS=0 skips the checks and tests before the modes,
#        NORMS=1 times tilefuse's mode again with TILEFUSE_SKINNY_NORMS=1, TIMELINE=1 puts GPT-2's step on
#        the device's timeline after the checks: bench/experiments/decode_host_time_probe.py --timeline,
#        MODELS=none times no model)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle decode.log
if [ "${FUZZ:-1}" = 1 ]; then
  TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 300 "$B/tilefuse" fuzz --symbolic --backend cuda --seed 0 --count "${FUZZ_COUNT:-100}" 2>&1 |
    grep -E "^(mismatch|error|ill-conditioned|fuzz):" | tee -a "$log"
fi
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
if [ "${CHECKS:-1}" = 1 ]; then
  # Attention's decode form (a CTA per query row) and the skinny GEMM's products (B's first
  # stages loaded before the grid ahead ends) against the reference, and under memcheck; a
  # decode step's q, k (rotary epilogues) and v in one GEMM template kernel.
  for m in tests/attention/attention_decode_*.onnxtxt tests/gemm/gemm_skinny_*.onnxtxt tests/gemm/gemm_rotary_qk_v_decode_bf16.onnxtxt; do
    check_forms "$m" ""
    memcheck "$m"
  done
  # Layer and RMS norms computed in the skinny products (TILEFUSE_SKINNY_NORMS=1: A written by
  # the producer's second warp; an RMS norm by both its readers) against the reference and under
  # memcheck.
  for m in tests/gemm/gemm_skinny_layer_norm_*.onnxtxt tests/gemm/gemm_skinny_rms_norm_*.onnxtxt; do
    TILEFUSE_SKINNY_NORMS=1 check_forms "$m" ""
    TILEFUSE_SKINNY_NORMS=1 memcheck "$m"
  done
  # The decode form's time against the tiled kernel's (TILEFUSE_DECODE_ATTENTION=0): a step's
  # attention over 300 keys and over 4000 (split over the keys).
  for m in tests/attention/attention_decode_cache_bf16.onnxtxt tests/attention/attention_decode_long_cache_bf16.onnxtxt; do
    for form in 1 0; do
      { echo "== $m, decode form $form"; TILEFUSE_DECODE_ATTENTION=$form "$B/tilefuse" bench "$m" --backend cuda --repeats 50 --warmup 10 2>&1 |
          grep -E '^(fused|unfused) '; } | tee -a "$log"
    done
  done
  # Reductions along a symbolic seq (CUDA row and column reductions with the length in their text).
  bindings tests/shapes/seq_softmax_pool_symbolic_f32.onnxtxt batch=16,seq=128 batch=24,seq=100 batch=9,seq=333 batch=1,seq=1
  # transformers' BERT export with symbolic batch and sequence: after the first binding, kernels
  # from the cache only (row and column reductions, transposed tiles and products over the symbols).
  bindings tests/models/bert_tiny_dynamic/model.onnx batch=3,sequence=40 batch=4,sequence=56 batch=2,sequence=48
  # A KV-cache step export in f32 (its softmax over past + 1 keys a row held in registers, the
  # length at launch): 201 and 231 keys share the kernels, 32 keys another form.
  bindings tests/models/gpt2_kv_step_dynamic/model.onnx batch=1,past=200 batch=1,past=230 batch=1,past=31
  # The decode tests on this GPU first: the cache written in place and the step's graph replayed,
  # against eager's logits and tokens.
  HF_HUB_OFFLINE=1 PYTHONPATH="$X:$B/python/pytest-lib" TILEFUSE_CLI="$B/tilefuse" timeout 300 python3 -m pytest -q -rs \
    -p no:cacheprovider python/tests/test_torch_decode.py python/tests/test_cuda.py -k "decod or staged or cpu_tensors or replay or overwrite" \
    2>&1 | tail -4 | tee -a "$log"
  # A model file's bindings share one copy of its weights on the GPU; the staged copies' kernel.
  "$B/tilefuse_tests" --gtest_filter='CompiledModel.BindingsOfAModelFile*:StagedCopies*' 2>&1 | tail -3 | tee -a "$log"
fi
if [ "${TIMELINE:-0}" = 1 ]; then
  HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 150 python3 bench/experiments/decode_host_time_probe.py --steps 32 --timeline >"$OUT/timeline.log" 2>&1
  grep -E "^(generation|the step|timeline)" -A12 "$OUT/timeline.log" | head -30 | tee -a "$log"
fi
[ "${MODELS:-}" = none ] && exit 0
for model in ${MODELS:-gpt2 llama}; do
  PYTHONFAULTHANDLER=1 HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 590 python3 bench/decode.py --model "$model" --json "$OUT/decode-$model.json" --timeout ${LIMIT:-500} \
    ${MODES:+--modes $MODES} ${ARGS:-} 2>&1 | grep -Ev 'Warning|warn\(|__cudagraphs\]  ' | tee -a "$log"
  # NORMS=1: tilefuse's mode again with the layer norms computed in the skinny products.
  if [ "${NORMS:-0}" = 1 ]; then
    echo "== $model, TILEFUSE_SKINNY_NORMS=1" | tee -a "$log"
    TILEFUSE_SKINNY_NORMS=1 PYTHONFAULTHANDLER=1 HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 590 python3 bench/decode.py --model "$model" \
      --json "$OUT/decode-$model-norms.json" --timeout ${LIMIT:-500} --modes tilefuse ${ARGS:-} 2>&1 | grep -Ev 'Warning|warn\(|__cudagraphs\]  ' | tee -a "$log"
  fi
done

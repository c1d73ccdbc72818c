#!/usr/bin/env bash
# Issue 48's first criterion on a GPU: ONNX exports with symbolic dims run at three bindings with
# --check --strict, each in a new process over one kernel cache that starts empty; the second
# and third compile no kernel (tests/e2e/cli_symbolic_dims_test.cc checks the same for sm_90a
# without a GPU). transformers' BERT (symbolic batch and sequence) and GPT-2's KV-cache step
# (symbolic past). Then one binding under memcheck.
# Usage: bash bench/experiments/symbolic_bindings.sh BUNDLE_DIR OUT_DIR
set -u
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source "$(dirname "$0")/template_checks.sh"
open_bundle symbolic-bindings.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
export TILEFUSE_CACHE_DIR=/tmp/tfc-symbolic-bindings
rm -rf "$TILEFUSE_CACHE_DIR"
bindings tests/models/bert_tiny_dynamic/model.onnx batch=3,sequence=40 batch=4,sequence=56 batch=2,sequence=48
bindings tests/models/gpt2_kv_step_dynamic/model.onnx batch=1,past=200 batch=1,past=230 batch=1,past=240
memcheck tests/models/bert_tiny_dynamic/model.onnx --shape batch=4,sequence=56

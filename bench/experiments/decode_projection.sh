#!/usr/bin/env bash
# A decode attention's output projection computed in its kernel (TILEFUSE_PROJECTION_IN_ATTENTION=1;
# codegen/cuda/device/attention_decode_projection.cuh, backend/cuda/cuda_projection_fold.h), on a GPU:
#   checks: tests/attention/attention_decode_projection_* against the f64 reference with the switch
#           on (the projection in the attention, a cluster of the heads) and off, and under memcheck on
# then, through decode_folds.sh with the switch on: the torch decode tests (eager's logits and
# caches, GPT-2 and LLaMA configs), GPT-2's step timed with it off, on, and on with every kernel
# releasing the one behind before its wait (TILEFUSE_TRIGGER_FIRST=1), in turns (PROBE_ENVS), and
# bench/decode.py end to end (MODES, default tilefuse; TILEFUSE_TRIGGER_FIRST=1 in the
# environment for both switches).
# Usage: bash bench/experiments/decode_projection.sh BUNDLE_DIR OUT_DIR   (STAGES="checks pytest probes e2e")
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-checks pytest probes e2e}
source bench/experiments/template_checks.sh
open_bundle decode_projection.log
if [[ " $STAGES " == *" checks "* ]]; then
  for m in tests/attention/attention_decode_projection_*.onnxtxt; do
    TILEFUSE_PROJECTION_IN_ATTENTION=1 check_forms "$m" ""
    TILEFUSE_PROJECTION_IN_ATTENTION=1 memcheck "$m"
    check_forms "$m" ""
  done
fi
folds() { bash bench/experiments/decode_folds.sh "$B" "$OUT/$1" 2>&1 | tee -a "$log"; }
if [[ " $STAGES " == *" pytest "* ]]; then TILEFUSE_PROJECTION_IN_ATTENTION=1 STAGES=pytest folds pytest; fi
if [[ " $STAGES " == *" probes "* ]]; then
  on=TILEFUSE_PROJECTION_IN_ATTENTION=1
  STAGES=probes PROBE_ENVS="${PROBE_ENVS:-TILEFUSE_PROJECTION_IN_ATTENTION=0 $on $on,TILEFUSE_TRIGGER_FIRST=1 TILEFUSE_PROJECTION_IN_ATTENTION=0 $on $on,TILEFUSE_TRIGGER_FIRST=1}" folds probes
fi
if [[ " $STAGES " == *" e2e "* ]]; then
  TILEFUSE_PROJECTION_IN_ATTENTION=1 STAGES=e2e E2E="1,1" MODES="${MODES:-tilefuse}" E2E_ARGS="${E2E_ARGS:---skip-guards}" E2E_NAME=-projection folds e2e
fi

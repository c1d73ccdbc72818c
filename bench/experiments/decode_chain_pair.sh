#!/usr/bin/env bash
# A decode step's MLP as one kernel in pairs of CTAs (TILEFUSE_SKINNY_CHAINS=1; the pair form,
# gemm_skinny_chain_sm90.cuh's kPair, the chain's rule since 2026-12-07), on a GPU:
#   checks: the MLP graphs (tests/gemm/gemm_skinny_*mlp_decode*) with the chain against the f64
#           reference, one under memcheck (decode_folds.sh's checks stage: every skinny graph)
#   pytest: the torch decode tests (GPT-2's and LLaMA's configs) with the chain on
#   probes: GPT-2's step with the chain off and on, in turns (device time, timeline)
#   e2e:    bench/decode.py with the chain on (MODES, default tilefuse)
# Usage: bash bench/experiments/decode_chain_pair.sh BUNDLE_DIR OUT_DIR   (STAGES="checks pytest probes e2e")
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-checks pytest probes e2e}
folds() { bash bench/experiments/decode_folds.sh "$B" "$OUT/$1"; }
if [[ " $STAGES " == *" checks "* ]]; then STAGES=checks folds checks; fi
if [[ " $STAGES " == *" pytest "* ]]; then TILEFUSE_SKINNY_CHAINS=1 STAGES=pytest folds pytest; fi
if [[ " $STAGES " == *" probes "* ]]; then
  STAGES=probes PROBE_ENVS="${PROBE_ENVS:-TILEFUSE_SKINNY_CHAINS=0 TILEFUSE_SKINNY_CHAINS=1 TILEFUSE_SKINNY_CHAINS=0 TILEFUSE_SKINNY_CHAINS=1}" folds probes
fi
if [[ " $STAGES " == *" e2e "* ]]; then
  TILEFUSE_SKINNY_CHAINS=1 STAGES=e2e E2E="1,1" MODES="${MODES:-tilefuse}" E2E_ARGS="${E2E_ARGS:---skip-guards}" E2E_NAME=-chain folds e2e
fi

#!/usr/bin/env bash
# Two ways to take launches off a decode step's critical path, measured on a GPU: the layer norms
# computed in the skinny products that read them, their row, scale and bias held in registers
# (TILEFUSE_SKINNY_NORMS=1; gemm_skinny_sm90.cuh's SkinnyNormedA), and the KV cache's update
# written by the decode attention (TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1;
# backend/cuda/cuda_cache_update_fold.h); and the step's host path after call_checked reads only
# the pointers that changed (the runtime's own host time printed by the probe).
#   pytest: the decode tests (bf16 with and without the cache update in the attention, against
#           eager's logits and caches; the norms in the products unless PYTEST_NORMS=0), or the
#           tests PYTESTS names
#   probes: GPT-2's decode step (decode_host_time_probe.py, timeline) per setting in PROBES,
#           "NORMS,FOLD" pairs (default "0,0 1,0 0,1 1,1"), or per item of PROBE_ENVS where set
#           (switches as "NAME=V,NAME=V", e.g. "TILEFUSE_SKINNY_PREFETCH=0 TILEFUSE_SKINNY_PREFETCH=1"
#           for an A/B in turns); PROBE_ARGS more of its flags (--host)
#   checks: every skinny graph with a norm against the f64 reference and under memcheck with the
#           norms in the products; the one-row graph (cluster form); every other skinny graph
#           (tests/gemm/gemm_skinny_*) against the reference; the MLP graphs with their two
#           products as one kernel (TILEFUSE_SKINNY_CHAINS=1), one under memcheck
#   e2e:    bench/decode.py's MODES (default tilefuse,compile) with the setting E2E ("NORMS,FOLD") and
#           more of its flags in E2E_ARGS (--skip-guards), its JSON named with E2E_NAME
# Usage: bash bench/experiments/decode_folds.sh BUNDLE_DIR OUT_DIR   (STAGES="pytest probes checks";
# MODEL=llama for TinyLlama's shape)
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
STAGES=${STAGES:-pytest probes checks}
source bench/experiments/template_checks.sh
open_bundle decode_folds.log
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
if [[ " $STAGES " == *" pytest "* ]]; then
  # The norms switch is on for these tests unless PYTEST_NORMS=0; the log says which (a reading
  # of this stage once missed that it was on, 2026-12-06).
  echo "== pytest, TILEFUSE_SKINNY_NORMS=${PYTEST_NORMS:-1}: ${PYTESTS:-python/tests/test_torch_decode.py}" | tee -a "$log"
  TILEFUSE_SKINNY_NORMS=${PYTEST_NORMS:-1} HF_HUB_OFFLINE=1 PYTHONPATH="$X:$B/python/pytest-lib" timeout 200 python3 -m pytest -q -p no:cacheprovider \
    --show-capture=no --tb=short ${PYTESTS:-python/tests/test_torch_decode.py} 2>&1 | tail -25 | tee -a "$log"
fi
if [[ " $STAGES " == *" probes "* ]]; then
  settings=()
  if [ -n "${PROBE_ENVS:-}" ]; then
    settings=($PROBE_ENVS)
  else
    for pair in ${PROBES:-0,0 1,0 0,1 1,1}; do settings+=("TILEFUSE_SKINNY_NORMS=${pair%,*},TILEFUSE_CACHE_UPDATE_IN_ATTENTION=${pair#*,}"); done
  fi
  turn=0
  for setting in "${settings[@]}"; do
    turn=$((turn + 1))
    name="${MODEL:-gpt2}-$turn-$(echo "$setting" | tr ',=' '_-' | sed 's/TILEFUSE_//g')"
    echo "== ${MODEL:-gpt2}'s decode step, ${setting//,/ }" | tee -a "$log"
    env ${setting//,/ } HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 150 \
      python3 bench/experiments/decode_host_time_probe.py --model "${MODEL:-gpt2}" --steps 32 --timeline ${PROBE_ARGS:-} >"$OUT/timeline-$name.log" 2>&1
    grep -E "^(generation|  the step|the step|its kernels|timeline)" -A12 "$OUT/timeline-$name.log" | head -40 | tee -a "$log"
  done
fi
if [[ " $STAGES " == *" checks "* ]]; then
  for m in tests/gemm/gemm_skinny_layer_norm_*.onnxtxt tests/gemm/gemm_skinny_rms_norm_*.onnxtxt; do
    TILEFUSE_SKINNY_NORMS=1 check_forms "$m" ""
    TILEFUSE_SKINNY_NORMS=1 memcheck "$m"
  done
  for m in tests/gemm/gemm_skinny_*.onnxtxt; do
    case "$m" in *_norm_*) ;; *) check_forms "$m" "" ;; esac
  done
  for m in tests/gemm/gemm_skinny_*mlp_decode*.onnxtxt; do  # the two products as one kernel
    TILEFUSE_SKINNY_CHAINS=1 check_forms "$m" ""
  done
  TILEFUSE_SKINNY_CHAINS=1 memcheck tests/gemm/gemm_skinny_gpt2_mlp_decode_normed_bf16.onnxtxt
fi
if [[ " $STAGES " == *" e2e "* ]]; then  # bench/decode.py, each mode its own process, the settings of E2E ("NORMS,FOLD")
  norms=${E2E%,*} fold=${E2E#*,}
  TILEFUSE_SKINNY_NORMS=$norms TILEFUSE_CACHE_UPDATE_IN_ATTENTION=$fold HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout "${E2E_SECONDS:-150}" \
    python3 bench/decode.py --model "${MODEL:-gpt2}" --modes "${MODES:-tilefuse,compile}" --repeats 2 ${E2E_ARGS:-} \
      --json "$OUT/decode-${MODEL:-gpt2}${E2E_NAME:-}.json" 2>&1 |
    tail -12 | tee -a "$log"
fi

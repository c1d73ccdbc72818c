#!/usr/bin/env bash
# The GPU decode tests' logits against eager's, under the decode switches and in different
# company: the fold test alone and after the file's other tests (a mismatch seen only in the
# whole file, 2026-12-06), then decode_mismatch_probe.py per setting in its own process.
# Usage: bash bench/experiments/decode_mismatch.sh BUNDLE_DIR OUT_DIR  (STAGES="pytest probe")
set -uo pipefail
B=${1:?bundle folder (build-gpu/bundle)}
OUT=${2:?output folder}
source bench/experiments/template_checks.sh
open_bundle decode_mismatch.log
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" >"$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
# pytest_with "ENV ASSIGNMENTS" [pytest args]: the decode test file (or what the args select).
pytest_with() {
  local switches=$1
  shift
  echo "== pytest, ${switches:-no switches} $*" | tee -a "$log"
  env $switches HF_HUB_OFFLINE=1 PYTHONPATH="$X:$B/python/pytest-lib" timeout 150 python3 -m pytest -q -p no:cacheprovider \
    --show-capture=no --tb=line -rf "$@" python/tests/test_torch_decode.py 2>&1 | grep -E "pass [01]|passed|failed|FAILED" |
    cut -c1-600 | tee -a "$log"
}
# VARIANTS: switch sets separated by ';' (each run once with the pytest args in PYTEST_ARGS,
# and once by the probe).
IFS=';' read -ra variants <<<"${VARIANTS:-TILEFUSE_SKINNY_NORMS=1;;TILEFUSE_SKINNY_NORMS=1 TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1}"
if [[ " ${STAGES:-pytest probe} " == *" pytest "* ]]; then
  for s in "${variants[@]}"; do
    pytest_with "$s" ${PYTEST_ARGS:-}
  done
fi
if [[ " ${STAGES:-pytest probe} " == *" probe "* ]]; then
  for s in "${variants[@]}"; do
    env $s HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 100 python3 bench/experiments/decode_mismatch_probe.py 2>&1 |
      grep -E " pass |step graph|Error" | cut -c1-300 | tee -a "$log"
  done
fi

#!/usr/bin/env bash
# The attention template at the language models' 8x512 shapes (bench/cases/attention_*_b8*n512*)
# under its configuration overrides (tilefuse_bench_gpu_cases --attention-*), beside SDPA and
# torch.compile (bench/peers.py), in one call on a machine with a GPU; carries
# build-gpu/bundle.tar.xz. VARIANTS: ";"-separated override sets ("" is the rule).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/short-attention-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}" TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tfc-sa}
CASES=${CASES:-attention_causal_bf16_b8h12n512d64,attention_bf16_b8h12n512d64,attention_causal_bf16_b8h16n512d128}
VARIANTS=${VARIANTS:-";--attention-tiles 2;--attention-tiles 4;--attention-tiles 2 --attention-q-slots 2;--attention-block-n 64;--attention-block-n 64 --attention-tiles 2;--attention overlap;--attention-consumers 3"}
IFS=';' read -ra sets <<< "$VARIANTS"
i=0
for v in "${sets[@]}"; do
  # shellcheck disable=SC2086
  timeout 120 "$B/tilefuse_bench_gpu_cases" --cases "$CASES" --repeats 30 --json "$OUT/variant$i.json" $v > "$OUT/variant$i.log" 2>&1
  echo "== variant $i [${v:-rule}]: exit $?"
  python3 -c "
import json, sys
for c in json.load(open(sys.argv[1]))['cases']:
    print('  %-40s %8.1f us %6.0f TF/s  %s' % (c['name'], c.get('fused_us', 0), c.get('fused_tflops', 0), (c.get('strategy') or c.get('error', ''))[:160]))
" "$OUT/variant$i.json" 2>/dev/null || tail -3 "$OUT/variant$i.log"
  i=$((i + 1))
done
[ "${PEERS:-1}" = 1 ] && timeout 240 python3 bench/peers.py --cases "$CASES" --peers library,compile --json "$OUT/peers.json" 2>&1 | grep -v Warn | tail -15

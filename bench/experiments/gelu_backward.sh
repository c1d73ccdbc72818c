#!/usr/bin/env bash
# GPT-2's MLP backward product with the tanh-GELU's backward fused (the training step's slowest
# tilefuse kernel, 167 us where the product alone should take ~30) beside the plain product, in
# each consumer form (tilefuse run --gemm-form), timed by one run's trace; checked against the
# reference. On a machine with a GPU; carries build-gpu/bundle.tar.xz.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gelu-backward-out}
mkdir -p "$OUT"
B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$PWD/$B/lib:${LD_LIBRARY_PATH:-}"
for f in bench/experiments/gelu_backward/*.onnxtxt; do
  for form in rule tail pingpong; do
    name=$(basename "$f" .onnxtxt)-$form
    TILEFUSE_CACHE_DIR=/tmp/tfc-gb "$B/tilefuse" run "$f" --backend cuda --random 1 --gemm-form $form --check \
      --trace "$OUT/$name.json" --trace-warmup 5 > "$OUT/$name.log" 2>&1
    python3 -c "
import json, sys
events = json.load(open(sys.argv[1]))
events = events.get('traceEvents', events) if isinstance(events, dict) else events
print(sys.argv[2], ', '.join('%s %.1f us' % (e['name'], e['dur']) for e in events if e.get('ph') == 'X' and 'gemm' in e.get('name', '')), '|', open(sys.argv[3]).read().strip().splitlines()[-1][:100])
" "$OUT/$name.json" "$name" "$OUT/$name.log" 2>&1 | tail -1
  done
done

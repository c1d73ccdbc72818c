#!/usr/bin/env bash
# Compares the machine code two tilefuse binaries generate for the same models, kernel by
# kernel: for refactors of the emitters and the device code that must not change what runs.
#   scripts/compare-kernels.sh OLD_TILEFUSE NEW_TILEFUSE MODEL... [-- extra compile flags]
# Each binary's `compile --backend cuda --emit` source is compiled to a cubin by nvcc for
# sm_90a with the binary's own device headers, disassembled (cuobjdump, from the toolkit or
# $CUOBJDUMP), and the instruction lists compared with addresses and encodings stripped.
# Prints one line a model (SAME, or DIFFERENT with each differing kernel's instruction counts,
# old->new) and exits 1 when
# any differs. Needs no GPU.
set -uo pipefail
old=$1 new=$2
shift 2
models=() flags=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; flags=("$@"); break; fi
  models+=("$1"); shift
done
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
differing=0
# Instructions only, per function: "Function : name" headers kept, addresses and encodings dropped.
sass() { "$cuobjdump" -sass "$1" | sed -n -e 's/^[[:space:]]*Function : /== /p' -e 's@^[[:space:]]*/\*[0-9a-f]\{4\}\*/[[:space:]]*\(.*\);.*@\1@p'; }
for m in "${models[@]}"; do
  for side in old new; do
    bin=${!side}
    d="$work/$side"
    rm -rf "$d"
    if ! "$bin" compile "$m" --backend cuda --emit "$d" "${flags[@]}" >"$work/$side.log" 2>&1; then
      echo "FAILED $m ($side): $(tail -3 "$work/$side.log")"; differing=1; continue 2
    fi
    "$nvcc" -std=c++17 -arch=sm_90a -cubin -w -I"$d" "$d/kernels.cu" -o "$d/k.cubin" 2>"$work/$side.nvcc" ||
      { echo "FAILED $m ($side nvcc): $(head -5 "$work/$side.nvcc")"; differing=1; continue 2; }
    sass "$d/k.cubin" | awk '/^== /{f=$2} {print > (D "/" f ".sass")}' D="$d"
  done
  diffs=""
  for f in $(ls "$work"/old/*.sass "$work"/new/*.sass 2>/dev/null); do
    k=$(basename "$f")
    [[ "$diffs" == *" ${k%.sass}:"* ]] && continue
    cmp -s "$work/old/$k" "$work/new/$k" 2>/dev/null ||
      diffs+=" ${k%.sass}:$(wc -l <"$work/old/$k" 2>/dev/null || echo none)->$(wc -l <"$work/new/$k" 2>/dev/null || echo none)"
  done
  if [ -z "$diffs" ]; then echo "SAME $m ($(ls "$work"/new/*.sass 2>/dev/null | wc -l) kernels)"
  else echo "DIFFERENT $m:$diffs"; differing=1; fi
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP/$(basename "$m")"; cp -r "$work/old" "$work/new" "$KEEP/$(basename "$m")/"; fi
done
exit $differing

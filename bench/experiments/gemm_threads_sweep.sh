#!/usr/bin/env bash
# Diagnostic: `tilefuse bench --backend cpu` of plain f32 MatMuls (both operands inputs) at
# several sizes and OMP team sizes, to choose how many threads a small product gets.
TF=${1:-build/tilefuse}
D=$(mktemp -d)
for mkn in 16x64x64 64x64x256 64x256x256 64x256x512 128x256x768 128x768x768 512x768x768 2048x768x768; do
  IFS=x read m k n <<<"$mkn"
  cat >"$D/mm_$mkn.onnxtxt" <<EOT
<
  ir_version: 8,
  opset_import: ["" : 17]
>
mm (float[$m,$k] a, float[$k,$n] b) => (float[$m,$n] y)
{
  y = MatMul (a, b)
}
EOT
  line="$mkn"
  for t in 1 2 4 8 16; do
    ms=$(OMP_NUM_THREADS=$t "$TF" bench "$D/mm_$mkn.onnxtxt" --backend cpu --no-unfused 2>/dev/null | awk '$1=="fused"{print $3}')
    [ -z "$ms" ] && ms=$(OMP_NUM_THREADS=$t "$TF" bench "$D/mm_$mkn.onnxtxt" --backend cpu 2>/dev/null | awk '$1=="fused"{print $3}')
    line="$line t$t=$ms"
  done
  echo "$line"
done

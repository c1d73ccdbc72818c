#!/usr/bin/env bash
# Runs the generated CUDA source of ResNet's stem copies (the padded NHWC copy and the im2col
# prologue: pointwise kernels, no shared memory) on the host, for a machine without a GPU: the
# kernels' text from `tilefuse compile --backend cuda --dump-dir`, a few of the device library's
# helpers written for the host (stem_*.cc), every block and thread run in turn, every element
# of the im2col compared with its definition, outputs poisoned with NaN first (stem.cc). Evidence
# for a change to these kernels before a GPU run; not a substitute for one (no timing, no device
# library). Usage: bench/experiments/stem_host_emulation/run.sh [TILEFUSE_BINARY]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${1:-$root/build/tilefuse}
work=$(mktemp -d)
for form in f32 bf16; do
  model=$([ $form = f32 ] && echo "$root/tests/gemm/gemm_conv_stem_constant_weight_f32.onnxtxt" || echo "$here/stem_bf16.onnxtxt")
  "$bin" compile "$model" --backend cuda --precision high --dump-dir "$work/$form" > /dev/null
  # The two pointwise kernels come first in the dump, the GEMM template after them.
  awk '/__global__/ && /tf_group1_gemm\(/ {exit} /extern "C" __global__/ {on=1} on' "$work/$form/kernels.cu" > "$work/$form.inc"
  g++ -O2 -std=c++20 -DKERNELS="\"$work/$form.inc\"" $([ $form = bf16 ] && echo -DBF16) -o "$work/stem_$form" "$here/stem.cc"
  "$work/stem_$form"
done
rm -rf "$work"

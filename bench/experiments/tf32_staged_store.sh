#!/usr/bin/env bash
# f32 outputs staged and stored by TMA (TILEFUSE_GEMM_F32_STAGED=1, fifty-ninth session), one
# call on a machine with a GPU; carries build-gpu/bundle.tar.xz. The f32 graphs --check with
# the switch in TF32 and 3xTF32, memcheck, then ResNet-50 f32 (TF32) at batch 32 kernel by
# kernel, programmatic launches off, without and with it. Expected: the 1x1 products that write
# a wide f32 output from a short K (92 and 57 µs on an H100 with float2 pairs) nearer their
# bytes' time (~40 and ~25 µs at 3.3 TB/s).
# Usage: bash bench/experiments/tf32_staged_store.sh OUT_DIR
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?output folder}
B=build-gpu/bundle
source bench/experiments/template_checks.sh
open_bundle staged.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
export TILEFUSE_GEMM_F32_STAGED=1
for m in tests/gemm/gemm_bias_f32.onnxtxt tests/gemm/gemm_3xtf32_b_transposed_residual_ragged_f32.onnxtxt \
         tests/gemm/gemm_3xtf32_many_tiles_f32.onnxtxt tests/gemm/linear_nhwc_gelu_f32.onnxtxt; do
  check_forms "$m" "" "--precision high"
done
for m in tests/conv/residual_block_f32.onnxtxt tests/conv/conv_bn_relu_f32.onnxtxt tests/conv/layout_edges_ragged_f32.onnxtxt; do
  check_forms "$m" "--precision high"
done
memcheck tests/conv/residual_block_f32.onnxtxt --precision high
X=/tmp/tilefuse-python
export HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tilefuse-cache}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
for s in 0 1; do
  TILEFUSE_GEMM_F32_STAGED=$s TILEFUSE_PDL=0 PYTHONPATH="$X" timeout 120 python3 bench/experiments/graph_profile.py --model resnet50 \
    --dtype f32 --shape 32 --top 40 --first 60 > "$OUT/resnet50-f32-32-nopdl-staged$s.txt" 2>&1
  echo "== resnet50 f32 32, programmatic launches off, TILEFUSE_GEMM_F32_STAGED=$s: exit $?" | tee -a "$log"
  grep -E "^== " "$OUT/resnet50-f32-32-nopdl-staged$s.txt" | tee -a "$log"
done
for s in 0 1; do
  TILEFUSE_GEMM_F32_STAGED=$s PYTHONPATH="$X" timeout 90 python3 bench/tf32_gemm.py --cases conv1x1_bias_f32_100352x256x64,conv1x1_residual_f32_100352x256x64 \
    --peers tilefuse_tf32,addmm_tf32 --repeats 20 > "$OUT/tf32-gemm-staged$s.txt" 2>&1
  echo "== tf32_gemm.py, TILEFUSE_GEMM_F32_STAGED=$s: exit $?" | tee -a "$log"
  grep "^| conv" "$OUT/tf32-gemm-staged$s.txt" | tee -a "$log"
done

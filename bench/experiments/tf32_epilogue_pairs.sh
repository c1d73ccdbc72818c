#!/usr/bin/env bash
# f32 epilogue values as float2 pairs (fifty-ninth session, 2026-12-07), one call on a machine
# with a GPU; carries build-gpu/bundle.tar.xz. A TF32 or 3xTF32 product's f32 output and
# residual moved element by element (a 4-byte access per element: half of each 32-byte sector a
# warp touched per instruction); now as one 8-byte float2 per column pair. ResNet-50's TF32
# residual 1x1 convolution (100352 x 64 -> 256): 240 loads and 128 stores a thread a tile ->
# 128 and 64 (SASS). Expected: ResNet-50 f32 at batch 32 faster where its products are bound by
# memory (the 1x1 convolutions), by up to ~1/3 of their epilogues' time.
#   1. f32 graphs --check: 3xTF32 (the default precision) and TF32 (--precision high), the
#      rule's form and the tail epilogue; memcheck on two.
#   2. The stem's prologue changes (fifty-eighth session) checked and timed.
#   3. ResNet-50 f32 (TF32) at batch 32: every kernel, programmatic launches off, and the whole
#      forward against torch.compile with CUDA graphs (programmatic launches on); bf16 likewise.
#   4. LLaMA-style bf16 8x512, q/k/v grouped over N (TILEFUSE_GEMM_GROUP_N_ANY=1) or not.
# Usage: bash bench/experiments/tf32_epilogue_pairs.sh OUT_DIR
set -u
cd "$(dirname "$0")/../.."
OUT=${1:?output folder}
B=build-gpu/bundle
source bench/experiments/template_checks.sh
open_bundle tf32-pairs.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for m in tests/gemm/gemm_bias_f32.onnxtxt tests/gemm/gemm_3xtf32_b_transposed_residual_ragged_f32.onnxtxt \
         tests/gemm/gemm_3xtf32_small_m_splitk_bias_residual_f32.onnxtxt tests/gemm/gemm_3xtf32_splitk_bias_gelu_f32.onnxtxt \
         tests/gemm/gemm_grouped_qkv_3xtf32_bias_f32.onnxtxt tests/gemm/linear_nhwc_gelu_f32.onnxtxt; do
  check_forms "$m" "" "--precision high --gemm-form tail"
done
# The stem's prologue (fifty-eighth session: a vector holding the concat's cut a part of its own,
# the image's padded NHWC copy), its first GPU run, and the conv graphs beside it.
for m in tests/conv/residual_block_f32.onnxtxt tests/conv/conv_bn_relu_f32.onnxtxt tests/conv/stem_maxpool_f32.onnxtxt \
         tests/conv/layout_edges_ragged_f32.onnxtxt tests/gemm/gemm_conv_stem_constant_weight_f32.onnxtxt; do
  check_forms "$m" "--precision high"
done
for m in tests/conv/resnet_downsample_bf16.onnxtxt tests/conv/residual_block_bf16.onnxtxt tests/conv/conv_bias_relu_stride2_bf16.onnxtxt \
         tests/gemm/gemm_rotary_qk_attention_ragged_bf16.onnxtxt; do
  check_forms "$m" ""
done
stem=$(mktemp -d)/stem32.onnx
python3 bench/experiments/stem_model.py "$stem"
check_forms "$stem" "--precision high" "--precision highest"
for flags in "--precision high" "--precision highest"; do
  echo "stem32 $flags: $(bench_forms "$stem" "$flags")" | tee -a "$log"
done
memcheck tests/conv/residual_block_f32.onnxtxt --precision high
memcheck tests/gemm/gemm_3xtf32_b_transposed_residual_ragged_f32.onnxtxt
memcheck tests/conv/stem_maxpool_f32.onnxtxt --precision high
X=/tmp/tilefuse-python
export HF_HUB_OFFLINE=1 TILEFUSE_CACHE_DIR=${TILEFUSE_CACHE_DIR:-/tmp/tilefuse-cache}
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > "$OUT/ext.log" 2>&1 || tail "$OUT/ext.log"
TILEFUSE_PDL=0 PYTHONPATH="$X" timeout 150 python3 bench/experiments/graph_profile.py --model resnet50 --dtype f32 --shape 32 \
  --top 70 --first 80 --explain "$OUT/resnet50-f32-32-explain.json" > "$OUT/resnet50-f32-32-nopdl.txt" 2>&1
echo "== resnet50 f32 32, programmatic launches off: exit $?" | tee -a "$log"
grep -E "^== " "$OUT/resnet50-f32-32-nopdl.txt" | tee -a "$log"
PYTHONPATH="$X" timeout 200 python3 bench/experiments/graph_profile.py --model resnet50 --dtype f32 --shape 32 --peer \
  > "$OUT/resnet50-f32-32-peer.txt" 2>&1
echo "== resnet50 f32 32 with the peer: exit $?" | tee -a "$log"
grep -E "^== " "$OUT/resnet50-f32-32-peer.txt" | tee -a "$log"
PYTHONPATH="$X" timeout 200 python3 bench/experiments/graph_profile.py --model resnet50 --dtype bf16 --shape 32 --peer \
  > "$OUT/resnet50-bf16-32-peer.txt" 2>&1
echo "== resnet50 bf16 32 with the peer: exit $?" | tee -a "$log"
grep -E "^== " "$OUT/resnet50-bf16-32-peer.txt" | tee -a "$log"
# ResNet's 1x1 expansion as an f32 product (bound by writing its output) against cuBLAS's TF32.
PYTHONPATH="$X" timeout 150 python3 bench/tf32_gemm.py --cases conv1x1_bias_f32_100352x256x64,conv1x1_residual_f32_100352x256x64 \
  --peers tilefuse_tf32,eager_tf32,addmm_tf32 --repeats 20 --json "$OUT/tf32-gemm.json" > "$OUT/tf32-gemm.txt" 2>&1
echo "== tf32_gemm.py: exit $?" | tee -a "$log"
grep -v Warn "$OUT/tf32-gemm.txt" | tail -6 | tee -a "$log"
# LLaMA-style bf16 8x512, q, k and v as the rule has them (three kernels) and grouped over N.
for g in 0 1; do
  TILEFUSE_PDL=0 TILEFUSE_GEMM_GROUP_N_ANY=$g PYTHONPATH="$X" timeout 120 python3 bench/experiments/graph_profile.py --model llama \
    --dtype bf16 --shape 8x512 --top 20 > "$OUT/llama-8x512-nopdl-grouped$g.txt" 2>&1
  echo "== llama 8x512, programmatic launches off, TILEFUSE_GEMM_GROUP_N_ANY=$g: exit $?" | tee -a "$log"
  grep -E "^== " "$OUT/llama-8x512-nopdl-grouped$g.txt" | tee -a "$log"
done

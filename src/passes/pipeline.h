// The frontend pass pipeline, in the order of DESIGN.md:
//   verify → infer → [FP8 products] → fold constants → CSE → DCE → decompose composites
//   → attention gradients as matmuls and pointwise ops → window ops
//   (conv, pools) as window views, matmuls and reductions → [channels-last: sink transposes]
//   → (fold constants, CSE, DCE) → unshare input reshapes, DCE → [channels-last: unshare window views, DCE]
// With a dump directory, the IR after every pass is written there as NN-<pass>.txt.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "passes/k_major_weights.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct PassOptions {
  std::string dump_dir;     // empty: no dumps
  bool decompose = true;    // false keeps composite and window ops (for `print`)
  // f32 Conv stays a Conv node (passes/window_ops.h): for the CPU backend, which runs it
  // through oneDNN with the ops after it as post-ops. Off: every Conv becomes a window view
  // and a matmul (the CUDA backend, and `explain` for a GPU). f32 MaxPool and AveragePool
  // likewise stay pool nodes (oneDNN pooling, backend/cpu/onednn_pool.h).
  bool library_conv = false;
  // Convolutions and pools in their channels-last forms (WindowOpsOptions::channels_last),
  // the transposes between them then cancelled by passes/sink_transposes: for the CUDA
  // backend (on by default there; TILEFUSE_CHANNELS_LAST=0 turns it off).
  bool channels_last = false;
  // With channels_last: a product's columns transposed into heads start a layout of
  // passes/sink_transposes too (rotary embeddings then compute in the product's layout, in its
  // epilogue). The CUDA backend takes it only under TILEFUSE_ROTARY_EPILOGUES=1 (slower
  // end to end at batch 1, measured: api/backend_setup.cc).
  bool heads_layout = true;
  // Constant right operands of products stored K-major (passes/k_major_weights.h): for the
  // CUDA backend, f32 ones, whose GEMM template (TF32 and 3xTF32) reads them K-major only,
  // and half-precision ones whose N rows are not 16-byte aligned.
  KMajorWeightsOptions k_major_weights;
  // Products whose constant right operand still has unaligned rows are padded
  // (passes/pad_gemm_columns.h): for the CUDA backend, whose GEMM paths need 16-byte aligned
  // rows to run at speed.
  bool pad_gemm_columns = false;
  // Large products whose K rows are not 16-byte aligned get K padded with zeros
  // (passes/pad_gemm_depth.h): for the CUDA backend, as pad_gemm_columns.
  bool pad_gemm_depth = false;
  // Zero columns appended to a product move into it (passes/column_padding_into_products.h):
  // for the CUDA backend, where the torch.compile frontend pads unaligned logits.
  bool column_padding_into_products = false;
  // Products of dequantized 8-bit floats run as FP8 products, their scales after
  // (passes/fp8_products.h): for the CUDA backend, whose GEMM template takes them.
  bool fp8_products = false;
  // And products with block scales as block_scaled_matmul (the GEMM template scaling each K
  // step), else they compute as written (the CUDA backend's default: on;
  // TILEFUSE_FP8_BLOCK_SCALES=0 switches it off).
  bool fp8_block_scales = false;
  // And symmetric int8 products on the int8 tensor cores (the CUDA backend's default: on;
  // TILEFUSE_INT8_PRODUCTS=0 switches it off), else they compute dequantized.
  bool int8_products = false;
  // The CUDA backend lowers attention_grad_* the attention backward template takes (bf16/f16,
  // head dim 64 or 128, d == dv) to it; the rest are rewritten (passes/attention_grads.h).
  bool keep_attention_grads = false;
};

// Each pass's wall milliseconds, in the order run (a pass run twice appears twice).
using PassTimes = std::vector<std::pair<std::string, double>>;

StatusOr<Graph> RunGraphPasses(Graph graph, const PassOptions& options, PassTimes* times = nullptr);

}  // namespace tilefuse

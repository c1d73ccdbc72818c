// Convolution and pooling as the primitives the planner fuses: a window view (im2col as
// index arithmetic, no copy until a kernel materialises it) feeding a matmul or a
// reduction, so that both backends compile them with the templates they already have and
// the ops around them (bias, folded batch norm, activations, residual adds) fuse as the
// matmul's epilogue or into the reduction's kernel.
//
//   conv            window(x, 0) [N, C, out..., k...] → transpose to [N, g, C/g·k, out]
//                   → matmul(w as [g, Co/g, C/g·k], ·) → [N, Co, out...] (+ bias)
//   conv, one input channel per group (depthwise)
//                   Σ_k window_k(x) · w[:, k]: a matmul with M = Co/g would waste the
//                   tensor cores and BLAS alike
//   max_pool        max_k window_k(x, lowest)
//   average_pool    Σ_k window_k(x) / count, the count per output position as ONNX
//                   defines it (with or without the padding)
//
// window_k is tap k of the window (a slice: the input at o·stride + k·dilation − pad). Up to
// 49 taps (7×7) the taps are combined one by one as pointwise ops — one pointwise kernel
// whose loads are affine along an output row; larger windows reduce the window's kernel
// axes as a row reduction instead.
//
// 1×1 convolutions with unit strides and no padding read x through a reshape alone.
// With `channels_last`, 2-D convolutions, depthwise convolutions and pools take their NHWC
// forms instead (passes/window_ops_nhwc.h).
// Half-precision windows are reduced in f32 and the result cast back, as the matmul
// accumulates. The new nodes keep the op's name.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct WindowOpsOptions {
  // f32 Conv (1-3 spatial dims) stays a Conv node for a backend that runs it through its
  // convolution library with the ops after it as post-ops (the CPU's oneDNN,
  // backend/cpu/onednn_conv.h); other dtypes are rewritten as always.
  bool keep_f32_conv = false;
  // f32 MaxPool and AveragePool (1-3 spatial dims, every pad smaller than the window's
  // extent) likewise stay pool nodes for the CPU's oneDNN pooling (backend/cpu/onednn_pool.h).
  bool keep_f32_pool = false;
  // 2-D convolutions of group 1, depthwise convolutions and pools of at most 49 taps read
  // and write NHWC through explicit transposes (passes/window_ops_nhwc.h), for the GPU,
  // where the product [N·OH·OW, KH·KW·C] × [KH·KW·C, Co] is one plain GEMM at any batch.
  // Grouped (non-depthwise), 1-D and 3-D convolutions keep the NCHW form.
  bool channels_last = false;
};

// Whether `options` leave `node` (a Conv) as it is.
bool KeepsConv(const Node& node, const WindowOpsOptions& options);

// Whether `options` leave `node` (a MaxPool or AveragePool) as it is.
bool KeepsPool(const Node& node, const WindowOpsOptions& options);

StatusOr<Graph> RewriteWindowOps(const Graph& graph, const WindowOpsOptions& options = {});

}  // namespace tilefuse

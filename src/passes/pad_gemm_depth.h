// Pads a large product's reduction dimension K to a whole number of 16 bytes when its rows
// are not: matmul(a[..., M, K], b[..., K, N]) becomes matmul(a', b') with K' the next multiple
// and a' (b') a's columns (b's rows) followed by zeros, which add nothing to the product.
//
// A K-major operand whose rows are not 16-byte aligned is one neither TMA (the GEMM template)
// nor cuBLASLt's fast kernels read: GPT-2's LM-head gradient dlogits[4096, 50257] ·
// W[50257, 768] ran on cuBLASLt's kernel for unaligned rows in 2.39 ms of a 34 ms training step;
// padded, the prologues write a' and b' (~0.3 ms) and the GEMM template takes the aligned
// product (1.1 ms; H200, 2026-11-30). For the CUDA backend; only products of at least
// kMinPaddedDepthMacs multiply-adds, where the copies pay for themselves, or a convolution's
// im2col times a constant weight at any size (its gather writes the zeros: no copy of its own).
//
// Likewise a left operand given transposed (MN-major: a weight gradient's dyᵀ·x) whose
// source rows are not aligned: matmul(transpose(y[..., K, M]), x) becomes
// slice(matmul(transpose(y'), x), M rows) with y' y's rows padded with zeros to whole 16-byte
// units. Padded once, a value feeds every product that pads it the same way: GPT-2's
// dlogits[4096, 50257] is padded once for dH = dlogits·W and dW = dlogitsᵀ·H, where the
// weight gradient's product before took its own transposed copy (a prologue of 824 MB
// moved).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

inline constexpr int64_t kMinPaddedDepthMacs = int64_t{1} << 30;

StatusOr<Graph> PadGemmDepth(const Graph& graph);

}  // namespace tilefuse

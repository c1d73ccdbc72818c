// Pads a product's constant right operand to a column count whose rows are 16-byte aligned,
// and slices the padding off the product: matmul(a, b[K, N]) becomes
// slice(matmul(a, b'[K, N']), N) with N' the next multiple of 16 bytes' worth of elements.
//
// A vocabulary of 50257 (GPT-2) leaves every row of the LM head's weight and of its output
// at an odd address: cuBLASLt then runs a kernel for unaligned rows, 2499 µs for GPT-2's
// 4096×768×50257 product against 456 µs for the padded one on an H200 (2026-11-29,
// bench/lm_head_layouts.py). The slice is a view its consumer reads, or one copy where the
// product is a graph output (~0.2 ms for that 411 MB). For the CUDA backend; only products
// of at least kMinPaddedColumns columns (the copy must pay for itself). Half-precision
// operands whose K rows are aligned are stored K-major instead, before this pass
// (passes/k_major_weights.h: the GEMM template then needs neither padding nor the copy);
// what is left here are f32 products, padded here, then stored K-major for the template.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

inline constexpr int64_t kMinPaddedColumns = 1024;

StatusOr<Graph> PadGemmColumns(const Graph& graph);

}  // namespace tilefuse

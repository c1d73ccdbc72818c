// Stores a product's constant right operand K-major: matmul(a, w[K, N]) becomes
// matmul(a, transpose(w'[N, K])) with w' = wᵀ computed once here. The GEMM template then reads
// B from w' (GemmTemplateKernel::b_k_major), the transpose inlined where it is read.
//
// Three products take it (for the CUDA backend, after the last folding of constants, which
// would fold the transpose back):
//   - f32 products: TF32 tensor cores (wgmma .tf32), which the template's TF32 and 3xTF32
//     forms run on, read both operands K-major only, as a linear layer's weight is before the folding of constants
//     turned it into [K][N] (N rows aligned: an unaligned one is padded first, so this runs
//     after passes/pad_gemm_columns.h for them);
//   - half-precision products whose N rows are not 16-byte aligned (a vocabulary of 50257):
//     TMA cannot read [K][N] rows 50257 elements apart, but reads [N][K] rows of K, and the
//     template stores such an output without TMA. This replaces the padding of
//     passes/pad_gemm_columns.h for them, and the copy that dropped the padding;
//   - products of 8-bit floats: FP8 tensor cores (wgmma .e4m3/.e5m2) read both operands
//     K-major only, as TF32 ones.
// K must be a whole number of 16-byte units either way.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct KMajorWeightsOptions {
  bool f32 = false;             // f32 products (the TF32 tensor cores)
  bool unaligned_half = false;  // bf16 and f16 products whose N rows are not 16-byte aligned
  bool eight_bit = false;       // products of 8-bit floats and of int8 (passes/fp8_products.h): their tensor cores read K-major only
};

StatusOr<Graph> StoreWeightsKMajor(const Graph& graph, const KMajorWeightsOptions& options);

// Whether a product whose right operand is a [K][N] constant of `dtype` and shape `kn` is one
// `options` stores K-major (its K rows whole 16-byte units, and the product one `options`
// names). The folding of constants keeps a transpose of an [N][K] constant that such a product
// reads (FoldConstantsOptions): it is that K-major form already.
bool StoresKMajor(DType dtype, const Shape& kn, const KMajorWeightsOptions& options);

}  // namespace tilefuse

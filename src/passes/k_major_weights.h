// Stores an f32 product's constant right operand K-major: matmul(a, w[K, N]) becomes
// matmul(a, transpose(w'[N, K])) with w' = wᵀ computed once here.
//
// TF32 tensor cores (wgmma .tf32) read both operands K-major only: the GEMM template can
// take an f32 product as TF32 (--precision high) where B is a [N][K] value its prologue
// merely transposes (GemmTemplateKernel::b_k_major), as a linear layer's weight is before
// the folding of constants turned it into [K][N]. For the CUDA backend under TF32, after
// the last folding of constants (which would fold the transpose back).
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

StatusOr<Graph> StoreF32WeightsKMajor(const Graph& graph);

}  // namespace tilefuse

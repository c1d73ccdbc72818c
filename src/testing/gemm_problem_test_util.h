// Test helper: a GEMM template problem as LowerGemmTemplate hands over a linear layer's
// product x · wᵀ, its tiles' problem only (no epilogue): what the layouts, the rules and the
// grouping of products see.
#pragma once

#include <cstdint>

#include "codegen/gemm_template.h"

namespace tilefuse {

// Product node `product` of `rows` × k (A node 0) by the [n][k] weight node `weight`.
inline GemmTemplateKernel LinearProblem(int product, int weight, int64_t rows, int64_t n, int64_t k) {
  GemmTemplateKernel g;
  g.product = product;
  g.a = 0;
  g.b = weight + 100;
  g.b_k_major = weight;
  g.b_read_only = true;
  g.rows = rows;
  g.n = n;
  g.k = k;
  g.outputs = {product};
  return g;
}

}  // namespace tilefuse

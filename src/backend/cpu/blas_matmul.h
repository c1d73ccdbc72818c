// Matrix products on the CPU through OpenBLAS: [..., M, K] x [..., K, N] with numpy
// broadcasting of the batch dims. f32 and f64 go straight to sgemm/dgemm; other
// dtypes are computed in f64 and the result rounded to the output dtype.
#pragma once

#include "tilefuse/graph.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// `matmul` is the node (its shape and dtype define the output); `a` and `b` hold its
// operands with the shapes of its two input nodes. Writes every element of `out`,
// which holds NumElements(matmul.shape) values of matmul.dtype.
void BlasMatmul(const Node& matmul, const Tensor& a, const Tensor& b, void* out);

}  // namespace tilefuse

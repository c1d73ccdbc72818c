// Matrix products on the CPU through a BLAS library: [..., M, K] x [..., K, N] with numpy
// broadcasting of the batch dims. f32 goes to oneDNN's dnnl_sgemm (or OpenBLAS's sgemm when
// built with TILEFUSE_CPU_GEMM=openblas; the choice and its measurement: docs/design-notes.md),
// f64 to OpenBLAS's dgemm, both on the operands' own memory; other dtypes are computed in f64
// and the result rounded to the output dtype.
#pragma once

#include "tilefuse/graph.h"

namespace tilefuse {

// `matmul` is a node of `graph` (its shape and dtype define the output); `a` and `b`
// point at its operands, row-major with the shapes and the dtype of its two input nodes
// (graph inputs, constants and arena values alike: nothing is copied). Writes every
// element of `out`, which holds NumElements(matmul.shape) values of matmul.dtype.
void BlasMatmul(const Graph& graph, const Node& matmul, const void* a, const void* b, void* out);

}  // namespace tilefuse

// Which fused epilogue of a matrix library (cuBLASLt: a bias per column, ReLU, tanh GELU,
// or a bias and either) a gemm group's epilogue is — found by what its scalar program
// computes, not by the ops that spell it: the program is evaluated on probe values of the
// accumulator and the bias, and each candidate must agree everywhere (ONNX's erf GELU, a
// residual, a scale or a second output match none). The library then writes the group's
// output in one call, with no epilogue kernel and no product round trip through memory.
#pragma once

#include <string>

#include "codegen/gemm_template.h"

namespace tilefuse {

enum class LibraryActivation { kNone, kRelu, kGeluTanh };

struct LibraryEpilogue {
  int bias = -1;  // the graph value of N elements added to each column, or -1
  LibraryActivation activation = LibraryActivation::kNone;
  int output = -1;  // the group's one output, of the product's dtype
};

// "bias + gelu_tanh", "relu", "none".
std::string DescribeLibraryEpilogue(const LibraryEpilogue& epilogue);

// The library epilogue `gemm`'s epilogue equals, or why none does (Unimplemented).
StatusOr<LibraryEpilogue> MatchLibraryEpilogue(const GemmTemplateKernel& gemm);

}  // namespace tilefuse

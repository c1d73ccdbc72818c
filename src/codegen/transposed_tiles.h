// Which pointwise kernels read a large operand transposed relative to the output they write,
// and along which dims: the analysis behind the CUDA tiled-transpose template
// (codegen/cuda/cuda_transposed_emitter.h).
//
// A pointwise kernel iterates over its output's flat offset i0 and reads every operand at an
// index expression of i0. Relu + transpose of an NHWC value into an NCHW output reads
//   b0[((n * H + h) * W + w) * C + c]  at  i0 = ((n * C + c) * H + h) * W + w,
// so consecutive outputs (w, w + 1) are C elements apart in b0: a warp's loads touch a sector
// per element. Tiled, a block stages a (w, c) tile through shared memory: read along c, where
// the load is contiguous, written along w, where the store is.
//
// The analysis needs the output's dims, which the Kernel does not carry. It recovers them from
// the indices themselves: every (i0 / s) % m that lowering's unravelling leaves behind cuts i0
// at s and s·m; the cuts, nested, are the finest dims all indices agree on. Adjacent dims that
// every affine load also reads adjacently are merged (h and w above: one dim of H·W), so the
// tile spans whole planes where it can. With i0 written as Σ x_k · stride_k, each affine load
// has a coefficient per dim; a load is transposed when the output's innermost dim moves it
// by more than one element while another dim moves it by exactly one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel.h"

namespace tilefuse {

// Coordinate k of the output is loop variable kCoordinateVar + k in the indices the analysis
// rewrites (0 and 1 stay i0 and i1).
inline constexpr int kCoordinateVar = 2;

// A load staged through shared memory: its index is offset + Σ coefficients[k] · x_k.
struct StagedLoad {
  int value = -1;
  std::vector<int64_t> coefficients;  // per dim of TransposedTiling::dims
  int64_t offset = 0;
};

struct TransposedTiling {
  std::vector<int64_t> dims;     // the output's coordinates, outermost first; the last one is contiguous in the output
  // What each of `dims` is in the model's symbols, where the indices' constants say (the
  // cuts' sizes); SymExpr::Constant(dim) elsewhere. Each stands for its dim at the binding.
  std::vector<SymExpr> dim_sizes;
  int across = -1;               // the dim the staged loads read contiguously (coefficient 1)
  std::vector<StagedLoad> loads; // largest first
  std::string why_not;        // empty when the kernel takes the tiled form
  bool tiled() const { return why_not.empty(); }
  int inner() const { return static_cast<int>(dims.size()) - 1; }
};

// The tiling of `kernel` (pointwise: no reductions, inner 1), or why_not saying why none.
TransposedTiling FindTransposedTiling(const Kernel& kernel);

// i0 as Σ x_k · stride_k over `dims` (x_k = IndexVar(first_var + k, dims[k])), the strides
// over `sizes` where given (the dims in the model's symbols).
Index FlatFromCoordinates(const std::vector<int64_t>& dims, int first_var = kCoordinateVar, const std::vector<SymExpr>* sizes = nullptr);

// The dims loop variable `var` (over [0, extent)) splits into, outermost first: every
// (var / s) % m of the kernel's indices cuts it at s and s·m, and the cuts, nested, are the
// finest dims all indices agree on; empty when they do not nest (one index splits by 6,
// another by 4). `sizes` (where given): each dim in the model's symbols, from the sizes of
// the constants that cut it and `extent_size` (constants where they have none or disagree).
std::vector<int64_t> DimsFromCuts(const Kernel& kernel, int var, int64_t extent, const SymExpr& extent_size = {},
                                  std::vector<SymExpr>* sizes = nullptr);

// The coefficient of each of `num_dims` coordinates (variables kCoordinateVar + d) in `index`
// and its offset, when it is affine in them; false otherwise (a clamp, a gathered value,
// another variable, a remainder that cuts across a dim).
bool CoordinateCoefficients(const Index& index, size_t num_dims, std::vector<int64_t>* coefficients, int64_t* offset);

// `index` with i0 written in coordinates: the simplifier then folds most of the unravelling's
// divisions and remainders into the coordinates themselves (not those of merged dims).
Index InCoordinates(const Index& index, const std::vector<int64_t>& dims, const std::vector<SymExpr>* sizes = nullptr);

// offset + Σ coefficients[k] · x_k.
Index AffineInCoordinates(const std::vector<int64_t>& dims, const std::vector<int64_t>& coefficients, int64_t offset);

}  // namespace tilefuse

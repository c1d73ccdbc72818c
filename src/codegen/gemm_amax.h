// The amax of a product's output computed in the product's kernel: FP8 scaling reads the
// largest magnitude of a tensor, ReduceMax(Abs(u)) over every element of u, to choose the next
// step's scale (delayed scaling, cuBLASLt's AMAX_D). Planned apart, that reduction is a kernel
// of its own that reads u back from memory, and u (an f32 or 16-bit value the product's
// epilogue quantizes) is written only to be read there. Folded (backend/cuda/cuda_amax_fold.h),
// the GEMM template's epilogue takes |u| of each element as it computes it, u is not written
// where nothing else reads it, and the reduction keeps no kernel (GemmAmax says how).
#pragma once

#include <optional>
#include <vector>

#include "codegen/gemm_template.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// The amax whose output is node `output`: ReduceMax(Abs(u)) over every element of u, up to
// reshapes and exact float casts (to a type holding every value of the one before: f32 from
// any float, a 16-bit float from an 8-bit one) before and after the Abs and after the
// ReduceMax. Every op of it after u must be in `member`; u a float value (not FNUZ), in
// `member` or not.
struct AmaxMatch {
  int value = -1;        // u
  int output = -1;       // the amax
  std::vector<int> ops;  // the amax's own ops, from u's reader to `output`, ascending
};
std::optional<AmaxMatch> MatchAmax(const Graph& graph, int output, const std::vector<bool>& member);

// Why the amax of `value` cannot be computed in `gemm`'s epilogue, or OK: one product (not
// grouped over N, not gated, not a gate), `value` one of its epilogue's stores, of the
// product's every element.
Status AmaxFoldable(const GemmTemplateKernel& gemm, int value);
// `gemm` computing `amax` in its epilogue; `keep_stored`: u is still written (another group
// reads it, or it is a graph output); else its store is dropped. Needs AmaxFoldable.
GemmTemplateKernel FoldAmax(GemmTemplateKernel gemm, const AmaxMatch& amax, DType amax_dtype, bool keep_stored);

}  // namespace tilefuse

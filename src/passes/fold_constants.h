// Constant folding.
#pragma once

#include <cstdint>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Above this many elements, an expansion (a result larger than all its inputs
// together: broadcast, iota, an outer product) stays an op: it is cheap to recompute
// inside a fused kernel and costly to store as a constant.
inline constexpr int64_t kMaxFoldedExpansionElements = int64_t{1} << 20;

// Evaluates, with the reference interpreter, every non-source node whose inputs are
// all constants (after folding its producers) and replaces it by a constant of the
// same name. random_uniform is never folded: its values belong to the run (and the
// backends generate them in place). Fails only when the interpreter fails on a node.
StatusOr<Graph> FoldConstants(const Graph& graph);

}  // namespace tilefuse

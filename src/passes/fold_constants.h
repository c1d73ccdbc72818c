// Constant folding.
#pragma once

#include <cstdint>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Above this many elements, an expansion (a result larger than all its inputs
// together: iota, an outer product) stays an op: it is cheap to recompute inside a
// fused kernel and costly to store as a constant.
inline constexpr int64_t kMaxFoldedExpansionElements = int64_t{1} << 20;

// Evaluates, with the reference interpreter, every non-source node whose inputs are
// all constants (after folding its producers) and replaces it by a constant of the
// same name. Three exceptions keep the graph cheap to fuse:
//  - a broadcast of a constant stays a broadcast (a stride-0 load in a kernel, where a
//    folded copy would be a full-size buffer), and a node reading it sees its value;
//  - a pointwise op over broadcast single values ("splats") folds to a splat again:
//    broadcast(op(a, b)) instead of a full-size constant;
//  - random_uniform is never folded: its values belong to the run.
// Fails only when the interpreter fails on a node.
StatusOr<Graph> FoldConstants(const Graph& graph);

}  // namespace tilefuse

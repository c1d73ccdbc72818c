// Constant folding.
#pragma once

#include <cstdint>

#include "passes/k_major_weights.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Above this many elements, an expansion (a result larger than all its inputs
// together: iota, an outer product) stays an op: it is cheap to recompute inside a
// fused kernel and costly to store as a constant.
inline constexpr int64_t kMaxFoldedExpansionElements = int64_t{1} << 20;
// Iotas of more elements stay generators (fold_constants.cc, IsLargeExpansion).
inline constexpr int64_t kMaxFoldedIotaElements = int64_t{1} << 12;

// Evaluates, with the reference interpreter, every non-source node whose inputs are
// all constants (after folding its producers) and replaces it by a constant of the
// same name. Three exceptions keep the graph cheap to fuse:
//  - a broadcast of a constant stays a broadcast (a stride-0 load in a kernel, where a
//    folded copy would be a full-size buffer), and a node reading it sees its value;
//  - a pointwise op over broadcast single values ("splats") folds to a splat again:
//    broadcast(op(a, b)) instead of a full-size constant;
//  - random_uniform is never folded: its values belong to the run.
// Fails only when the interpreter fails on a node.
//
// With `options.k_major`, a transpose of a 2-D constant [N][K] that only products read as
// their right operand stays an op where StoreWeightsKMajor would store those products'
// weights K-major: it is that form already, and folding it would transpose the weight twice
// (38.6 M elements each way for GPT-2's LM head through the torch frontend).
struct FoldConstantsOptions {
  KMajorWeightsOptions k_major;
};
StatusOr<Graph> FoldConstants(const Graph& graph, const FoldConstantsOptions& options = {});

}  // namespace tilefuse

// Finds attention written from primitives — matmul(Q, Kᵀ) → scale/mask/bias →
// softmax over the last axis → matmul(·, V) — and claims its nodes as one attention
// group (flash-attention style later: no N×N tensor in memory). Runs before priority
// fusion because the pattern's intermediate steps (gemm + softmax) are not groups any
// template accepts on their own.
#pragma once

#include <vector>

#include "tilefuse/graph.h"

namespace tilefuse {

// Head dims above this do not fit the attention template's registers/shared memory.
inline constexpr int64_t kMaxAttentionHeadDim = 256;

// Each returned group lists member node ids ascending; no node is in two groups.
std::vector<std::vector<int>> FindAttentionGroups(const Graph& graph);

}  // namespace tilefuse

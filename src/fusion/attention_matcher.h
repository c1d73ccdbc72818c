// Finds attention written from primitives — matmul(Q, Kᵀ) → scale/mask/bias →
// softmax over the last axis → matmul(·, V) — and claims its nodes as one attention
// group (flash-attention style later: no N×N tensor in memory). Runs before priority
// fusion because the pattern's intermediate steps (gemm + softmax) are not groups any
// template accepts on their own.
#pragma once

#include <string>
#include <vector>

#include "tilefuse/graph.h"

namespace tilefuse {

// Head dims above this do not fit the attention template's registers/shared memory.
inline constexpr int64_t kMaxAttentionHeadDim = 256;

// A matmul that reads a softmax's output (exp and a row sum behind it) but was not
// matched as attention, and why: `tilefuse explain` reports each.
struct MissedAttention {
  int matmul = -1;
  std::string reason;
};

// Each returned group lists member node ids ascending; no node is in two groups.
std::vector<std::vector<int>> FindAttentionGroups(const Graph& graph, std::vector<MissedAttention>* missed = nullptr);

}  // namespace tilefuse

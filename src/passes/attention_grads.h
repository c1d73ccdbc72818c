// Attention's gradients (attention_grad_q, _k, _v) rewritten into primitives, for the
// backends and shapes no attention backward template takes:
//
//   k, v   repeated over each group of query heads (grouped-query attention)
//   P      = exp(matmul(q, kᵀ)·scale − lse), 0 where causal hides the key (iota compare)
//   dS     = P·(matmul(dout, vᵀ) − reduce_sum(dout·out, last axis))
//   dQ     = matmul(dS, k)·scale
//   dK     = matmul(dSᵀ, q)·scale, summed over the group
//   dV     = matmul(Pᵀ, dout), summed over the group
//
// Each node is rewritten on its own; the pipeline's CSE then merges the P and dS the three
// share. Half-precision operands are computed in f32 and the result cast back. The new
// nodes keep the op's name.
#pragma once

#include <functional>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Nodes for which `keep` returns true stay as they are (a backend that lowers them itself).
StatusOr<Graph> RewriteAttentionGrads(const Graph& graph, const std::function<bool(const Graph&, const Node&)>& keep = {});

}  // namespace tilefuse

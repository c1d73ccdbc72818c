// Classifies a candidate set of nodes as one fusion group: which code template would
// run it (GroupKind), or why no template can (a FusionDecision with the reason).
// This is where "compatible iteration spaces" and template limits live; convexity is
// the planner's job (it needs the whole grouping).
#pragma once

#include <vector>

#include "fusion/fusion_decision.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// Largest group the templates accept; keeps planning linear on huge graphs as well.
inline constexpr int kMaxGroupNodes = 512;

struct GroupClassification {
  GroupKind kind = GroupKind::kPointwise;
  FusionDecision decision = FusionDecision::Allow();
};

// `members` ascending, non-empty, no sources. Attention groups are made by the
// attention matcher, never by this function: two matmuls here are rejected. With
// `conv_anchors` (TargetCapabilities::AnchorsConvolution) an f32 Conv anchors a gemm group
// as a matmul does; without, it is opaque.
GroupClassification ClassifyGroup(const Graph& graph, const std::vector<int>& members, bool conv_anchors = false);

// Whether `n` is a Conv that anchors a gemm group when the target allows it.
bool IsConvAnchor(const Node& n);

// Nodes computed from constants and iotas alone (broadcast scalars, causal masks built
// from iota comparisons), except graph outputs. Like constants they belong to no group:
// every kernel that reads one recomputes it inline, which costs no memory traffic.
std::vector<bool> FindInlinedGenerators(const Graph& graph);

// The iteration space of a reduction over trailing axes: rows × row length. Returns
// false when the reduced axes are not a trailing run of dims.
bool TrailingReductionSpace(const Graph& graph, const Node& reduction, int64_t* rows, int64_t* row_length);

}  // namespace tilefuse

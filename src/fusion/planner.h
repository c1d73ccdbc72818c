// The fusion planner: classify ops, claim attention patterns, then priority fusion
// (XLA style): repeatedly merge the legal producer→consumer pair of groups with the
// largest predicted saving, time(P) + time(C) − time(P∪C), until none saves anything.
// Deterministic: ties break on the smallest node ids. Every merge that was possible
// structurally but not taken keeps its reason for `tilefuse explain`.
#pragma once

#include <set>
#include <string>

#include "fusion/fusion_plan.h"
#include "fusion/target_capabilities.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct PlannerOptions {
  std::string device = "h100-sxm";
  // What the backend's kernels fuse (none: every template fuses its whole group); the
  // cost model charges what they do not.
  const TargetCapabilities* target = nullptr;
  bool fuse = true;                   // false: every op its own group (views folded)
  std::set<GroupKind> disabled_kinds; // --disable-fusion=KIND
  // Attention candidates holding any of these nodes are not claimed: a backend's attention
  // template refused them, and their parts (gemm, softmax, gemm) are planned instead.
  std::set<int> no_attention_at;
};

// The graph must be decomposed (no composite ops): run RunGraphPasses first.
StatusOr<FusionPlan> PlanFusion(const Graph& graph, const PlannerOptions& options);

// "pointwise", "row_reduction", ... → kind; false when unknown.
bool ParseGroupKind(std::string_view name, GroupKind* kind);

}  // namespace tilefuse

// The autotuner's fallback rule (issue 6): the cost model can be wrong, measurements
// are not. When a fused group measures more than 10% slower than its ops run unfused,
// the plan runs those ops unfused instead, and `explain` shows the times and the
// decision.
//
//   fused plan      [ g0: a b c ]        [ g1: d e ]
//   unfused plan    [u0: a] [u1: b c]    [u2: d] [u3: e]     (views fold into consumers)
//   decision        g0 measured 25 us > 1.10 x (u0 + u1 = 10 us) → use u0, u1
//   applied plan    [0: a] [1: b c]      [2: d e]
//
// Both plans come from PlanFusion on the same graph (PlannerOptions.fuse true / false).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// One measured group of a plan (its FusionGroup::id).
struct GroupTiming {
  int group = -1;
  double time_us = 0;
};

struct FallbackDecision {
  int fused_group = -1;
  std::vector<int> unfused_groups;  // ids in the unfused plan, ascending (a topological order)
  double fused_us = 0;              // NaN when not measured
  double unfused_us = 0;            // sum over unfused_groups; NaN when any is not measured
  bool use_unfused = false;
  std::string reason;               // "kept fused: 1.80x faster than unfused", ...
};

// One decision per group of `fused`, in its order. Each unfused group must lie inside
// exactly one fused group (Internal otherwise); timings must name existing groups once,
// with finite non-negative times (InvalidArgument otherwise). A group without its
// measurements, or one that is a single unfused kernel already, stays fused.
// Falls back when fused_us > slower_factor × unfused_us (exactly at the factor stays).
StatusOr<std::vector<FallbackDecision>> DecideFallbacks(const Graph& graph, const FusionPlan& fused,
                                                        const FusionPlan& unfused,
                                                        const std::vector<GroupTiming>& fused_times,
                                                        const std::vector<GroupTiming>& unfused_times,
                                                        double slower_factor = 1.10);

// `fused` with each group whose decision says use_unfused replaced, at its place, by its
// unfused groups: group ids renumbered consecutively in the new order, group_of and
// predicted_us updated, rejected merges of the surviving groups renumbered (those of a
// replaced group no longer apply and are dropped), and each producer→consumer edge
// between the new groups recorded as a rejected merge carrying the decision's reason.
// The result passes VerifyPlan (checked: Internal otherwise).
StatusOr<FusionPlan> ApplyFallbacks(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused,
                                    const std::vector<FallbackDecision>& decisions);

// For explain: one line (text) or object (JSON) per fused group with its measured time,
// the unfused groups' time and the decision.
std::string DescribeFallbacks(const std::vector<FallbackDecision>& decisions);
nlohmann::json FallbacksToJson(const std::vector<FallbackDecision>& decisions);

}  // namespace tilefuse

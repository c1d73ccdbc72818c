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
// Both plans come from PlanFusion on the same graph (PlannerOptions.fuse true / false);
// tune/plan_pairing.h says how their groups relate when a view is shared.
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
  std::vector<int> unfused_groups;  // unfused groups with a node in this group, ascending
  double fused_us = 0;              // NaN when not measured
  double unfused_us = 0;            // sum over the unfused groups timed with this one (plan_pairing.h);
                                    // NaN when any is not measured
  bool use_unfused = false;
  std::string reason;               // "kept fused: 1.80x faster than unfused", ...
};

// One decision per group of `fused`, in its order. An unfused kernel whose views fusion
// put in another group counts for the group that holds its last op (plan_pairing.h).
// Timings must name existing groups once, with finite non-negative times
// (InvalidArgument otherwise); plans that do not partition the same nodes are Internal.
// A group without its measurements, or one that is a single unfused kernel already,
// stays fused. Falls back when fused_us > slower_factor × unfused_us (exactly at the
// factor stays fused).
StatusOr<std::vector<FallbackDecision>> DecideFallbacks(const Graph& graph, const FusionPlan& fused,
                                                        const FusionPlan& unfused,
                                                        const std::vector<GroupTiming>& fused_times,
                                                        const std::vector<GroupTiming>& unfused_times,
                                                        double slower_factor = 1.10);

// `fused` with each group whose decision says use_unfused replaced, at its place, by its
// part of each unfused group (the unfused group itself where it lies wholly inside; a
// shared view joins the piece computing its input when that piece can take it). Group
// ids renumbered consecutively, inputs/outputs, group_of and predicted_us updated, the
// surviving groups' rejected merges renumbered (a replaced group's are dropped), and each
// edge between the new pieces recorded as a rejected merge carrying the decision's
// reason, so `explain` shows it. The result passes VerifyPlan (checked).
StatusOr<FusionPlan> ApplyFallbacks(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused,
                                    const std::vector<FallbackDecision>& decisions);

// For explain: one line (text) or object (JSON) per fused group with its measured time,
// the unfused groups' time and the decision.
std::string DescribeFallbacks(const std::vector<FallbackDecision>& decisions);
nlohmann::json FallbacksToJson(const std::vector<FallbackDecision>& decisions);

}  // namespace tilefuse

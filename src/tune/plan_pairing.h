// How a fused plan's groups relate to the unfused plan's groups of the same graph, for
// the fallback rule (tune/fallback.h). Usually every unfused group lies inside one fused
// group, but not always: the unfused plan folds a view into its consumer while fusion
// may have put it with its producer (gpt2: a layer norm's output reshape sits in the
// layer-norm group, the unfused plan runs it inside the next matmul's kernel).
//
//   fused     [ G0: ... mul  reshape ]  [ G1: matmul  add ]
//   unfused   [ ... ] [ mul ] [ reshape  matmul ] [ add ]      ← one kernel across G0 and G1
//
// Views cost no time of their own (index arithmetic in a kernel's loads), so an unfused
// kernel's measured time counts for the fused group that holds its last op, the one
// the views fold into.
#pragma once

#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct PlanPairing {
  std::vector<std::vector<int>> touching;  // per fused group: unfused groups with a node in it, ascending
  std::vector<int> timed_with;             // per unfused group: the fused group of its last op
};

// Internal when the plans do not partition the same nodes of `graph` (ids must equal
// positions, as PlanFusion makes them).
StatusOr<PlanPairing> PairPlans(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused);

}  // namespace tilefuse

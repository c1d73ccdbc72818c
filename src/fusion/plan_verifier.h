// Checks a FusionPlan against its graph: every node but sources and inlined generators
// is in exactly one group,
// groups are listed in an order in which they can run (each group's inputs come from
// sources or earlier groups — which also proves the group graph acyclic, i.e. every
// group convex), inputs/outputs are right, and every non-attention group's kind is what
// the classifier says of its members.
#pragma once

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

Status VerifyPlan(const Graph& graph, const FusionPlan& plan);

}  // namespace tilefuse

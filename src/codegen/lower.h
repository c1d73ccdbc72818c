// Lowering: one fusion group → one Kernel. Views, broadcasts and inlined generators
// become index arithmetic and recomputation inside the kernel; only the group's
// inputs are loaded and only its outputs stored.
#pragma once

#include "codegen/kernel.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Pointwise, row_reduction and reduction groups. Unimplemented for the other kinds, and
// for shapes of reduction the loop template cannot express (the caller then runs the
// group's members one by one).
StatusOr<Kernel> LowerGroup(const Graph& graph, const FusionGroup& group, const std::vector<bool>& inlined);

}  // namespace tilefuse

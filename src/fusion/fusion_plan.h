// FusionPlan: the planner's output. Every node of the graph belongs to exactly one
// group, except sources (parameters, constants) and inlined generators (computed from
// constants and iotas alone), which the kernels reading them load or recompute. Each
// group becomes one kernel (or library call) in later stages.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tilefuse/graph.h"

namespace tilefuse {

enum class GroupKind : uint8_t {
  kPointwise,     // one flat iteration space of pointwise/broadcast/view ops
  kRowReduction,  // rows x row length: prologue, reductions over trailing axes, epilogue
  kReduction,     // reductions over other axes
  kGemm,          // one matmul with a light prologue and a pointwise epilogue
  kAttention,     // matmul -> scale/mask -> softmax -> matmul
  kOpaque,        // a library or reference kernel
};

std::string_view GroupKindName(GroupKind kind);

struct FusionGroup {
  int id = -1;
  GroupKind kind = GroupKind::kPointwise;
  std::vector<int> nodes;    // member node ids, ascending (a topological order)
  std::vector<int> inputs;   // non-member nodes read by members, ascending (incl. inlined generators)
  std::vector<int> outputs;  // members read outside the group or graph outputs
  double bytes = 0;          // bytes read (inputs) + written (outputs)
  double flops = 0;
  double predicted_us = 0;           // this group as one kernel
  double unfused_predicted_us = 0;   // its members each as their own kernel
  std::string cost_note;             // where the backend runs it as more than one kernel, how
};

struct RejectedMerge {
  int producer_group;
  int consumer_group;
  std::string reason;
};

struct FusionPlan {
  std::string device;
  std::vector<FusionGroup> groups;     // in topological order
  std::vector<int> group_of;           // node id -> group id, -1 for sources and inlined generators
  std::vector<RejectedMerge> rejected;
  // Matmuls reading a softmax that were not matched as attention: "matmul %41: <why>".
  std::vector<std::string> missed_attention;
  // What the backend said of the plan it compiles (attention groups it split into their parts,
  // and why; PlannedGraph::notes): kept with the plan, so a compile reusing it says the same.
  std::vector<std::string> backend_notes;
  int unfused_kernels = 0;             // kernels with every op on its own (views folded)
  double predicted_us = 0;
  double unfused_predicted_us = 0;
};

}  // namespace tilefuse

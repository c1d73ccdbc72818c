#include "fusion/plan_verifier.h"

#include <algorithm>
#include <fmt/format.h>

#include "fusion/group_classifier.h"

namespace tilefuse {

Status VerifyPlan(const Graph& graph, const FusionPlan& plan) {
  std::vector<bool> inlined = FindInlinedGenerators(graph);
  auto ungrouped = [&](int id) { return graph.node(id).info().kind == OpKind::Source || inlined[id]; };
  std::vector<int> seen(graph.num_nodes(), -1);
  for (const FusionGroup& group : plan.groups) {
    if (group.nodes.empty()) return Internal(fmt::format("group {} is empty", group.id));
    for (int id : group.nodes) {
      if (ungrouped(id)) return Internal(fmt::format("source or inlined generator %{} in group {}", id, group.id));
      if (seen[id] >= 0) return Internal(fmt::format("%{} is in groups {} and {}", id, seen[id], group.id));
      if (plan.group_of[id] != group.id) return Internal(fmt::format("group_of[%{}] disagrees", id));
      seen[id] = group.id;
    }
  }
  for (const Node& n : graph.nodes())
    if (!ungrouped(n.id) && seen[n.id] < 0) return Internal(fmt::format("%{} is in no group", n.id));
  // A generator is recomputed where it is read, so it may read only what is there before
  // every group: constants and other generators (the group order does not see through it).
  for (const Node& n : graph.nodes())
    if (inlined[n.id])
      for (int input : n.inputs)
        if (!inlined[input] && graph.node(input).op != OpCode::kConstant)
          return Internal(fmt::format("inlined generator %{} reads %{}, which a group computes", n.id, input));

  for (const FusionGroup& group : plan.groups) {
    for (int id : group.nodes)
      for (int input : graph.node(id).inputs) {
        int from = plan.group_of[input];
        if (from > group.id) return Internal(fmt::format("group {} reads %{} of later group {}", group.id, input, from));
        bool listed = std::binary_search(group.inputs.begin(), group.inputs.end(), input);
        if ((from != group.id) != listed) return Internal(fmt::format("group {} inputs list is wrong about %{}", group.id, input));
      }
    if (group.kind == GroupKind::kAttention) continue;
    // A gemm group holding a Conv was planned for a target whose convolutions anchor gemm groups.
    GroupClassification cls = ClassifyGroup(graph, group.nodes, group.kind == GroupKind::kGemm);
    if (!cls.decision) return Internal(fmt::format("group {} is illegal: {}", group.id, cls.decision.Explain()));
    if (cls.kind != group.kind)
      return Internal(fmt::format("group {} is {} but classifies as {}", group.id, GroupKindName(group.kind), GroupKindName(cls.kind)));
  }
  return Status::Ok();
}

}  // namespace tilefuse

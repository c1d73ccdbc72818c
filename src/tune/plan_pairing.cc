#include "tune/plan_pairing.h"

#include <fmt/format.h>

namespace tilefuse {

namespace {

// What the pairing indexes by, which VerifyPlan takes for granted.
Status CheckPlanShape(const Graph& graph, const FusionPlan& plan, const char* which) {
  if (plan.group_of.size() != static_cast<size_t>(graph.num_nodes()))
    return Internal(fmt::format("the {} plan has group_of for {} nodes, the graph has {}", which, plan.group_of.size(),
                                graph.num_nodes()));
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.groups[i].id != static_cast<int>(i) || plan.groups[i].nodes.empty())
      return Internal(fmt::format("the {} plan's group {} has id {} and {} nodes", which, i, plan.groups[i].id,
                                  plan.groups[i].nodes.size()));
  for (const FusionGroup& group : plan.groups)
    for (int id : group.nodes)
      if (id < 0 || id >= graph.num_nodes() || plan.group_of[id] != group.id)
        return Internal(fmt::format("the {} plan's group {} lists %{}, group_of disagrees", which, group.id, id));
  for (int g : plan.group_of)
    if (g >= static_cast<int>(plan.groups.size())) return Internal(fmt::format("the {} plan has no group {}", which, g));
  return Status::Ok();
}

}  // namespace

StatusOr<PlanPairing> PairPlans(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused) {
  RETURN_IF_ERROR(CheckPlanShape(graph, fused, "fused"));
  RETURN_IF_ERROR(CheckPlanShape(graph, unfused, "unfused"));
  for (int id = 0; id < graph.num_nodes(); ++id)
    if ((fused.group_of[id] < 0) != (unfused.group_of[id] < 0))
      return Internal(fmt::format("%{} is in fused group {} but unfused group {}", id, fused.group_of[id],
                                  unfused.group_of[id]));
  PlanPairing pairing;
  pairing.touching.resize(fused.groups.size());
  for (const FusionGroup& group : unfused.groups) {
    pairing.timed_with.push_back(fused.group_of[group.nodes.back()]);
    for (int id : group.nodes) {
      std::vector<int>& touching = pairing.touching[fused.group_of[id]];
      if (touching.empty() || touching.back() != group.id) touching.push_back(group.id);
    }
  }
  return pairing;
}

}  // namespace tilefuse

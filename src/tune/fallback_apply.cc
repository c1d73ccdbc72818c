// ApplyFallbacks (tune/fallback.h): each replaced fused group is cut along the unfused
// groups into pieces that take its place in the plan.
//
// Why the order stays valid: a piece is the intersection of a convex fused group with a
// convex unfused group, so it is convex; pieces of one group depend on each other only
// in the unfused plan's order; they read only groups before the fused group they
// replace, and only groups after it read them.
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <set>
#include <utility>

#include "fusion/cost_model.h"
#include "fusion/device_spec.h"
#include "fusion/group_classifier.h"
#include "fusion/plan_verifier.h"
#include "tune/fallback.h"
#include "tune/plan_pairing.h"

namespace tilefuse {

namespace {

bool IsViewLike(const Graph& graph, int id) {
  OpKind kind = graph.node(id).info().kind;
  return kind == OpKind::View || kind == OpKind::Broadcast;
}

struct Piece {
  int unfused_group;
  std::vector<int> nodes;  // ascending
};

// The group's nodes by unfused group, in unfused order. Views of an unfused kernel that
// is timed with another fused group (plan_pairing.h) join the piece computing their
// input when it can take them, so they stay index arithmetic rather than a copy kernel.
std::vector<Piece> CutAlongUnfusedGroups(const Graph& graph, const FusionGroup& group, const FusionPlan& unfused) {
  std::map<int, std::vector<int>> by_unfused_group;
  for (int id : group.nodes) by_unfused_group[unfused.group_of[id]].push_back(id);
  std::vector<Piece> pieces;
  std::map<int, size_t> piece_of;  // node → index in pieces
  for (auto& [u, nodes] : by_unfused_group) {
    bool views_only = std::all_of(nodes.begin(), nodes.end(), [&](int id) { return IsViewLike(graph, id); });
    std::set<size_t> hosts;
    for (int id : nodes)
      for (int input : graph.node(id).inputs)
        if (auto it = piece_of.find(input); it != piece_of.end()) hosts.insert(it->second);
    size_t into = pieces.size();
    if (views_only && nodes != unfused.groups[u].nodes && hosts.size() == 1) {
      Piece& host = pieces[*hosts.begin()];
      std::vector<int> merged;
      std::merge(host.nodes.begin(), host.nodes.end(), nodes.begin(), nodes.end(), std::back_inserter(merged));
      if (ClassifyGroup(graph, merged).decision) {
        host.nodes = std::move(merged);
        into = *hosts.begin();
      }
    }
    if (into == pieces.size()) pieces.push_back({u, nodes});
    for (int id : nodes) piece_of[id] = into;
  }
  return pieces;
}

// A piece as a group: the unfused group itself when whole, else classified and costed
// the way the planner does (inputs and outputs are filled in once the plan is complete).
StatusOr<FusionGroup> PieceGroup(const Graph& graph, const CostModel& model, const FusionPlan& unfused,
                                 const Piece& piece, int fused_group) {
  if (piece.nodes == unfused.groups[piece.unfused_group].nodes) return unfused.groups[piece.unfused_group];
  GroupClassification cls = ClassifyGroup(graph, piece.nodes);
  if (!cls.decision)
    return Internal(fmt::format("the part of unfused group {} in fused group {} is no kernel: {}", piece.unfused_group,
                                fused_group, cls.decision.Explain()));
  FusionGroup group;
  group.kind = cls.kind;
  group.nodes = piece.nodes;
  GroupCost cost = model.PredictGroupTime(piece.nodes);
  group.bytes = cost.bytes;
  group.flops = cost.flops;
  group.predicted_us = cost.seconds * 1e6;
  for (int id : piece.nodes)
    if (!IsViewLike(graph, id)) group.unfused_predicted_us += model.PredictGroupTime({id}).seconds * 1e6;
  group.unfused_predicted_us = std::max(group.unfused_predicted_us, group.predicted_us * (piece.nodes.size() == 1));
  return group;
}

// Inputs (non-members read, sources and generators included) and outputs (members read
// elsewhere or graph outputs), as PlanFusion lists them.
void FillInputsAndOutputs(const Graph& graph, FusionPlan& plan) {
  std::vector<std::vector<int>> users = graph.ComputeUsers();
  std::vector<bool> is_output(graph.num_nodes(), false);
  for (const Graph::Output& o : graph.outputs()) is_output[o.node] = true;
  for (FusionGroup& group : plan.groups) {
    group.inputs.clear();
    group.outputs.clear();
    for (int id : group.nodes) {
      for (int input : graph.node(id).inputs)
        if (plan.group_of[input] != group.id) group.inputs.push_back(input);
      if (is_output[id] || std::any_of(users[id].begin(), users[id].end(), [&](int u) { return plan.group_of[u] != group.id; }))
        group.outputs.push_back(id);
    }
    std::sort(group.inputs.begin(), group.inputs.end());
    group.inputs.erase(std::unique(group.inputs.begin(), group.inputs.end()), group.inputs.end());
  }
}

// Which fused groups to replace, by id (nullptr: keep), checking the decisions against the plans.
StatusOr<std::vector<const FallbackDecision*>> ReplacedGroups(const FusionPlan& fused, const PlanPairing& pairing,
                                                             const std::vector<FallbackDecision>& decisions) {
  std::vector<const FallbackDecision*> replaced(fused.groups.size(), nullptr);
  std::vector<bool> seen(fused.groups.size(), false);
  for (const FallbackDecision& d : decisions) {
    if (d.fused_group < 0 || static_cast<size_t>(d.fused_group) >= fused.groups.size())
      return InvalidArgument(fmt::format("fallback decision for group {}, the plan has {}", d.fused_group, fused.groups.size()));
    if (seen[d.fused_group]) return InvalidArgument(fmt::format("two fallback decisions for group {}", d.fused_group));
    seen[d.fused_group] = true;
    if (!d.use_unfused) continue;
    if (d.unfused_groups != pairing.touching[d.fused_group])
      return InvalidArgument(fmt::format("fallback decision for group {} names other unfused groups than the plans",
                                         d.fused_group));
    replaced[d.fused_group] = &d;
  }
  return replaced;
}

// Producer→consumer edges among the groups first..last of `plan`.
std::set<std::pair<int, int>> EdgesAmong(const Graph& graph, const FusionPlan& plan, int first, int last) {
  std::set<std::pair<int, int>> edges;
  for (int gid = first; gid <= last; ++gid)
    for (int id : plan.groups[gid].nodes)
      for (int input : graph.node(id).inputs) {
        int from = plan.group_of[input];
        if (from >= first && from <= last && from != gid) edges.insert({from, gid});
      }
  return edges;
}

// The surviving groups' rejected merges renumbered (a replaced group's no longer apply),
// and each edge between pieces of a replaced group as a merge rejected by measurement.
void RecordRejections(const Graph& graph, const FusionPlan& fused, const std::vector<int>& new_id,
                      const std::vector<std::pair<const FallbackDecision*, std::pair<int, int>>>& splits, FusionPlan& plan) {
  for (const RejectedMerge& r : fused.rejected)
    if (new_id[r.producer_group] >= 0 && new_id[r.consumer_group] >= 0)
      plan.rejected.push_back({new_id[r.producer_group], new_id[r.consumer_group], r.reason});
  for (const auto& [d, range] : splits)
    for (auto [producer, consumer] : EdgesAmong(graph, plan, range.first, range.second))
      plan.rejected.push_back(
          {producer, consumer, fmt::format("autotuner fallback from fused group {}: {}", d->fused_group, d->reason)});
}

}  // namespace

StatusOr<FusionPlan> ApplyFallbacks(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused,
                                    const std::vector<FallbackDecision>& decisions) {
  ASSIGN_OR_RETURN(PlanPairing pairing, PairPlans(graph, fused, unfused));
  RETURN_IF_ERROR(VerifyPlan(graph, fused).WithContext("fused plan"));
  RETURN_IF_ERROR(VerifyPlan(graph, unfused).WithContext("unfused plan"));
  ASSIGN_OR_RETURN(std::vector<const FallbackDecision*> replaced, ReplacedGroups(fused, pairing, decisions));
  const DeviceSpec* spec = FindDeviceSpec(fused.device);
  if (!spec) return InvalidArgument(fmt::format("the fused plan names unknown device '{}'", fused.device));
  CostModel model(graph, *spec);

  FusionPlan plan;
  plan.device = fused.device;
  plan.unfused_kernels = fused.unfused_kernels;
  plan.unfused_predicted_us = fused.unfused_predicted_us;
  plan.group_of.assign(graph.num_nodes(), -1);
  std::vector<int> new_id(fused.groups.size(), -1);  // surviving fused groups only
  auto append = [&](FusionGroup group) {
    group.id = static_cast<int>(plan.groups.size());
    for (int id : group.nodes) plan.group_of[id] = group.id;
    plan.predicted_us += group.predicted_us;
    plan.groups.push_back(std::move(group));
  };
  std::vector<std::pair<const FallbackDecision*, std::pair<int, int>>> splits;  // new ids first..last
  for (const FusionGroup& group : fused.groups) {
    if (!replaced[group.id]) {
      new_id[group.id] = static_cast<int>(plan.groups.size());
      append(group);
      continue;
    }
    int first = static_cast<int>(plan.groups.size());
    for (const Piece& piece : CutAlongUnfusedGroups(graph, group, unfused)) {
      ASSIGN_OR_RETURN(FusionGroup piece_group, PieceGroup(graph, model, unfused, piece, group.id));
      append(std::move(piece_group));
    }
    splits.push_back({replaced[group.id], {first, static_cast<int>(plan.groups.size()) - 1}});
  }
  FillInputsAndOutputs(graph, plan);
  RecordRejections(graph, fused, new_id, splits, plan);
  RETURN_IF_ERROR(VerifyPlan(graph, plan).WithContext("plan after fallbacks"));
  return plan;
}

}  // namespace tilefuse

#include "tune/fallback.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <set>
#include <utility>

#include "fusion/plan_verifier.h"

namespace tilefuse {

namespace {

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// What the code below indexes by, which VerifyPlan takes for granted.
Status CheckPlanShape(const Graph& graph, const FusionPlan& plan, const char* which) {
  if (plan.group_of.size() != static_cast<size_t>(graph.num_nodes()))
    return Internal(fmt::format("the {} plan has group_of for {} nodes, the graph has {}", which, plan.group_of.size(),
                                graph.num_nodes()));
  for (size_t i = 0; i < plan.groups.size(); ++i)
    if (plan.groups[i].id != static_cast<int>(i) || plan.groups[i].nodes.empty())
      return Internal(fmt::format("the {} plan's group {} has id {} and {} nodes", which, i, plan.groups[i].id,
                                  plan.groups[i].nodes.size()));
  for (int g : plan.group_of)
    if (g >= static_cast<int>(plan.groups.size())) return Internal(fmt::format("the {} plan has no group {}", which, g));
  return Status::Ok();
}

// For each fused group, its unfused groups (ascending ids). Both plans partition the
// same nodes, and the unfused plan only folds views into their consumers, which fusion
// does too, so an unfused group split across fused groups means a planner bug.
StatusOr<std::vector<std::vector<int>>> UnfusedGroupsOf(const Graph& graph, const FusionPlan& fused,
                                                        const FusionPlan& unfused) {
  RETURN_IF_ERROR(CheckPlanShape(graph, fused, "fused"));
  RETURN_IF_ERROR(CheckPlanShape(graph, unfused, "unfused"));
  std::vector<std::vector<int>> inside(fused.groups.size());
  std::vector<size_t> covered(fused.groups.size(), 0);
  for (const FusionGroup& group : unfused.groups) {
    int owner = fused.group_of[group.nodes.front()];
    for (int id : group.nodes)
      if (fused.group_of[id] != owner || owner < 0)
        return Internal(fmt::format("unfused group {} is not inside one fused group: %{} is in fused group {}, %{} in {}",
                                    group.id, group.nodes.front(), owner, id, fused.group_of[id]));
    inside[owner].push_back(group.id);
    covered[owner] += group.nodes.size();
  }
  for (const FusionGroup& group : fused.groups)
    if (covered[group.id] != group.nodes.size())
      return Internal(fmt::format("fused group {} has {} nodes, its unfused groups {}", group.id, group.nodes.size(),
                                  covered[group.id]));
  return inside;
}

// Times by group id, NaN where a group has no measurement.
StatusOr<std::vector<double>> TimesById(const std::vector<GroupTiming>& timings, size_t num_groups, const char* which) {
  std::vector<double> times(num_groups, kNotMeasured);
  for (const GroupTiming& t : timings) {
    if (t.group < 0 || static_cast<size_t>(t.group) >= num_groups)
      return InvalidArgument(fmt::format("{} timing names group {}, the plan has {}", which, t.group, num_groups));
    if (!std::isfinite(t.time_us) || t.time_us < 0)
      return InvalidArgument(fmt::format("{} group {} has time {} us", which, t.group, t.time_us));
    if (!std::isnan(times[t.group]))
      return InvalidArgument(fmt::format("{} group {} is timed twice", which, t.group));
    times[t.group] = t.time_us;
  }
  return times;
}

// The comparison, once both times are known. Timings are rounded decimal microseconds,
// so "exactly 10% slower" must not fall back on the last bit of 1.1 × t.
void Compare(FallbackDecision& d, double slower_factor) {
  double limit = slower_factor * d.unfused_us;
  d.use_unfused = d.fused_us > limit + 1e-9 * limit;
  if (d.use_unfused)
    d.reason = fmt::format("unfused: fused measured {:.2f}x slower (limit {:.2f}x)", d.fused_us / d.unfused_us, slower_factor);
  else if (d.fused_us < d.unfused_us)
    d.reason = fmt::format("kept fused: {:.2f}x faster than unfused", d.unfused_us / d.fused_us);
  else if (d.fused_us == d.unfused_us)
    d.reason = "kept fused: as fast as unfused";
  else
    d.reason = fmt::format("kept fused: {:.2f}x slower than unfused, within the {:.2f}x limit", d.fused_us / d.unfused_us,
                           slower_factor);
}

FallbackDecision Decide(const FusionGroup& group, const std::vector<int>& inside, const std::vector<double>& fused_times,
                        const std::vector<double>& unfused_times, double slower_factor) {
  FallbackDecision d;
  d.fused_group = group.id;
  d.unfused_groups = inside;
  d.fused_us = fused_times[group.id];
  d.unfused_us = 0;
  int missing = -1;
  for (int u : inside) {
    d.unfused_us += unfused_times[u];  // NaN stays NaN
    if (std::isnan(unfused_times[u]) && missing < 0) missing = u;
  }
  if (std::isnan(d.fused_us))
    d.reason = "kept fused: not measured (no time for the fused group)";
  else if (missing >= 0)
    d.reason = fmt::format("kept fused: not measured (no time for unfused group {})", missing);
  else if (inside.size() == 1)
    d.reason = "kept fused: one kernel unfused too";
  else
    Compare(d, slower_factor);
  return d;
}

// Producer→consumer edges among `groups` (new ids) of `plan`.
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

// Which fused groups to replace, by id (nullptr: keep), checking the decisions against the plans.
StatusOr<std::vector<const FallbackDecision*>> ReplacedGroups(const FusionPlan& fused,
                                                             const std::vector<std::vector<int>>& inside,
                                                             const std::vector<FallbackDecision>& decisions) {
  std::vector<const FallbackDecision*> replaced(fused.groups.size(), nullptr);
  std::vector<bool> seen(fused.groups.size(), false);
  for (const FallbackDecision& d : decisions) {
    if (d.fused_group < 0 || static_cast<size_t>(d.fused_group) >= fused.groups.size())
      return InvalidArgument(fmt::format("fallback decision for group {}, the plan has {}", d.fused_group, fused.groups.size()));
    if (seen[d.fused_group]) return InvalidArgument(fmt::format("two fallback decisions for group {}", d.fused_group));
    seen[d.fused_group] = true;
    if (!d.use_unfused) continue;
    if (d.unfused_groups != inside[d.fused_group])
      return InvalidArgument(fmt::format("fallback decision for group {} names other unfused groups than the plans",
                                         d.fused_group));
    replaced[d.fused_group] = &d;
  }
  return replaced;
}

}  // namespace

StatusOr<std::vector<FallbackDecision>> DecideFallbacks(const Graph& graph, const FusionPlan& fused,
                                                        const FusionPlan& unfused,
                                                        const std::vector<GroupTiming>& fused_times,
                                                        const std::vector<GroupTiming>& unfused_times,
                                                        double slower_factor) {
  if (!(slower_factor > 0) || !std::isfinite(slower_factor))
    return InvalidArgument(fmt::format("fallback factor {} must be a positive number", slower_factor));
  ASSIGN_OR_RETURN(std::vector<std::vector<int>> inside, UnfusedGroupsOf(graph, fused, unfused));
  ASSIGN_OR_RETURN(std::vector<double> fused_by_id, TimesById(fused_times, fused.groups.size(), "fused"));
  ASSIGN_OR_RETURN(std::vector<double> unfused_by_id, TimesById(unfused_times, unfused.groups.size(), "unfused"));
  std::vector<FallbackDecision> decisions;
  for (const FusionGroup& group : fused.groups)
    decisions.push_back(Decide(group, inside[group.id], fused_by_id, unfused_by_id, slower_factor));
  return decisions;
}

StatusOr<FusionPlan> ApplyFallbacks(const Graph& graph, const FusionPlan& fused, const FusionPlan& unfused,
                                    const std::vector<FallbackDecision>& decisions) {
  RETURN_IF_ERROR(CheckPlanShape(graph, fused, "fused"));
  RETURN_IF_ERROR(VerifyPlan(graph, fused).WithContext("fused plan"));
  RETURN_IF_ERROR(CheckPlanShape(graph, unfused, "unfused"));
  RETURN_IF_ERROR(VerifyPlan(graph, unfused).WithContext("unfused plan"));
  ASSIGN_OR_RETURN(std::vector<std::vector<int>> inside, UnfusedGroupsOf(graph, fused, unfused));
  ASSIGN_OR_RETURN(std::vector<const FallbackDecision*> replaced, ReplacedGroups(fused, inside, decisions));

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
  // A group's unfused groups all read only earlier groups or each other (in unfused
  // order), and later groups read it: putting them at its place keeps the order valid.
  std::vector<std::pair<int, int>> split_ranges;  // new ids [first, last] per replaced group
  for (const FusionGroup& group : fused.groups) {
    if (!replaced[group.id]) {
      new_id[group.id] = static_cast<int>(plan.groups.size());
      append(group);
      continue;
    }
    int first = static_cast<int>(plan.groups.size());
    for (int u : inside[group.id]) append(unfused.groups[u]);
    split_ranges.push_back({first, static_cast<int>(plan.groups.size()) - 1});
  }
  for (const RejectedMerge& r : fused.rejected)
    if (new_id[r.producer_group] >= 0 && new_id[r.consumer_group] >= 0)
      plan.rejected.push_back({new_id[r.producer_group], new_id[r.consumer_group], r.reason});
  for (auto [first, last] : split_ranges) {
    const FallbackDecision& d = *replaced[fused.group_of[plan.groups[first].nodes.front()]];
    for (auto [producer, consumer] : EdgesAmong(graph, plan, first, last))
      plan.rejected.push_back({producer, consumer, fmt::format("autotuner fallback from fused group {}: {}", d.fused_group, d.reason)});
  }
  RETURN_IF_ERROR(VerifyPlan(graph, plan).WithContext("plan after fallbacks"));
  return plan;
}

std::string DescribeFallbacks(const std::vector<FallbackDecision>& decisions) {
  auto us = [](double t) { return std::isnan(t) ? std::string("not measured") : fmt::format("{:.2f} us", t); };
  std::string out;
  for (const FallbackDecision& d : decisions)
    out += fmt::format("group {}: fused {}, unfused {} (unfused groups {}) -> {}\n", d.fused_group, us(d.fused_us),
                       us(d.unfused_us), fmt::join(d.unfused_groups, ", "), d.reason);
  return out;
}

nlohmann::json FallbacksToJson(const std::vector<FallbackDecision>& decisions) {
  auto us = [](double t) { return std::isnan(t) ? nlohmann::json(nullptr) : nlohmann::json(t); };
  nlohmann::json out = nlohmann::json::array();
  for (const FallbackDecision& d : decisions)
    out.push_back({{"fused_group", d.fused_group},
                   {"unfused_groups", d.unfused_groups},
                   {"fused_us", us(d.fused_us)},
                   {"unfused_us", us(d.unfused_us)},
                   {"use_unfused", d.use_unfused},
                   {"reason", d.reason}});
  return out;
}

}  // namespace tilefuse

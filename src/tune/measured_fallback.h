// The fallback rule as both tuners apply it (tune/fallback.h): compile the graph unfused,
// time each fused group and the unfused kernels on the same inputs, and recompile with
// the plan where the groups that lose run their ops unfused. `Compiled` is
// CompiledGraph or GpuCompiledGraph; their options share the fields used here.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"
#include "tune/fallback.h"

namespace tilefuse {

template <typename Compiled>
StatusOr<std::vector<GroupTiming>> MeasureGroupTimes(Compiled& compiled, const std::vector<Tensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<double> us, compiled.GroupTimesUs(inputs));
  std::vector<GroupTiming> out;
  for (size_t g = 0; g < us.size() && g < compiled.plan().groups.size(); ++g) out.push_back({compiled.plan().groups[g].id, us[g]});
  return out;
}

// Tuned configurations are keyed by kernel name, "tf_group<id>_<kind>..." (both
// backends), and a replan renumbers groups: a config follows its group to its new id
// when the replanned plan has a group with exactly the same members, and is dropped
// otherwise (a config tuned for one kernel may not even be valid for another).
template <typename Config>
std::map<std::string, Config> CarryConfigs(const FusionPlan& before, const FusionPlan& after,
                                           const std::map<std::string, Config>& configs) {
  auto members = [](const FusionGroup& g) {
    std::vector<int> nodes = g.nodes;
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  };
  std::map<std::vector<int>, int> after_id;
  for (const FusionGroup& g : after.groups) after_id[members(g)] = g.id;
  std::map<std::string, Config> carried;
  for (const FusionGroup& g : before.groups) {
    auto it = after_id.find(members(g));
    if (it == after_id.end()) continue;
    std::string old_prefix = fmt::format("tf_group{}_", g.id), new_prefix = fmt::format("tf_group{}_", it->second);
    for (const auto& [name, config] : configs)
      if (name.rfind(old_prefix, 0) == 0) carried[new_prefix + name.substr(old_prefix.size())] = config;
  }
  return carried;
}

// `fused` compiled from `graph` with `fused_options`; returns it, or its replanned
// recompilation when a group falls back. `decisions`: one per fused group.
template <typename Compiled, typename Options>
StatusOr<std::unique_ptr<Compiled>> ApplyMeasuredFallbacks(const Graph& graph, std::unique_ptr<Compiled> fused,
                                                           const Options& fused_options, const std::vector<Tensor>& inputs,
                                                           std::vector<FallbackDecision>& decisions) {
  Options unfused_options = fused_options;
  unfused_options.fuse = false;
  unfused_options.configs.clear();
  unfused_options.poison_outputs = false;
  unfused_options.plan_override = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<Compiled> unfused, Compiled::Compile(graph, unfused_options));
  ASSIGN_OR_RETURN(std::vector<GroupTiming> fused_times, MeasureGroupTimes(*fused, inputs));
  ASSIGN_OR_RETURN(std::vector<GroupTiming> unfused_times, MeasureGroupTimes(*unfused, inputs));
  ASSIGN_OR_RETURN(decisions, DecideFallbacks(fused->graph(), fused->plan(), unfused->plan(), fused_times, unfused_times));
  if (std::none_of(decisions.begin(), decisions.end(), [](const FallbackDecision& d) { return d.use_unfused; })) return fused;
  ASSIGN_OR_RETURN(FusionPlan plan, ApplyFallbacks(fused->graph(), fused->plan(), unfused->plan(), decisions));
  Options replanned = fused_options;
  replanned.plan_override = &plan;
  replanned.configs = CarryConfigs(fused->plan(), plan, fused_options.configs);
  return Compiled::Compile(graph, replanned);
}

}  // namespace tilefuse

// The fallback rule as both tuners apply it (tune/fallback.h): compile the graph unfused,
// time each fused group and the unfused kernels on the same inputs, and recompile with
// the plan where the groups that lose run their ops unfused. `Compiled` is
// CpuExecutable or CudaExecutable; their options share the fields used here.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"
#include "driver/driver.h"
#include "runtime/measure.h"
#include "tune/fallback.h"

namespace tilefuse {

template <typename Compiled>
StatusOr<std::vector<GroupTiming>> MeasureGroupTimes(Compiled& compiled, const std::vector<Tensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<double> us, GroupTimesUs(compiled, inputs));
  std::vector<GroupTiming> out;
  for (size_t g = 0; g < us.size() && g < compiled.plan().groups.size(); ++g) out.push_back({compiled.plan().groups[g].id, us[g]});
  return out;
}

// The driver's typed entry point for `Options`' backend.
template <typename Options>
auto CompileWithOptions(const Graph& graph, const Options& options) {
  if constexpr (std::is_same_v<Options, CpuCompileOptions>) return CompileForCpu(graph, options);
  else return CompileForCuda(graph, options);
}

template <typename Compiled, typename Options>
StatusOr<std::unique_ptr<Compiled>> ApplyMeasuredFallbacks(const Graph& graph, std::unique_ptr<Compiled> fused,
                                                           const Options& fused_options, const std::vector<Tensor>& inputs,
                                                           std::vector<FallbackDecision>& decisions) {
  Options unfused_options = fused_options;
  unfused_options.fuse = false;
  unfused_options.configs.clear();
  unfused_options.poison_outputs = false;
  unfused_options.plan_override = nullptr;
  ASSIGN_OR_RETURN(std::unique_ptr<Compiled> unfused, CompileWithOptions(graph, unfused_options));
  ASSIGN_OR_RETURN(std::vector<GroupTiming> fused_times, MeasureGroupTimes(*fused, inputs));
  ASSIGN_OR_RETURN(std::vector<GroupTiming> unfused_times, MeasureGroupTimes(*unfused, inputs));
  ASSIGN_OR_RETURN(decisions, DecideFallbacks(fused->graph(), fused->plan(), unfused->plan(), fused_times, unfused_times));
  if (std::none_of(decisions.begin(), decisions.end(), [](const FallbackDecision& d) { return d.use_unfused; })) return fused;
  ASSIGN_OR_RETURN(FusionPlan plan, ApplyFallbacks(fused->graph(), fused->plan(), unfused->plan(), decisions));
  // The tuned configurations are keyed by KernelFingerprint: the kernels a replan keeps
  // (renumbered or not) find theirs.
  Options replanned = fused_options;
  replanned.plan_override = &plan;
  return CompileWithOptions(graph, replanned);
}

}  // namespace tilefuse

// The fusion plans of a graph's earlier bindings (BindingPlans, tilefuse/tilefuse.h; a ModelFile
// keeps one), by the structure of their passed graphs. Bindings of a model's symbolic dims (a decode loop's past lengths)
// usually pass to graphs that differ in their sizes alone: the same nodes, ops and edges. A
// new binding of such a structure compiles the plan an earlier one made instead of planning
// again (the planner's ~30 ms of GPT-2 small's ~90 a binding on the CPU).
//
// Sound whatever the sizes: a plan is only reused where VerifyPlan accepts it for the new
// graph (every group convex, its kind what the classifier says of its members at these
// shapes), and the backends compile any plan VerifyPlan accepts, choosing each group's tiles at
// its own shapes. What reuse may cost is speed: the groups chosen by the cost model at an
// earlier binding's sizes.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "api/model_cache.h"
#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

struct BindingPlans::State {
  // The plan (and its backend) an earlier binding of `passed`'s structure made under the same
  // `options_words` (what shapes the plan: backend, fuse, precision...), if it fits `passed`.
  std::optional<CachedCompile> Find(const Graph& passed, const std::string& options_words) const;
  void Remember(const Graph& passed, const std::string& options_words, const std::string& backend, const FusionPlan& plan);

  static constexpr size_t kMaxPlans = 16;  // structures kept (a model has a few: batch 1 folds some broadcasts)

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::pair<std::string, FusionPlan>> plans_;  // words + structure -> backend, plan
};

// The graph without its sizes: each node's op, dtype, rank, inputs and the attributes that
// are not sizes (axes, axis, permutation, cast type), and the outputs.
std::string GraphStructure(const Graph& graph);

}  // namespace tilefuse

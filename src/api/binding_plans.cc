#include "api/binding_plans.h"

#include <fmt/format.h>

#include "fusion/plan_verifier.h"

namespace tilefuse {

BindingPlans::BindingPlans() : state_(std::make_unique<State>()) {}
BindingPlans::~BindingPlans() = default;

std::string GraphStructure(const Graph& graph) {
  std::string text;
  for (const Node& n : graph.nodes()) {
    const Attrs& a = n.attrs;
    text += fmt::format("{} {} {} [{}] axes [{}] {} axis {} perm [{}] to {}\n", static_cast<int>(n.op), static_cast<int>(n.dtype),
                        n.rank(), fmt::join(n.inputs, ","), fmt::join(a.axes, ","), a.keepdims, a.axis, fmt::join(a.perm, ","),
                        static_cast<int>(a.to));
  }
  for (const Graph::Output& o : graph.outputs()) text += fmt::format("output {}\n", o.node);
  return text;
}

std::optional<CachedCompile> BindingPlans::State::Find(const Graph& passed, const std::string& options_words) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(options_words + "\n" + GraphStructure(passed));
  if (it == plans_.end() || !VerifyPlan(passed, it->second.second).ok()) return std::nullopt;
  return CachedCompile{Graph(), it->second.first, it->second.second};
}

void BindingPlans::State::Remember(const Graph& passed, const std::string& options_words, const std::string& backend,
                            const FusionPlan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
  plans_[options_words + "\n" + GraphStructure(passed)] = {backend, plan};
}

}  // namespace tilefuse

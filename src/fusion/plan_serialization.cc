#include "fusion/plan_serialization.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fusion/planner.h"

namespace tilefuse {

using nlohmann::json;

std::string SerializePlan(const FusionPlan& plan) {
  json groups = json::array();
  for (const FusionGroup& g : plan.groups)
    groups.push_back({{"id", g.id}, {"kind", std::string(GroupKindName(g.kind))}, {"nodes", g.nodes}, {"inputs", g.inputs},
                      {"outputs", g.outputs}, {"bytes", g.bytes}, {"flops", g.flops}, {"predicted_us", g.predicted_us},
                      {"unfused_predicted_us", g.unfused_predicted_us}, {"cost_note", g.cost_note}});
  json rejected = json::array();
  for (const RejectedMerge& r : plan.rejected) rejected.push_back({r.producer_group, r.consumer_group, r.reason});
  return json{{"device", plan.device},
              {"groups", std::move(groups)},
              {"group_of", plan.group_of},
              {"rejected", std::move(rejected)},
              {"missed_attention", plan.missed_attention},
              {"backend_notes", plan.backend_notes},
              {"unfused_kernels", plan.unfused_kernels},
              {"predicted_us", plan.predicted_us},
              {"unfused_predicted_us", plan.unfused_predicted_us}}
      .dump();
}

StatusOr<FusionPlan> DeserializePlan(std::string_view text) {
  try {
    const json j = json::parse(text);
    FusionPlan plan;
    plan.device = j.at("device").get<std::string>();
    for (const json& g : j.at("groups")) {
      FusionGroup group;
      group.id = g.at("id").get<int>();
      if (!ParseGroupKind(g.at("kind").get<std::string>(), &group.kind))
        return InvalidArgument(fmt::format("a serialized plan with a group of kind '{}'", g.at("kind").get<std::string>()));
      group.nodes = g.at("nodes").get<std::vector<int>>();
      group.inputs = g.at("inputs").get<std::vector<int>>();
      group.outputs = g.at("outputs").get<std::vector<int>>();
      group.bytes = g.at("bytes").get<double>();
      group.flops = g.at("flops").get<double>();
      group.predicted_us = g.at("predicted_us").get<double>();
      group.unfused_predicted_us = g.at("unfused_predicted_us").get<double>();
      group.cost_note = g.at("cost_note").get<std::string>();
      plan.groups.push_back(std::move(group));
    }
    plan.group_of = j.at("group_of").get<std::vector<int>>();
    for (const json& r : j.at("rejected")) plan.rejected.push_back({r.at(0).get<int>(), r.at(1).get<int>(), r.at(2).get<std::string>()});
    plan.missed_attention = j.at("missed_attention").get<std::vector<std::string>>();
    plan.backend_notes = j.at("backend_notes").get<std::vector<std::string>>();
    plan.unfused_kernels = j.at("unfused_kernels").get<int>();
    plan.predicted_us = j.at("predicted_us").get<double>();
    plan.unfused_predicted_us = j.at("unfused_predicted_us").get<double>();
    return plan;
  } catch (const json::exception& e) {
    return InvalidArgument(fmt::format("a damaged serialized plan: {}", e.what()));
  }
}

}  // namespace tilefuse

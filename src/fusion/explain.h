// Renders a FusionPlan for people and programs: text (one line per group, its members
// with their ONNX node names, and the rejected merges under it), JSON, and Graphviz DOT
// (one cluster per group, coloured by kind).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

std::string ExplainText(const Graph& graph, const FusionPlan& plan);
nlohmann::json ExplainJson(const Graph& graph, const FusionPlan& plan);
std::string ExplainDot(const Graph& graph, const FusionPlan& plan);

}  // namespace tilefuse

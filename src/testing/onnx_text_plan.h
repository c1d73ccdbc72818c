// For tests that start from a graph written as ONNX text: imported, through the graph
// passes, planned. Failures at any step are test failures (the result is then empty).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "frontend/onnx/importer.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"

namespace tilefuse {

struct PlannedText {
  Graph graph;
  FusionPlan plan;
};

// `signature` is the graph line ("g (bfloat16[4,8] x) => (bfloat16[4,8] y)"), `body` its
// nodes, one per line.
inline PlannedText PlanOnnxText(const std::string& signature, const std::string& body, const PlannerOptions& options = {}) {
  std::string text = "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n" + signature + "\n{\n" + body + "}\n";
  PlannedText out;
  auto model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return out;
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return out;
  out.graph = std::move(*graph);
  auto plan = PlanFusion(out.graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) out.plan = std::move(*plan);
  return out;
}

}  // namespace tilefuse

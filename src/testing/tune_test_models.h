// Small models for the CPU tuning tests (codegen, tune): ONNX text with the shape as a
// parameter, so a test picks the row count its constraint needs.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "codegen/kernel.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"

namespace tilefuse::tune_test {

// Softmax over the last axis from primitives: a row kernel with a row buffer (exp).
inline std::string SoftmaxModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 17]>
softmax (float[{0},{1}] x) => (float[{0},{1}] y) {{
  row_max = ReduceMax <axes = [-1], keepdims = 1> (x)
  shifted = Sub (x, row_max)
  e = Exp (shifted)
  axes = Constant <value = int64[1] {{-1}}> ()
  row_sum = ReduceSum <keepdims = 1> (e, axes)
  y = Div (e, row_sum)
}})", rows, cols);
}

// x / sum(x) per row: a row kernel without a row buffer (nothing expensive to keep).
inline std::string NormalizeModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 17]>
normalize (float[{0},{1}] x) => (float[{0},{1}] y) {{
  axes = Constant <value = int64[1] {{-1}}> ()
  row_sum = ReduceSum <keepdims = 1> (x, axes)
  y = Div (x, row_sum)
}})", rows, cols);
}

// tanh(x) * 2 + x: one pointwise kernel.
inline std::string PointwiseModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 17]>
pointwise (float[{0},{1}] x) => (float[{0},{1}] y) {{
  two = Constant <value = float {{2}}> ()
  t = Tanh (x)
  d = Mul (t, two)
  y = Add (d, x)
}})", rows, cols);
}

// `text` imported and through the graph passes.
inline Graph PassedGraph(const std::string& text) {
  auto model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(*graph);
}

// The loop kernel of the last fusion group of `text` (the models above have one group).
inline Kernel LowerLastGroup(const std::string& text) {
  Graph graph = PassedGraph(text);
  auto plan = PlanFusion(graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  auto kernel = LowerGroup(graph, plan->groups.back(), FindInlinedGenerators(graph));
  EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  return std::move(*kernel);
}

}  // namespace tilefuse::tune_test

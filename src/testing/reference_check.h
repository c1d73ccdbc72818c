// For tests that run a compiled model: its graph imported and through the graph passes, and a
// run's outputs held against the f64 reference interpreter on the same inputs.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"

namespace tilefuse {

// The graph of an ONNX model (a file or folder), through the graph passes.
inline StatusOr<Graph> ImportAndPass(const std::string& path) {
  ASSIGN_OR_RETURN(ImportedModel model, ImportOnnx(path));
  return RunGraphPasses(std::move(model.graph), PassOptions{});
}

// Every output of `actual` (a run on `inputs`) against the reference's (CompareWithReference);
// a failure of either run or a mismatch is a test failure. Returns the reference's outputs,
// empty where it failed.
inline std::vector<Tensor> ExpectMatchesReference(const Graph& graph, const std::vector<Tensor>& inputs,
                                                  const StatusOr<std::vector<Tensor>>& actual) {
  auto expected = RunReference(graph, inputs);
  EXPECT_TRUE(expected.ok()) << expected.status().ToString();
  EXPECT_TRUE(actual.ok()) << actual.status().ToString();
  if (!expected.ok() || !actual.ok()) return {};
  EXPECT_EQ(actual->size(), expected->size());
  for (size_t o = 0; o < expected->size() && o < actual->size(); ++o) {
    Comparison cmp = CompareWithReference((*actual)[o], (*expected)[o]);
    EXPECT_TRUE(cmp.pass) << "output " << o << ": " << cmp.reason;
  }
  return std::move(expected).value();
}

}  // namespace tilefuse

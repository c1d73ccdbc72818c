// Helpers for the reference interpreter's tests: build a one-output graph, run it, and
// read the result back as doubles.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse::interpreter_test {

// Marks `output` as the graph's only output, builds, runs on `inputs` and returns the
// graph's status or the output tensor.
inline StatusOr<Tensor> TryRun(GraphBuilder& b, Value output, const std::vector<Tensor>& inputs) {
  b.Output(output, "out");
  StatusOr<Graph> graph = b.Build();
  if (!graph.ok()) return graph.status();
  StatusOr<std::vector<Tensor>> outputs = RunReference(*graph, inputs);
  if (!outputs.ok()) return outputs.status();
  return (*outputs)[0];
}

// As TryRun, expecting success; returns the output's values (empty on failure).
inline std::vector<double> RunGraph(GraphBuilder& b, Value output, const std::vector<Tensor>& inputs = {}) {
  StatusOr<Tensor> result = TryRun(b, output, inputs);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? result->ToDoubles() : std::vector<double>{};
}

inline Tensor F64(Shape shape, std::vector<double> values) { return Tensor::FromDoubles(DType::kF64, shape, values); }

// Values for every element of a `shape` tensor: v(flat index), as a tensor of `dtype`.
template <typename Fn>
Tensor Filled(DType dtype, Shape shape, Fn v) {
  std::vector<double> values(NumElements(shape));
  for (size_t i = 0; i < values.size(); ++i) values[i] = v(static_cast<int64_t>(i));
  return Tensor::FromDoubles(dtype, shape, values);
}

}  // namespace tilefuse::interpreter_test

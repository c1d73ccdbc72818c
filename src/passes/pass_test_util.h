// Small helpers shared by the pass tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "tilefuse/builder.h"
#include "tilefuse/graph.h"
#include "tilefuse/tensor.h"

namespace tilefuse::pass_testing {

inline int CountOps(const Graph& graph, OpCode op) {
  return static_cast<int>(std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                        [op](const Node& n) { return n.op == op; }));
}

inline int CountKind(const Graph& graph, OpKind kind) {
  return static_cast<int>(std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                        [kind](const Node& n) { return n.info().kind == kind; }));
}

// Largest |a - b| over all elements; infinity when the shapes or dtypes differ.
inline double MaxAbsDifference(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) worst = std::max(worst, std::fabs(a.GetDouble(i) - b.GetDouble(i)));
  return worst;
}

// a[..., M, K] · w[..., K, N] as a graph of two parameters, "a" and "w", and one output "y".
inline Graph Product(DType dtype, Shape a_shape, Shape b_shape) {
  GraphBuilder b;
  Value a = b.Parameter("a", dtype, a_shape);
  Value w = b.Parameter("w", dtype, b_shape);
  b.Output(b.MatMul(a, w), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

}  // namespace tilefuse::pass_testing

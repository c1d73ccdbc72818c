// Random inputs for a graph, for tests: input i drawn by Tensor::Random with seed
// first_seed + i (uniform in [-1, 1) for floats). Header-only: tests include it.
#pragma once

#include <cstdint>
#include <vector>

#include "tilefuse/graph.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

inline std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t first_seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, first_seed + i));
  }
  return inputs;
}

}  // namespace tilefuse

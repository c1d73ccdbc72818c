// The analytical cost model: time(group) = max(bytes / bandwidth, flops / peak) + launch.
// Bytes count each group input read once and each group output written once; a
// broadcast operand costs its own (small) size. Bench writes measured times beside
// these predictions so the model can be calibrated. Inlined generators (iota masks,
// broadcast constants) cost nothing: the kernel computes them.
#pragma once

#include <vector>

#include "fusion/device_spec.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct GroupCost {
  double bytes = 0;
  double flops = 0;
  double seconds = 0;
};

class CostModel {
 public:
  CostModel(const Graph& graph, const DeviceSpec& spec);

  // Cost of running `members` (ascending node ids) as one kernel. `is_output[id]` says
  // whether a node is a graph output.
  GroupCost PredictGroupTime(const std::vector<int>& members) const;
  // Flops of one node on its own (matmul: 2·M·N·K per batch; others: per element).
  double NodeFlops(const Node& node) const;
  const DeviceSpec& spec() const { return spec_; }

 private:
  double NodeBytes(int id) const;

  const Graph& graph_;
  const DeviceSpec& spec_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> is_output_;
  std::vector<bool> inlined_;  // generators: recomputed in place, never read from memory
};

}  // namespace tilefuse

// The analytical cost model: time(group) = max(bytes / bandwidth, flops / peak) + launch.
// Bytes count each group input read once and each group output written once; a
// broadcast operand costs its own (small) size. Bench writes measured times beside
// these predictions so the model can be calibrated. Inlined generators (iota masks,
// broadcast constants) cost nothing: the kernel computes them. A gemm group whose target
// does not fuse its epilogue (TargetCapabilities) costs two kernels: the product written
// to memory, then the epilogue reading it back.
#pragma once

#include <string>
#include <vector>

#include "fusion/device_spec.h"
#include "fusion/target_capabilities.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct GroupCost {
  double bytes = 0;
  double flops = 0;
  double seconds = 0;
  std::string note;  // how the cost was counted where it is not one kernel (for explain)
};

class CostModel {
 public:
  // `target`: what the backend fuses (none: every gemm epilogue fused).
  CostModel(const Graph& graph, const DeviceSpec& spec, const TargetCapabilities* target = nullptr);

  // Cost of running `members` (ascending node ids) as one kernel. `is_output[id]` says
  // whether a node is a graph output.
  GroupCost PredictGroupTime(const std::vector<int>& members) const;
  // Flops of one node on its own (matmul: 2·M·N·K per batch; others: per element).
  double NodeFlops(const Node& node) const;
  const DeviceSpec& spec() const { return spec_; }

 private:
  double NodeBytes(int id) const;
  GroupCost OneKernel(const std::vector<int>& members) const;
  // Whether member `id` is read outside the group (or is a graph output): the group stores it.
  bool Escapes(int id, const std::vector<int>& members) const;
  // The rate a reduction group's blocks reach where it runs one block a row over fewer rows
  // than fill the GPU: it stores along its rows or chains its reductions, so the row template
  // cannot split them (codegen/cuda/cuda_row_splits.h). 0: no such limit.
  double RowBlocksRate(const std::vector<int>& members) const;
  // The members after `matmul` in the group (its epilogue), ascending.
  std::vector<int> EpilogueOf(const std::vector<int>& members, int matmul) const;

  const Graph& graph_;
  const DeviceSpec& spec_;
  const TargetCapabilities* target_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> is_output_;
  std::vector<bool> inlined_;  // generators: recomputed in place, never read from memory
};

}  // namespace tilefuse

// What a backend's kernels fuse, as the planner and the cost model ask it: the cost of a
// group is the cost of the kernels that will really run. Each backend answers for its
// target (backend/cpu/cpu_backend.h, backend/cuda/cuda_capabilities.h); with none, the
// planner assumes every template fuses what its group holds.
#pragma once

#include <vector>

#include "fusion/fusion_decision.h"
#include "tilefuse/graph.h"

namespace tilefuse {

class TargetCapabilities {
 public:
  virtual ~TargetCapabilities() = default;
  // Does the kernel of gemm group `members` (ascending; `matmul` its contraction) apply the
  // members after the product (its epilogue) before the product leaves the chip? When not,
  // the reason: the product then goes to memory and comes back, and the epilogue is a
  // kernel of its own — what the cost model charges. Asked for every candidate group the
  // planner weighs: answers must be cheap.
  virtual FusionDecision FusesGemmEpilogue(const Graph& graph, const std::vector<int>& members, int matmul) const = 0;
  // Does the target run a Conv node as a gemm group's anchor (a convolution library in
  // place of the product, the group's epilogue after it: the CPU's oneDNN)? Targets that
  // do not see Conv only as an opaque group of its own (graphs for them go through the
  // window rewrite, passes/window_ops.h, and keep no f32 Conv).
  virtual bool AnchorsConvolution() const { return false; }
};

}  // namespace tilefuse

// The amax of a product's output folded into the product's kernel (codegen/gemm_amax.h says
// why). A generated reduction group that computes ReduceMax(Abs(u)) over all of a value u, and
// otherwise only elementwise ops of a GEMM template group's outputs (the quantization of the
// product's output the planner put beside the amax: its scales, the division, the cast), becomes
// part of that group: its elementwise ops join the product's epilogue and the amax is taken
// there. u stays stored only where the graph or a reader beyond the kernel takes it. The
// reduction's other inputs must be written before the product's step (the product is the group
// writing the last of what the reduction reads).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "codegen/gemm_template.h"
#include "fusion/fusion_plan.h"
#include "ir/symbolic_shapes.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct AmaxFold {
  int product_group = -1;     // the plan's index of the GEMM template group that takes the reduction
  FusionGroup merged;         // its members and the reduction's, but the amax's own ops
  GemmTemplateKernel folded;  // the product lowered from `merged`, with the amax in its epilogue
};

class AmaxFolds {
 public:
  AmaxFolds(const Graph& g, const FusionPlan& plan, const std::vector<bool>& inlined, bool tf32, const SymbolicShapes* symbolic);
  // The fold of plan group `reduction`, or nullopt where it does not apply. `product_of(q)`:
  // the GEMM template problem group q's kernel was emitted from, or null where group q's
  // kernel may not take it.
  std::optional<AmaxFold> Fold(int reduction, const std::function<const GemmTemplateKernel*(int)>& product_of) const;

 private:
  const Graph& g_;
  const FusionPlan& plan_;
  const std::vector<bool>& inlined_;
  bool tf32_;
  const SymbolicShapes* symbolic_;
  std::vector<int> written_at_;  // the plan's index of the group writing each node; -1: none
  std::vector<std::vector<int>> users_;
  std::vector<bool> graph_output_;
};

}  // namespace tilefuse

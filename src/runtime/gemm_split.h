// A gemm group split around its matmul: the prologue (members the product depends on) and
// the epilogue (members after it), which the loop templates lower as a pointwise group.
// Both backends run gemm groups this way: library product, generated epilogue.
#pragma once

#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct GemmSplit {
  int matmul = -1;
  std::vector<int> prologue;  // in group order
  FusionGroup epilogue;       // kind pointwise; its outputs are the group's outputs in it
};

GemmSplit SplitGemmGroup(const Graph& g, const FusionGroup& group);

}  // namespace tilefuse

// A gemm group split around its matmul: the prologue (members the product depends on) and
// the epilogue (members after it), which the loop templates lower as a pointwise group.
// Both backends run gemm groups this way: generated prologue kernels, library product,
// generated epilogue (or, on Hopper, the GEMM template in place of the last two).
#pragma once

#include <vector>

#include "fusion/fusion_plan.h"
#include "tilefuse/graph.h"

namespace tilefuse {

struct GemmSplit {
  int matmul = -1;  // the product: a matmul, or a Conv where the target anchors gemm groups on it
  std::vector<int> prologue;  // in group order
  FusionGroup epilogue;       // kind pointwise; its outputs are the group's outputs in it
};

GemmSplit SplitGemmGroup(const Graph& g, const FusionGroup& group);

// The prologue as pointwise groups, one per value it must materialise: the product's
// operands computed inside the group, members the epilogue reads, and members other
// groups read. (One each, since they may differ in shape; each evaluates only what it
// needs.) Both backends run them as generated kernels before the product.
std::vector<FusionGroup> PrologueGroups(const Graph& g, const FusionGroup& group, const GemmSplit& split);

// Batch offset, in matrices, of a matmul operand of shape `operand` for batch entry `batch`
// of the output `out` (row-major batch dims; size-1 operand dims broadcast, missing
// leading ones too). Both backends walk batched products with it.
int64_t MatmulBatchOffset(const Shape& out, const Shape& operand, int64_t batch);

}  // namespace tilefuse

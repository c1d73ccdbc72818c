#include "codegen/gemm_split.h"

#include <algorithm>

namespace tilefuse {

GemmSplit SplitGemmGroup(const Graph& g, const FusionGroup& group) {
  GemmSplit split;
  for (int id : group.nodes)
    if (g.node(id).op == OpCode::kMatMul || g.node(id).op == OpCode::kBlockScaledMatMul || g.node(id).op == OpCode::kConv)
      split.matmul = id;
  std::vector<bool> ancestor(g.num_nodes(), false);
  ancestor[split.matmul] = true;
  for (auto it = group.nodes.rbegin(); it != group.nodes.rend(); ++it)
    if (ancestor[*it]) for (int input : g.node(*it).inputs) ancestor[input] = true;
  split.epilogue.id = group.id;
  split.epilogue.kind = GroupKind::kPointwise;
  for (int id : group.nodes) {
    if (id == split.matmul) continue;
    (ancestor[id] ? split.prologue : split.epilogue.nodes).push_back(id);
  }
  for (int out : group.outputs)
    if (std::find(split.epilogue.nodes.begin(), split.epilogue.nodes.end(), out) != split.epilogue.nodes.end())
      split.epilogue.outputs.push_back(out);
  return split;
}

std::vector<FusionGroup> PrologueGroups(const Graph& g, const FusionGroup& group, const GemmSplit& split) {
  std::vector<bool> in_prologue(g.num_nodes(), false);
  for (int id : split.prologue) in_prologue[id] = true;
  std::vector<int> outputs;
  for (int input : g.node(split.matmul).inputs)
    if (in_prologue[input]) outputs.push_back(input);
  // The epilogue kernel loads what it reads from outside it: a member it shares with the
  // prologue (x in matmul(transpose(x), w) + x) must be in memory too.
  for (int id : split.epilogue.nodes)
    for (int input : g.node(id).inputs)
      if (in_prologue[input]) outputs.push_back(input);
  for (int out : group.outputs)
    if (in_prologue[out]) outputs.push_back(out);
  std::sort(outputs.begin(), outputs.end());
  outputs.erase(std::unique(outputs.begin(), outputs.end()), outputs.end());
  std::vector<FusionGroup> groups;
  for (int out : outputs) {
    FusionGroup prologue;
    prologue.id = group.id;
    prologue.kind = GroupKind::kPointwise;
    // `out` and the prologue members it depends on, in group order (so `out` is last).
    std::vector<bool> needed(g.num_nodes(), false);
    needed[out] = true;
    for (auto it = split.prologue.rbegin(); it != split.prologue.rend(); ++it)
      if (needed[*it]) for (int input : g.node(*it).inputs) needed[input] = true;
    for (int id : split.prologue)
      if (needed[id]) prologue.nodes.push_back(id);
    prologue.outputs = {out};
    groups.push_back(std::move(prologue));
  }
  return groups;
}

int64_t MatmulBatchOffset(const Shape& out, const Shape& operand, int64_t batch) {
  int out_batch_rank = static_cast<int>(out.size()) - 2, op_batch_rank = static_cast<int>(operand.size()) - 2;
  int64_t offset = 0, stride = 1;
  for (int d = out_batch_rank - 1; d >= 0; --d) {
    int64_t index = batch % out[d];
    batch /= out[d];
    int od = d - (out_batch_rank - op_batch_rank);
    if (od < 0) continue;
    if (operand[od] != 1) offset += index * stride;
    stride *= operand[od];
  }
  return offset;
}

}  // namespace tilefuse

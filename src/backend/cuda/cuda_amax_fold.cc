#include "backend/cuda/cuda_amax_fold.h"

#include <algorithm>

#include "codegen/gemm_amax.h"
#include "codegen/gemm_split.h"
#include "fusion/group_classifier.h"

namespace tilefuse {

AmaxFolds::AmaxFolds(const Graph& g, const FusionPlan& plan, const std::vector<bool>& inlined, bool tf32, const SymbolicShapes* symbolic)
    : g_(g), plan_(plan), inlined_(inlined), tf32_(tf32), symbolic_(symbolic), written_at_(g.num_nodes(), -1), users_(g.ComputeUsers()),
      graph_output_(g.num_nodes(), false) {
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (int out : plan.groups[i].outputs) written_at_[out] = static_cast<int>(i);
  for (const Graph::Output& o : g.outputs()) graph_output_[o.node] = true;
}

std::optional<AmaxFold> AmaxFolds::Fold(int reduction, const std::function<const GemmTemplateKernel*(int)>& product_of) const {
  const FusionGroup& group = plan_.groups[static_cast<size_t>(reduction)];
  if (group.kind != GroupKind::kReduction && group.kind != GroupKind::kRowReduction) return std::nullopt;
  std::vector<bool> member(g_.num_nodes(), false);
  for (int id : group.nodes) member[id] = true;
  std::optional<AmaxMatch> amax;
  for (int out : group.outputs)
    if (!amax) amax = MatchAmax(g_, out, member);
  if (!amax) return std::nullopt;
  const auto amax_op = [&](int id) { return std::binary_search(amax->ops.begin(), amax->ops.end(), id); };
  // The amax's ops read by nothing else: the group's other members join the product's epilogue.
  const bool own_ops = std::all_of(amax->ops.begin(), amax->ops.end(), [&](int op) {
    return op == amax->output || (!graph_output_[op] && std::all_of(users_[op].begin(), users_[op].end(), amax_op));
  });
  if (!own_ops) return std::nullopt;
  AmaxFold fold;
  for (int in : group.inputs) fold.product_group = std::max(fold.product_group, written_at_[in]);
  if (fold.product_group < 0 || !product_of(fold.product_group)) return std::nullopt;
  // The product's group with the reduction's members but the amax's own.
  const FusionGroup& product = plan_.groups[static_cast<size_t>(fold.product_group)];
  FusionGroup& merged = fold.merged;
  merged.id = product.id;
  merged.kind = GroupKind::kGemm;
  std::vector<bool> in_merged(g_.num_nodes(), false);
  for (int id : product.nodes) in_merged[id] = true;
  for (int id : group.nodes)
    if (!amax_op(id)) in_merged[id] = true;
  for (int id = 0; id < g_.num_nodes(); ++id) {
    if (!in_merged[id]) continue;
    merged.nodes.push_back(id);
    for (int in : g_.node(id).inputs)
      if (!in_merged[in]) merged.inputs.push_back(in);
    if (graph_output_[id] || std::any_of(users_[id].begin(), users_[id].end(), [&](int u) { return !in_merged[u]; })) merged.outputs.push_back(id);
  }
  std::sort(merged.inputs.begin(), merged.inputs.end());
  merged.inputs.erase(std::unique(merged.inputs.begin(), merged.inputs.end()), merged.inputs.end());
  if (const GroupClassification c = ClassifyGroup(g_, merged.nodes); c.kind != GroupKind::kGemm || !c.decision.CanFuse()) return std::nullopt;
  StatusOr<GemmTemplateKernel> lowered = LowerGemmTemplate(g_, merged, SplitGemmGroup(g_, merged), inlined_, tf32_, symbolic_);
  if (!lowered.ok() || !AmaxFoldable(*lowered, amax->value).ok()) return std::nullopt;
  // u stored still where the graph or a reader beyond the kernel takes it.
  const bool keep_stored = graph_output_[amax->value] || std::any_of(users_[amax->value].begin(), users_[amax->value].end(), [&](int u) {
                             return !in_merged[u] && !amax_op(u);
                           });
  fold.folded = FoldAmax(std::move(*lowered), *amax, g_.node(amax->output).dtype, keep_stored);
  return fold;
}

}  // namespace tilefuse

#include "passes/fold_constants.h"

#include <vector>

#include "backend/cpu/interpreter.h"
#include "passes/rewriter.h"

namespace tilefuse {

namespace {

bool IsFoldable(const Node& node) {
  return node.info().kind != OpKind::Source && node.op != OpCode::kRandomUniform;
}

// The folded values of `node`'s inputs, or an empty vector when one is not constant.
std::vector<const Tensor*> ConstantInputs(GraphRewriter& rewriter, const Node& node) {
  std::vector<const Tensor*> values;
  for (Value v : rewriter.MapInputs(node)) {
    const Node& input = rewriter.builder().node(v);
    if (input.op != OpCode::kConstant) return {};
    values.push_back(input.attrs.value.get());
  }
  return values;
}

bool IsLargeExpansion(const Node& node, const std::vector<const Tensor*>& inputs) {
  int64_t input_elements = 0;
  for (const Tensor* t : inputs) input_elements += t->num_elements();
  int64_t result_elements = NumElements(node.shape);
  return result_elements > kMaxFoldedExpansionElements && result_elements > input_elements;
}

}  // namespace

StatusOr<Graph> FoldConstants(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    if (!IsFoldable(node) || !rewriter.builder().ok()) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<const Tensor*> inputs = ConstantInputs(rewriter, node);
    bool all_constant = inputs.size() == node.inputs.size();
    if (!all_constant || IsLargeExpansion(node, inputs)) {
      rewriter.CopyNode(node);
      continue;
    }
    StatusOr<Tensor> value = EvaluateNode(node, inputs);
    if (!value.ok()) return value.status().WithContext("constant folding " + NodeLabel(node));
    rewriter.ReplaceWithConstant(node, std::move(value).value());
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

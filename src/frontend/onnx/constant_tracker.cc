#include "frontend/onnx/constant_tracker.h"

#include <vector>

#include "reference/interpreter.h"

namespace tilefuse::onnx_import {

namespace {
// Shape-like values are tiny; weights are not. Folding stays within these bounds so
// that import never copies a large weight (constant folding in passes/ does that).
constexpr int64_t kMaxFoldedElements = 1 << 12;
constexpr int64_t kMaxFoldInputElements = 1 << 16;
}  // namespace

const Tensor* ConstantTracker::Find(const GraphBuilder& builder, Value v) const {
  if (!v.valid() || v.id >= builder.graph().num_nodes()) return nullptr;
  const Node& node = builder.node(v);
  if (node.op == OpCode::kConstant) return node.attrs.value.get();
  auto it = folded_.find(v.id);
  return it == folded_.end() ? nullptr : it->second.get();
}

void ConstantTracker::FoldNewNodes(const GraphBuilder& builder, int first_new_node) {
  const Graph& graph = builder.graph();
  for (int id = first_new_node; id < graph.num_nodes(); ++id) {
    const Node& node = graph.node(id);
    OpKind kind = node.info().kind;
    if (kind == OpKind::Source || node.op == OpCode::kRandomUniform) continue;
    if (NumElements(node.shape) > kMaxFoldedElements) continue;
    std::vector<const Tensor*> inputs;
    int64_t input_elements = 0;
    for (int input : node.inputs) {
      const Tensor* value = Find(builder, Value{input});
      if (!value) break;
      inputs.push_back(value);
      input_elements += value->num_elements();
    }
    if (inputs.size() != node.inputs.size() || input_elements > kMaxFoldInputElements) continue;
    StatusOr<Tensor> result = EvaluateNode(node, inputs);
    // A node the interpreter cannot evaluate simply stays unknown; the handler that
    // needs its value reports that.
    if (result.ok()) folded_[id] = std::make_shared<const Tensor>(std::move(result).value());
  }
}

}  // namespace tilefuse::onnx_import

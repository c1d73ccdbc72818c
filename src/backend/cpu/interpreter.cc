// The driver of the reference interpreter: validates inputs, walks the graph in id
// (= topological) order, dispatches each node to its op family's kernel, rounds the
// result to the node's dtype, and frees every value after its last use.
#include "backend/cpu/interpreter.h"

#include <fmt/format.h>

#include "backend/cpu/interpreter_kernels.h"
#include "support/check.h"

namespace tilefuse {

using interpreter::Operand;
using interpreter::Values;

namespace {

std::string TypeString(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

Status Dispatch(const Node& node, const std::vector<Operand>& in, Values& out) {
  switch (node.info().kind) {
    case OpKind::Pointwise: return interpreter::ComputePointwise(node, in, out);
    case OpKind::Broadcast:
    case OpKind::View: return interpreter::ComputeView(node, in, out);
    case OpKind::Reduction: return interpreter::ComputeReduction(node, in, out);
    case OpKind::Contraction: return interpreter::ComputeMatMul(node, in, out);
    case OpKind::Opaque: return interpreter::ComputeWindow(node, in, out);
    case OpKind::Composite: return interpreter::ComputeComposite(node, in, out);
    case OpKind::Source: break;
  }
  TF_UNREACHABLE("sources are not computed by Dispatch");
  return Status::Ok();
}

// Runs one non-source node: its kernel, then rounding on store. Views and broadcasts
// only move values that are already rounded to the same dtype, so they skip rounding.
StatusOr<Values> ComputeNode(const Node& node, const std::vector<Operand>& in) {
  Values out(static_cast<size_t>(NumElements(node.shape)));
  Status status = Dispatch(node, in, out);
  if (!status.ok())
    return status.WithContext(fmt::format("node '{}' ({})", node.name, OpName(node.op)));
  OpKind kind = node.info().kind;
  if (node.dtype != DType::kF64 && kind != OpKind::View && kind != OpKind::Broadcast)
    for (double& v : out) v = RoundToDType(v, node.dtype);
  return out;
}

Status ValidateInputs(const Graph& graph, const std::vector<Tensor>& inputs) {
  if (inputs.size() != graph.inputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs, got {}", graph.inputs().size(), inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& param = graph.node(graph.inputs()[i]);
    const Tensor& t = inputs[i];
    if (t.dtype() != param.dtype || t.shape() != param.shape)
      return InvalidArgument(fmt::format("input '{}' expects {}, got {}", param.name,
                                         TypeString(param.dtype, param.shape), TypeString(t.dtype(), t.shape())));
  }
  return Status::Ok();
}

// How many more times each node's value will be read: once per use by a live node,
// plus a pin for graph outputs (never released). Nodes no output depends on stay at
// zero and are skipped.
std::vector<int> CountRemainingUses(const Graph& graph, std::vector<bool>& live) {
  std::vector<int> uses(graph.num_nodes(), 0);
  live.assign(graph.num_nodes(), false);
  for (const Graph::Output& output : graph.outputs()) {
    live[output.node] = true;
    ++uses[output.node];
  }
  for (int id = graph.num_nodes() - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (int input : graph.node(id).inputs) {
      live[input] = true;
      ++uses[input];
    }
  }
  return uses;
}

}  // namespace

StatusOr<std::vector<Tensor>> RunReference(const Graph& graph, const std::vector<Tensor>& inputs) {
  RETURN_IF_ERROR(ValidateInputs(graph, inputs));
  std::vector<bool> live;
  std::vector<int> uses = CountRemainingUses(graph, live);
  std::vector<Values> values(graph.num_nodes());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (live[graph.inputs()[i]]) values[graph.inputs()[i]] = inputs[i].ToDoubles();

  std::vector<Operand> operands;
  for (const Node& node : graph.nodes()) {
    if (!live[node.id] || node.op == OpCode::kParameter) continue;
    if (node.op == OpCode::kConstant) {
      values[node.id] = node.attrs.value->ToDoubles();
      continue;
    }
    operands.clear();
    for (int input : node.inputs) {
      const Node& in = graph.node(input);
      operands.push_back({&values[input], &in.shape, in.dtype});
    }
    ASSIGN_OR_RETURN(values[node.id], ComputeNode(node, operands));
    for (int input : node.inputs)
      if (--uses[input] == 0) Values().swap(values[input]);
  }

  std::vector<Tensor> outputs;
  for (const Graph::Output& output : graph.outputs()) {
    const Node& node = graph.node(output.node);
    outputs.push_back(Tensor::FromDoubles(node.dtype, node.shape, values[output.node]));
  }
  return outputs;
}

StatusOr<Tensor> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs) {
  if (node.op == OpCode::kParameter) return InvalidArgument(fmt::format("cannot evaluate parameter '{}'", node.name));
  if (node.op == OpCode::kConstant) return *node.attrs.value;
  if (inputs.size() != node.inputs.size())
    return InvalidArgument(fmt::format("node '{}' ({}) has {} inputs, given {}", node.name, OpName(node.op),
                                       node.inputs.size(), inputs.size()));
  std::vector<Values> input_values;
  input_values.reserve(inputs.size());
  for (const Tensor* t : inputs) input_values.push_back(t->ToDoubles());
  std::vector<Operand> operands;
  for (size_t i = 0; i < inputs.size(); ++i)
    operands.push_back({&input_values[i], &inputs[i]->shape(), inputs[i]->dtype()});
  ASSIGN_OR_RETURN(Values out, ComputeNode(node, operands));
  return Tensor::FromDoubles(node.dtype, node.shape, out);
}

}  // namespace tilefuse

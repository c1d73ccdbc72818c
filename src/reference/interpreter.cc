// The driver of the reference interpreter: validates inputs, walks the graph in id
// (= topological) order, dispatches each node to its op family's kernel, rounds the
// result to the node's dtype, and frees every value after its last use.
#include "reference/interpreter.h"

#include <cmath>
#include <fmt/format.h>

#include "reference/interpreter_kernels.h"
#include "support/check.h"
#include "support/host_memory.h"

namespace tilefuse {

using interpreter::Operand;
using interpreter::Values;

namespace {

std::string TypeString(DType dtype, const Shape& shape) {
  return fmt::format("{}{}", DTypeName(dtype), ShapeToString(shape));
}

Status Dispatch(const Node& node, const std::vector<Operand>& in, Values& out, bool accumulate_in_dtype) {
  switch (node.info().kind) {
    case OpKind::Pointwise: return interpreter::ComputePointwise(node, in, out);
    case OpKind::Broadcast:
    case OpKind::View: return interpreter::ComputeView(node, in, out);
    case OpKind::Reduction: return interpreter::ComputeReduction(node, in, out, accumulate_in_dtype);
    case OpKind::Contraction: return interpreter::ComputeMatMul(node, in, out, accumulate_in_dtype);
    case OpKind::Opaque:
      return IsAttentionGrad(node.op) ? interpreter::ComputeAttentionGrad(node, in, out) : interpreter::ComputeWindow(node, in, out);
    case OpKind::Composite: return interpreter::ComputeComposite(node, in, out);
    case OpKind::Source: break;
  }
  TF_UNREACHABLE("sources are not computed by Dispatch");
  return Status::Ok();
}

// A whole number of ulps in [-ulps, ulps] for element i of node `node` (splitmix64).
int PerturbationUlps(const ReferenceRounding& rounding, int node, int64_t i) {
  uint64_t z = rounding.seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(node) * 0x100000001b3ull + static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<int>(z % static_cast<uint64_t>(2 * rounding.ulps + 1)) - rounding.ulps;
}

// `rounded` moved by `ulps` of `dtype`, one neighbour at a time (each step rounds to the
// dtype, so it lands on the dtype's next representable value).
double MoveByUlps(double rounded, int ulps, DType dtype) {
  for (; ulps != 0; ulps += ulps > 0 ? -1 : 1) {
    double toward = ulps > 0 ? INFINITY : -INFINITY;
    double next = dtype == DType::kF32 ? static_cast<double>(std::nextafter(static_cast<float>(rounded), static_cast<float>(toward)))
                                       : RoundToDType(std::nextafter(rounded, toward), dtype);
    // Half types: step past the midpoint until the rounding moves.
    for (double step = std::nextafter(rounded, toward); next == rounded && std::isfinite(step); step = 2 * step - rounded)
      next = RoundToDType(step, dtype);
    if (!std::isfinite(next)) break;
    rounded = next;
  }
  return rounded;
}

// Runs one non-source node: its kernel, then rounding on store. Views and broadcasts
// only move values that are already rounded to the same dtype, so they skip rounding.
StatusOr<Values> ComputeNode(const Node& node, const std::vector<Operand>& in, const ReferenceRounding& rounding = {}) {
  Values out(static_cast<size_t>(NumElements(node.shape)));
  Status status = Dispatch(node, in, out, rounding.accumulate_in_dtype && IsFloat(node.dtype));
  if (!status.ok())
    return status.WithContext(fmt::format("node '{}' ({})", node.name, OpName(node.op)));
  OpKind kind = node.info().kind;
  if (node.dtype == DType::kF64 || kind == OpKind::View || kind == OpKind::Broadcast) return out;
  bool perturb = rounding.ulps > 0 && IsFloat(node.dtype);
  if (!perturb && !rounding.accumulate_in_dtype) {
    for (double& v : out) v = RoundToDType(v, node.dtype);
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    double exact = out[i];
    out[i] = RoundToDType(exact, node.dtype);
    if (perturb && out[i] != exact && std::isfinite(out[i]))
      out[i] = MoveByUlps(out[i], PerturbationUlps(rounding, node.id, static_cast<int64_t>(i)), node.dtype);
  }
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
  return RunReference(graph, inputs, ReferenceRounding{});
}

StatusOr<std::vector<Tensor>> RunReference(const Graph& graph, const std::vector<Tensor>& inputs,
                                           const ReferenceRounding& rounding) {
  RETURN_IF_ERROR(ValidateInputs(graph, inputs));
  std::vector<bool> live;
  std::vector<int> uses = CountRemainingUses(graph, live);
  std::vector<Values> values(graph.num_nodes());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (live[graph.inputs()[i]]) values[graph.inputs()[i]] = inputs[i].ToDoubles();

  // Values are doubles: refused before a node's would pass the host's memory.
  int64_t live_bytes = 0;
  for (int id : graph.inputs()) live_bytes += static_cast<int64_t>(values[id].size() * sizeof(double));
  std::vector<Operand> operands;
  for (const Node& node : graph.nodes()) {
    if (!live[node.id] || node.op == OpCode::kParameter) continue;
    int64_t bytes = SaturatingBytes(NumElements(node.shape), sizeof(double));
    RETURN_IF_ERROR(CheckHostMemory(bytes > INT64_MAX - live_bytes ? INT64_MAX : live_bytes + bytes,
                                    fmt::format("the reference interpreter's value of node %{} '{}' ({}) {} (f64, with the {:.2f} GiB "
                                                "it holds already)",
                                                node.id, node.name, OpName(node.op), TypeString(node.dtype, node.shape),
                                                static_cast<double>(live_bytes) / (1ll << 30))));
    live_bytes += bytes;
    if (node.op == OpCode::kConstant) {
      values[node.id] = node.attrs.value->ToDoubles();
      continue;
    }
    operands.clear();
    for (int input : node.inputs) {
      const Node& in = graph.node(input);
      operands.push_back({&values[input], &in.shape, in.dtype});
    }
    ASSIGN_OR_RETURN(values[node.id], ComputeNode(node, operands, rounding));
    for (int input : node.inputs)
      if (--uses[input] == 0) {
        live_bytes -= static_cast<int64_t>(values[input].size() * sizeof(double));
        Values().swap(values[input]);
      }
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

#include "ir/verifier.h"

#include <fmt/format.h>
#include <set>

#include "ir/shape_inference.h"

namespace tilefuse {

namespace {
std::string NodeLabel(const Node& n) {
  return fmt::format("%{} ({}{})", n.id, OpName(n.op), n.name.empty() ? "" : ", '" + n.name + "'");
}
}  // namespace

Status VerifyGraph(const Graph& graph) {
  std::set<std::string> input_names;
  for (const Node& n : graph.nodes()) {
    for (int input : n.inputs)
      if (input < 0 || input >= n.id)
        return InvalidArgument(fmt::format("{} uses %{} before its definition", NodeLabel(n), input));
    Node inferred = n;
    Status status = InferNodeType(graph, inferred);
    if (!status.ok()) return status.WithContext(NodeLabel(n));
    if (inferred.dtype != n.dtype || inferred.shape != n.shape)
      return InvalidArgument(fmt::format("{} is declared {} {} but infers to {} {}", NodeLabel(n), DTypeName(n.dtype),
                                         ShapeToString(n.shape), DTypeName(inferred.dtype), ShapeToString(inferred.shape)));
    if (n.op == OpCode::kParameter && !input_names.insert(n.name).second)
      return InvalidArgument(fmt::format("two graph inputs named '{}'", n.name));
  }
  if (graph.outputs().empty()) return InvalidArgument("the graph has no outputs");
  std::set<std::string> output_names;
  for (const Graph::Output& out : graph.outputs()) {
    if (out.node < 0 || out.node >= graph.num_nodes())
      return InvalidArgument(fmt::format("output '{}' names an undefined value", out.name));
    if (!output_names.insert(out.name).second) return InvalidArgument(fmt::format("two graph outputs named '{}'", out.name));
  }
  return Status::Ok();
}

}  // namespace tilefuse

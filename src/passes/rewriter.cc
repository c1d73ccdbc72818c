#include "passes/rewriter.h"

#include <fmt/format.h>

#include "support/check.h"

namespace tilefuse {

std::string NodeLabel(const Node& node) {
  std::string name = node.name.empty() ? "" : fmt::format(", '{}'", node.name);
  return fmt::format("%{} ({}{})", node.id, OpName(node.op), name);
}

GraphRewriter::GraphRewriter(const Graph& source) : source_(source), map_(source.num_nodes()) {}

std::vector<Value> GraphRewriter::MapInputs(const Node& old) const {
  std::vector<Value> inputs;
  inputs.reserve(old.inputs.size());
  for (int input : old.inputs) {
    // Ids are topological, so an input is always rewritten before its users (unless
    // the builder already failed; then every later call is a no-op anyway).
    TF_CHECK_MSG(IsMapped(input) || !builder_.ok(), "a pass dropped a node that is still used");
    inputs.push_back(Map(input));
  }
  return inputs;
}

void GraphRewriter::SetLocation(const Node& old) {
  NoteFailure();
  location_ = &old;
  builder_.SetLocation("", old.name);
}

void GraphRewriter::NoteFailure() {
  if (!builder_.ok() && failure_context_.empty() && location_ != nullptr) failure_context_ = NodeLabel(*location_);
}

Value GraphRewriter::CopyNode(const Node& old) {
  SetLocation(old);
  Value v = builder_.AddNode(old.op, MapInputs(old), old.attrs);
  SetMap(old.id, v);
  return v;
}

Value GraphRewriter::ReplaceWithConstant(const Node& old, Tensor value) {
  SetLocation(old);
  Value v = builder_.Constant(std::move(value));
  SetMap(old.id, v);
  return v;
}

StatusOr<Graph> GraphRewriter::Finish() {
  NoteFailure();
  if (!builder_.ok())
    return failure_context_.empty() ? builder_.status() : builder_.status().WithContext(failure_context_);
  builder_.SetLocation("", "");
  for (const Graph::Output& out : source_.outputs()) {
    TF_CHECK_MSG(IsMapped(out.node), "a pass dropped a graph output");
    builder_.Output(Map(out.node), out.name);
  }
  ASSIGN_OR_RETURN(Graph built, builder_.Build());
  built.set_symbolic_inputs(source_.symbolic_inputs());
  return built;
}

StatusOr<Graph> CopyGraph(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) rewriter.CopyNode(node);
  return rewriter.Finish();
}

}  // namespace tilefuse

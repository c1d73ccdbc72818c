#include "passes/unshare_reshapes.h"

#include <functional>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

bool IsReshapeOrBroadcast(const Node& n) { return n.op == OpCode::kReshape || n.op == OpCode::kBroadcast; }

}  // namespace

StatusOr<Graph> UnshareReshapes(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  // Reshapes and broadcasts, one over another, of a value in memory.
  std::function<bool(int)> view_of_memory = [&](int id) {
    const Node& n = graph.node(id);
    if (!IsReshapeOrBroadcast(n)) return false;
    const Node& source = graph.node(n.inputs[0]);
    if (IsReshapeOrBroadcast(source)) return view_of_memory(source.id);
    return source.info().kind != OpKind::View && source.info().kind != OpKind::Broadcast;
  };
  auto shared_view = [&](int id) { return users[id].size() >= 2 && view_of_memory(id); };
  GraphRewriter rewriter(graph);
  // A reader's own copy of the views down to the value in memory.
  std::function<Value(int)> own_copy = [&](int id) {
    const Node& view = graph.node(id);
    if (!IsReshapeOrBroadcast(view)) return rewriter.Map(id);
    const Value source = own_copy(view.inputs[0]);
    rewriter.SetLocation(view);
    return rewriter.builder().AddNode(view.op, {source}, view.attrs);
  };
  for (const Node& node : graph.nodes()) {
    bool reads_one = false;
    // An opaque op reads its operands from memory, stored: copies would each be stored (the
    // three gradients of an attention backward call, one step, would read three copies).
    if (node.info().kind != OpKind::Opaque)
      for (int input : node.inputs) reads_one |= shared_view(input);
    if (!reads_one) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (shared_view(node.inputs[i])) inputs[i] = own_copy(node.inputs[i]);
    rewriter.SetLocation(node);
    rewriter.SetMap(node.id, rewriter.builder().AddNode(node.op, std::move(inputs), node.attrs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

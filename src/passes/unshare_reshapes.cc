#include "passes/unshare_reshapes.h"

#include "passes/rewriter.h"

namespace tilefuse {

StatusOr<Graph> UnshareReshapes(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  auto shared_reshape = [&](int id) {
    const Node& n = graph.node(id);
    if (n.op != OpCode::kReshape || users[id].size() < 2) return false;
    const OpKind source = graph.node(n.inputs[0]).info().kind;
    return source != OpKind::View && source != OpKind::Broadcast;
  };
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    bool reads_one = false;
    for (int input : node.inputs) reads_one |= shared_reshape(input);
    if (!reads_one) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!shared_reshape(node.inputs[i])) continue;
      const Node& view = graph.node(node.inputs[i]);
      rewriter.SetLocation(view);
      inputs[i] = rewriter.builder().AddNode(OpCode::kReshape, {rewriter.Map(view.inputs[0])}, view.attrs);
    }
    rewriter.SetLocation(node);
    rewriter.SetMap(node.id, rewriter.builder().AddNode(node.op, std::move(inputs), node.attrs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

#include "passes/unshare_window_views.h"

#include "passes/rewriter.h"

namespace tilefuse {

StatusOr<Graph> UnshareWindowViews(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  auto shared_transpose = [&](int id) { return graph.node(id).op == OpCode::kTranspose && users[id].size() > 1; };
  GraphRewriter rewriter(graph);
  // The original of a transpose only windows read is left unused, for DCE.
  for (const Node& node : graph.nodes()) {
    if (node.op != OpCode::kWindow || !shared_transpose(node.inputs[0])) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node& view = graph.node(node.inputs[0]);
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(view);
    inputs[0] = rewriter.builder().AddNode(OpCode::kTranspose, {rewriter.Map(view.inputs[0])}, view.attrs);
    rewriter.SetLocation(node);
    rewriter.SetMap(node.id, rewriter.builder().AddNode(OpCode::kWindow, std::move(inputs), node.attrs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

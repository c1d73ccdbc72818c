#include "passes/dce.h"

#include <vector>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {
// Ids are topological, so one backward sweep from the outputs marks every live node.
std::vector<bool> MarkLive(const Graph& graph) {
  std::vector<bool> live(graph.num_nodes(), false);
  for (const Graph::Output& out : graph.outputs()) live[out.node] = true;
  for (int id = graph.num_nodes() - 1; id >= 0; --id) {
    const Node& node = graph.node(id);
    if (node.op == OpCode::kParameter) live[id] = true;
    if (!live[id]) continue;
    for (int input : node.inputs) live[input] = true;
  }
  return live;
}
}  // namespace

StatusOr<Graph> EliminateDeadCode(const Graph& graph) {
  std::vector<bool> live = MarkLive(graph);
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes())
    if (live[node.id]) rewriter.CopyNode(node);
  return rewriter.Finish();
}

}  // namespace tilefuse

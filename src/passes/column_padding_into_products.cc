#include "passes/column_padding_into_products.h"

#include <algorithm>

#include "ir/zeros.h"
#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// The chain concat → reshape* → matmul that `concat` pads, outermost first, where every link
// but the concat has no other reader and keeps the product's last dim; empty where `concat`
// is no such padding.
std::vector<int> PaddedProductChain(const Graph& g, const Node& concat, const std::vector<std::vector<int>>& users,
                                    const std::vector<bool>& is_output) {
  if (concat.op != OpCode::kConcat || concat.inputs.size() != 2 || concat.attrs.axis != concat.rank() - 1) return {};
  if (!IsZeros(g, concat.inputs[1])) return {};
  std::vector<int> chain;
  for (int id = concat.inputs[0];; id = g.node(id).inputs[0]) {
    const Node& n = g.node(id);
    if (users[id].size() != 1 || is_output[id] || n.shape.empty() || n.shape.back() != g.node(concat.inputs[0]).shape.back()) return {};
    chain.push_back(id);
    if (n.op == OpCode::kMatMul) break;
    if (n.op != OpCode::kReshape) return {};
  }
  const Node& product = g.node(chain.back());
  if (g.node(product.inputs[1]).rank() != 2) return {};  // a weight shared by every row
  if (g.node(concat.inputs[1]).shape.back() == 0) return {};
  return chain;
}

}  // namespace

StatusOr<Graph> MoveColumnPaddingIntoProducts(const Graph& graph) {
  const std::vector<std::vector<int>> users = graph.ComputeUsers();
  std::vector<bool> is_output(graph.num_nodes(), false);
  for (const Graph::Output& o : graph.outputs()) is_output[o.node] = true;
  // concat id -> its chain; chain members are rebuilt at their concat.
  std::vector<std::vector<int>> chains(graph.num_nodes());
  std::vector<bool> in_chain(graph.num_nodes(), false);
  for (const Node& node : graph.nodes()) {
    chains[node.id] = PaddedProductChain(graph, node, users, is_output);
    for (int id : chains[node.id]) in_chain[id] = true;
  }
  GraphRewriter rewriter(graph);
  GraphBuilder& b = rewriter.builder();
  for (const Node& node : graph.nodes()) {
    if (in_chain[node.id]) continue;
    const std::vector<int>& chain = chains[node.id];
    if (chain.empty()) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node& product = graph.node(chain.back());
    const Node& weight = graph.node(product.inputs[1]);
    const int64_t columns = node.shape.back(), extra = columns - weight.shape[1];
    rewriter.SetLocation(product);
    Value wide;
    if (weight.op == OpCode::kTranspose && weight.attrs.perm == std::vector<int64_t>{1, 0}) {  // wᵀ: w [N][K] gets zero rows
      Value w = rewriter.Map(weight.inputs[0]);
      Value zeros = b.BroadcastTo(b.Scalar(0.0, weight.dtype), {extra, weight.shape[0]});
      wide = b.Transpose(b.Concat({w, zeros}, 0), {1, 0});
    } else {
      Value zeros = b.BroadcastTo(b.Scalar(0.0, weight.dtype), {weight.shape[0], extra});
      wide = b.Concat({rewriter.Map(weight.id), zeros}, 1);
    }
    Value value = b.MatMul(rewriter.Map(product.inputs[0]), wide, product.attrs.tf32);
    for (auto it = chain.rbegin() + 1; it != chain.rend(); ++it) {
      Shape shape = graph.node(*it).shape;
      shape.back() = columns;
      rewriter.SetLocation(graph.node(*it));
      value = b.Reshape(value, shape);
    }
    rewriter.SetLocation(node);
    rewriter.SetMap(node.id, value);
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

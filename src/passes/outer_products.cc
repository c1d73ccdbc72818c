#include "passes/outer_products.h"

#include "passes/rewriter.h"
#include "passes/softmax_reads.h"

namespace tilefuse {

StatusOr<Graph> RewriteOuterProducts(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    // Attention's P·V stays: over a single key it is an outer product, and the attention
    // template takes the whole pattern (a decode step's first token over a cache of one).
    if (node.op != OpCode::kMatMul || graph.node(node.inputs[0]).shape.back() != 1 || ReadsSoftmax(graph, node.inputs[0])) {
      rewriter.CopyNode(node);
      continue;
    }
    GraphBuilder& b = rewriter.builder();
    rewriter.SetLocation(node);
    // 8-bit float operands: a matmul of them returns f32 (ir/shape_inference.cc), so does this.
    Value a = b.BroadcastTo(b.Cast(rewriter.Map(node.inputs[0]), node.dtype), node.shape);
    Value w = b.BroadcastTo(b.Cast(rewriter.Map(node.inputs[1]), node.dtype), node.shape);
    rewriter.SetMap(node.id, b.Mul(a, w));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

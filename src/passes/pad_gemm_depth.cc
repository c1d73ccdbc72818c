#include "passes/pad_gemm_depth.h"

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

constexpr int64_t kAlignmentBytes = 16;

// The K that product `mm` is padded to, or 0 where it stays as it is.
int64_t PaddedDepth(const Graph& g, const Node& mm) {
  if (mm.op != OpCode::kMatMul) return 0;
  const Node &a = g.node(mm.inputs[0]), &b = g.node(mm.inputs[1]);
  if (a.rank() < 2 || b.rank() < 2) return 0;  // a matrix-vector product: no tiles to feed
  const int64_t k = a.shape.back();
  const int64_t element = static_cast<int64_t>(DTypeSize(a.dtype));
  if ((k * element) % kAlignmentBytes == 0 || kAlignmentBytes % element != 0) return 0;
  if (NumElements(mm.shape) * k < kMinPaddedDepthMacs) return 0;
  const int64_t per_row = kAlignmentBytes / element;
  return (k + per_row - 1) / per_row * per_row;
}

// `x` with `extra` zeros appended along `axis`.
Value AppendZeros(GraphBuilder& b, Value x, int axis, int64_t extra) {
  Shape zeros_shape = b.shape(x);
  zeros_shape[axis] = extra;
  Value zeros = b.BroadcastTo(b.Scalar(0.0, b.dtype(x)), zeros_shape);
  return b.Concat({x, zeros}, axis);
}

}  // namespace

StatusOr<Graph> PadGemmDepth(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    const int64_t padded = PaddedDepth(graph, node);
    if (padded == 0) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node &a = graph.node(node.inputs[0]), &b = graph.node(node.inputs[1]);
    const int64_t extra = padded - a.shape.back();
    GraphBuilder& builder = rewriter.builder();
    rewriter.SetLocation(node);
    Value wide_a = AppendZeros(builder, rewriter.Map(a.id), a.rank() - 1, extra);
    Value wide_b = AppendZeros(builder, rewriter.Map(b.id), b.rank() - 2, extra);
    rewriter.SetMap(node.id, builder.MatMul(wide_a, wide_b));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

#include "passes/pad_gemm_columns.h"

#include <cstring>
#include <string>

#include "passes/derived_constants.h"
#include "passes/rewriter.h"

namespace tilefuse {

namespace {

constexpr int64_t kAlignmentBytes = 16;

// The columns `b` (a 2-D constant) is padded to, or 0 where it stays as it is.
int64_t PaddedColumns(const Node& b) {
  if (b.op != OpCode::kConstant || b.rank() != 2 || !b.attrs.value) return 0;
  const int64_t columns = b.shape[1];
  const int64_t element = static_cast<int64_t>(DTypeSize(b.dtype));
  if (columns < kMinPaddedColumns || (columns * element) % kAlignmentBytes == 0 || kAlignmentBytes % element != 0) return 0;
  const int64_t per_row = kAlignmentBytes / element;
  return (columns + per_row - 1) / per_row * per_row;
}

// `b` [K, N] with zero columns after N, as bytes.
Tensor PadColumns(const Tensor& b, int64_t padded) {
  const int64_t rows = b.shape()[0], columns = b.shape()[1];
  const size_t element = DTypeSize(b.dtype());
  Tensor out(b.dtype(), {rows, padded});  // zero-filled
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * padded * element, b.data() + r * columns * element, columns * element);
  return out;
}

}  // namespace

StatusOr<Graph> PadGemmColumns(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    const int64_t padded = node.op == OpCode::kMatMul ? PaddedColumns(graph.node(node.inputs[1])) : 0;
    if (padded == 0) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node& b = graph.node(node.inputs[1]);
    GraphBuilder& builder = rewriter.builder();
    rewriter.SetLocation(b);
    const Tensor& w = *b.attrs.value;
    Value wide_b = builder.Constant(DerivedConstant(w, "pad columns to " + std::to_string(padded), [&] { return PadColumns(w, padded); }));
    rewriter.SetLocation(node);
    Value product = builder.MatMul(rewriter.Map(node.inputs[0]), wide_b, node.attrs.tf32);
    const int last = node.rank() - 1;
    rewriter.SetMap(node.id, builder.Slice(product, {0}, {b.shape[1]}, {last}, {1}));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

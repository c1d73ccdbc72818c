#include "passes/k_major_weights.h"

#include <algorithm>
#include <cstdint>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// Whether `b`, a product's right operand, is a [K][N] constant to store K-major: its K rows
// whole 16-byte units (TMA's rows of [N][K]), and the product one `options` names. (An f32
// weight with unaligned N rows is padded first, passes/pad_gemm_columns.h, and taken then.)
bool TakesKMajorCopy(const Node& b, const KMajorWeightsOptions& options) {
  if (b.op != OpCode::kConstant || b.rank() != 2 || !b.attrs.value) return false;
  const int64_t element = static_cast<int64_t>(DTypeSize(b.dtype));
  if (b.shape[0] * element % 16 != 0) return false;
  if (b.dtype == DType::kF32) return options.f32 && b.shape[1] * element % 16 == 0;
  if (b.dtype == DType::kBF16 || b.dtype == DType::kF16) return options.unaligned_half && b.shape[1] * element % 16 != 0;
  return false;
}

// `w` [K][N] as [N][K], in 32 × 32 tiles (the row-by-row walk strides a whole row per read).
template <class Element>
void TransposeInto(const Tensor& w, Tensor& out) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  const Element* in = reinterpret_cast<const Element*>(w.data());
  Element* to = reinterpret_cast<Element*>(out.data());
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) to[c * rows + r] = in[r * cols + c];
}

Tensor Transposed(const Tensor& w) {
  Tensor out(w.dtype(), {w.shape()[1], w.shape()[0]});
  if (DTypeSize(w.dtype()) == 4) TransposeInto<uint32_t>(w, out);
  else TransposeInto<uint16_t>(w, out);
  return out;
}

}  // namespace

StatusOr<Graph> StoreWeightsKMajor(const Graph& graph, const KMajorWeightsOptions& options) {
  GraphRewriter rewriter(graph);
  std::vector<int> k_major(graph.num_nodes(), -1);  // per constant: its transposed view, made once
  for (const Node& node : graph.nodes()) {
    if (node.op != OpCode::kMatMul || !TakesKMajorCopy(graph.node(node.inputs[1]), options)) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node& b = graph.node(node.inputs[1]);
    GraphBuilder& builder = rewriter.builder();
    if (k_major[b.id] < 0) {
      rewriter.SetLocation(b);
      k_major[b.id] = builder.Transpose(builder.Constant(Transposed(*b.attrs.value)), {1, 0}).id;
    }
    rewriter.SetLocation(node);
    rewriter.SetMap(node.id, builder.MatMul(rewriter.Map(node.inputs[0]), Value{k_major[b.id]}));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

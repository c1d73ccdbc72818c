#include "passes/k_major_weights.h"

#include <cstring>

#include "passes/rewriter.h"

namespace tilefuse {

namespace {

// Whether `b`, a product's right operand, is an f32 [K][N] constant whose rows TMA can read
// K-major (rows of K and of N whole 16-byte units, as the template needs).
bool TakesKMajorCopy(const Node& b) {
  return b.op == OpCode::kConstant && b.dtype == DType::kF32 && b.rank() == 2 && b.attrs.value && b.shape[0] % 4 == 0 &&
         b.shape[1] % 4 == 0;
}

// `w` [K][N] as [N][K], in 32 × 32 tiles (the row-by-row walk strides a whole row per read).
Tensor Transposed(const Tensor& w) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  Tensor out(DType::kF32, {cols, rows});
  const float* in = reinterpret_cast<const float*>(w.data());
  float* to = reinterpret_cast<float*>(out.data());
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile)
    for (int64_t c0 = 0; c0 < cols; c0 += kTile)
      for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c) to[c * rows + r] = in[r * cols + c];
  return out;
}

}  // namespace

StatusOr<Graph> StoreF32WeightsKMajor(const Graph& graph) {
  GraphRewriter rewriter(graph);
  std::vector<int> k_major(graph.num_nodes(), -1);  // per constant: its transposed view, made once
  for (const Node& node : graph.nodes()) {
    if (node.op != OpCode::kMatMul || node.dtype != DType::kF32 || !TakesKMajorCopy(graph.node(node.inputs[1]))) {
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

#include "passes/k_major_weights.h"

#include "passes/derived_constants.h"
#include "passes/rewriter.h"
#include "passes/transpose_tiles.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// Whether `b`, a product's right operand, is a [K][N] constant to store K-major.
bool TakesKMajorCopy(const Node& b, const KMajorWeightsOptions& options) {
  return b.op == OpCode::kConstant && b.rank() == 2 && b.attrs.value && StoresKMajor(b.dtype, b.shape, options);
}

// `w` [K][N] as [N][K].
Tensor Transposed(const Tensor& w) {
  Tensor out = Tensor::Uninitialized(w.dtype(), {w.shape()[1], w.shape()[0]});
  const bool moved = TransposeLastTwoDims(w, out, 1, w.shape()[0], w.shape()[1]);
  TF_CHECK_MSG(moved, "weights of 2 or 4 bytes an element");
  return out;
}

}  // namespace

// TMA reads [N][K] rows of K elements. (An f32 weight with unaligned N rows is padded first,
// passes/pad_gemm_columns.h, and taken then.)
bool StoresKMajor(DType dtype, const Shape& kn, const KMajorWeightsOptions& options) {
  if (kn.size() != 2) return false;
  const int64_t element = static_cast<int64_t>(DTypeSize(dtype));
  if (kn[0] * element % 16 != 0) return false;
  if (dtype == DType::kF32) return options.f32 && kn[1] * element % 16 == 0;
  if (IsFloat8(dtype) || dtype == DType::kI8) return options.eight_bit;
  if (IsHalf(dtype)) return options.unaligned_half && kn[1] * element % 16 != 0;
  return false;
}

StatusOr<Graph> StoreWeightsKMajor(const Graph& graph, const KMajorWeightsOptions& options) {
  GraphRewriter rewriter(graph);
  std::vector<int> k_major(graph.num_nodes(), -1);  // per constant: its transposed view, made once
  for (const Node& node : graph.nodes()) {
    const bool product = node.op == OpCode::kMatMul || node.op == OpCode::kBlockScaledMatMul;
    if (!product || !TakesKMajorCopy(graph.node(node.inputs[1]), options)) {
      rewriter.CopyNode(node);
      continue;
    }
    const Node& b = graph.node(node.inputs[1]);
    GraphBuilder& builder = rewriter.builder();
    if (k_major[b.id] < 0) {
      rewriter.SetLocation(b);
      const Tensor& w = *b.attrs.value;
      k_major[b.id] = builder.Transpose(builder.Constant(DerivedConstant(w, "k-major", [&] { return Transposed(w); })), {1, 0}).id;
    }
    rewriter.SetLocation(node);
    // The product as it was (its operands 2-D already: the builder made them so), B read K-major.
    std::vector<Value> inputs;
    for (int input : node.inputs) inputs.push_back(rewriter.Map(input));
    inputs[1] = Value{k_major[b.id]};
    rewriter.SetMap(node.id, builder.AddNode(node.op, std::move(inputs), node.attrs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

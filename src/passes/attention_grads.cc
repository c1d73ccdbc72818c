#include "passes/attention_grads.h"

#include <vector>

#include "passes/rewriter.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// The operands of one attention gradient, in the compute dtype.
struct AttentionOperands {
  Value dout, q, k, v, out, lse;
};

// Half types are computed in f32 (as the forward's softmax is), other floats as they are.
DType ComputeDType(DType dtype) { return IsHalf(dtype) ? DType::kF32 : dtype; }

// The last two axes swapped.
Value TransposeRows(GraphBuilder& b, Value x) { return b.Transpose(x, {0, 1, 3, 2}); }

// [B, Hk, N, c] → [B, Hk·group, N, c]: each key/value head repeated for its query heads.
Value RepeatHeads(GraphBuilder& b, Value x, int64_t group) {
  if (group == 1) return x;
  Shape s = b.shape(x);
  Value expanded = b.BroadcastTo(b.Unsqueeze(x, {2}), {s[0], s[1], group, s[2], s[3]});
  return b.Reshape(expanded, {s[0], s[1] * group, s[2], s[3]});
}

// [B, Hk·group, N, c] → [B, Hk, N, c]: the query heads of each group summed.
Value SumGroups(GraphBuilder& b, Value x, int64_t group) {
  if (group == 1) return x;
  Shape s = b.shape(x);
  Value grouped = b.Reshape(x, {s[0], s[1] / group, group, s[2], s[3]});
  return b.Reduce(OpCode::kReduceSum, grouped, {2}, /*keepdims=*/false);
}

// P [B, H, Nq, Nk] from k already repeated over the groups: 0 for the pairs causal hides.
Value Probabilities(GraphBuilder& b, const AttentionOperands& x, double scale, bool causal) {
  Value scores = b.MulScalar(b.MatMul(x.q, TransposeRows(b, x.k)), scale);
  Value p = b.Unary(OpCode::kExp, b.Sub(scores, b.Unsqueeze(x.lse, {3})));
  if (!causal) return p;
  const Shape s = b.shape(p);
  const Shape pairs = {s[2], s[3]};
  // Top-left alignment, as PyTorch's is_causal: key j is seen by query i when j <= i.
  Value visible = b.Binary(OpCode::kLessEqual, b.Iota(pairs, 1, DType::kI64), b.Iota(pairs, 0, DType::kI64));
  return b.Where(visible, p, b.Scalar(0, b.dtype(p)));
}

// dS = P·(dP − D), dP = dout·vᵀ and D the row sums of dout·out.
Value ScoreGradient(GraphBuilder& b, const AttentionOperands& x, Value p) {
  Value dp = b.MatMul(x.dout, TransposeRows(b, x.v));
  Value delta = b.Reduce(OpCode::kReduceSum, b.Mul(x.dout, x.out), {3}, /*keepdims=*/true);
  return b.Mul(p, b.Sub(dp, delta));
}

// One gradient over mapped inputs (dout, q, k, v, out, lse), in q's dtype.
Value AttentionGrad(GraphBuilder& b, const Node& node, const std::vector<Value>& inputs) {
  const DType dtype = b.dtype(inputs[1]);
  const DType compute = ComputeDType(dtype);
  const int64_t group = b.shape(inputs[1])[1] / b.shape(inputs[2])[1];
  AttentionOperands x{b.Cast(inputs[0], compute), b.Cast(inputs[1], compute),
                      RepeatHeads(b, b.Cast(inputs[2], compute), group),
                      RepeatHeads(b, b.Cast(inputs[3], compute), group),
                      b.Cast(inputs[4], compute), b.Cast(inputs[5], compute)};
  const double scale = node.attrs.scale;
  Value p = Probabilities(b, x, scale, node.attrs.causal);
  Value grad;
  switch (node.op) {
    case OpCode::kAttentionGradQ: grad = b.MulScalar(b.MatMul(ScoreGradient(b, x, p), x.k), scale); break;
    case OpCode::kAttentionGradK:
      grad = b.MulScalar(SumGroups(b, b.MatMul(TransposeRows(b, ScoreGradient(b, x, p)), x.q), group), scale);
      break;
    case OpCode::kAttentionGradV: grad = SumGroups(b, b.MatMul(TransposeRows(b, p), x.dout), group); break;
    default: TF_UNREACHABLE("not an attention gradient");
  }
  return b.Cast(grad, dtype);
}

}  // namespace

StatusOr<Graph> RewriteAttentionGrads(const Graph& graph, const std::function<bool(const Graph&, const Node&)>& keep) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    if (!IsAttentionGrad(node.op) || (keep && keep(graph, node))) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(node);
    if (!rewriter.builder().ok()) break;
    rewriter.SetMap(node.id, AttentionGrad(rewriter.builder(), node, inputs));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

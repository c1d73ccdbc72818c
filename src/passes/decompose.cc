#include "passes/decompose.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "passes/rewriter.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// Half types are computed in f32 (like PyTorch's upcast), other floats as they are.
Value Upcast(GraphBuilder& b, Value x) { return IsHalf(b.dtype(x)) ? b.Cast(x, DType::kF32) : x; }

std::vector<int64_t> AxesFrom(int64_t first, int rank) {
  std::vector<int64_t> axes;
  for (int64_t d = first; d < rank; ++d) axes.push_back(d);
  return axes;
}

Value Softmax(GraphBuilder& b, Value x, int64_t axis) {
  Value max = b.Reduce(OpCode::kReduceMax, x, {axis}, /*keepdims=*/true);
  Value e = b.Unary(OpCode::kExp, b.Sub(x, max));
  return b.Div(e, b.Reduce(OpCode::kReduceSum, e, {axis}, /*keepdims=*/true));
}

Value LogSoftmax(GraphBuilder& b, Value x, int64_t axis) {
  Value shifted = b.Sub(x, b.Reduce(OpCode::kReduceMax, x, {axis}, /*keepdims=*/true));
  Value sum = b.Reduce(OpCode::kReduceSum, b.Unary(OpCode::kExp, shifted), {axis}, /*keepdims=*/true);
  return b.Sub(shifted, b.Unary(OpCode::kLog, sum));
}

// inputs: x, scale, [bias], all already upcast.
Value LayerNorm(GraphBuilder& b, const std::vector<Value>& inputs, int64_t axis, double epsilon) {
  Value x = inputs[0];
  std::vector<int64_t> axes = AxesFrom(axis, b.rank(x));
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, axes, /*keepdims=*/true));
  Value variance = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), axes, /*keepdims=*/true);
  Value inv_std = b.Unary(OpCode::kRsqrt, b.AddScalar(variance, epsilon));
  Value y = b.Mul(b.Mul(centered, inv_std), inputs[1]);
  return inputs.size() > 2 ? b.Add(y, inputs[2]) : y;
}

Value Gelu(GraphBuilder& b, Value x, bool approximate_tanh) {
  Value half_x = b.MulScalar(x, 0.5);
  if (!approximate_tanh) {
    Value erf = b.Unary(OpCode::kErf, b.MulScalar(x, 1.0 / std::numbers::sqrt2));
    return b.Mul(half_x, b.AddScalar(erf, 1.0));
  }
  Value cube = b.Mul(b.Mul(x, x), x);
  Value inner = b.MulScalar(b.Add(x, b.MulScalar(cube, 0.044715)), std::sqrt(2.0 / std::numbers::pi));
  return b.Mul(half_x, b.AddScalar(b.Unary(OpCode::kTanh, inner), 1.0));
}

// Decomposes one composite over already-mapped inputs. A rank-0 input is viewed as
// [1] so that its reductions have an axis to reduce.
Value Decompose(GraphBuilder& b, const Node& node, std::vector<Value> inputs) {
  DType original = b.dtype(inputs[0]);
  Shape original_shape = b.shape(inputs[0]);
  for (Value& v : inputs) v = Upcast(b, v);
  if (original_shape.empty() && node.op != OpCode::kGelu) inputs[0] = b.Reshape(inputs[0], {1});
  const Attrs& a = node.attrs;
  Value y;
  switch (node.op) {
    case OpCode::kSoftmax: y = Softmax(b, inputs[0], a.axis); break;
    case OpCode::kLogSoftmax: y = LogSoftmax(b, inputs[0], a.axis); break;
    case OpCode::kLayerNorm: y = LayerNorm(b, inputs, a.axis, a.epsilon); break;
    case OpCode::kGelu: y = Gelu(b, inputs[0], a.approximate_tanh); break;
    default: TF_UNREACHABLE("a composite op without a decomposition");
  }
  return b.Cast(b.Reshape(y, original_shape), original);
}

}  // namespace

StatusOr<Graph> DecomposeComposites(const Graph& graph) {
  GraphRewriter rewriter(graph);
  for (const Node& node : graph.nodes()) {
    if (node.info().kind != OpKind::Composite) {
      rewriter.CopyNode(node);
      continue;
    }
    std::vector<Value> inputs = rewriter.MapInputs(node);
    rewriter.SetLocation(node);
    if (!rewriter.builder().ok()) break;
    rewriter.SetMap(node.id, Decompose(rewriter.builder(), node, std::move(inputs)));
  }
  return rewriter.Finish();
}

}  // namespace tilefuse

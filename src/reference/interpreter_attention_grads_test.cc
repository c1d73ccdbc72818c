// Attention's gradients in the reference interpreter, checked against something that
// shares no code with their kernel: central finite differences of the loss
// L = Σ dout ∘ attention(q, k, v), with attention built from primitives (matmul, scale,
// iota/where causal mask, softmax) and run by the interpreter in f64. The logsumexp and
// the output the gradient ops take come from that same forward graph.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct AttentionCase {
  const char* name;
  int64_t batch, heads, kv_heads, queries, keys, d, dv;
  bool causal;
  double scale;

  Shape q() const { return {batch, heads, queries, d}; }
  Shape k() const { return {batch, kv_heads, keys, d}; }
  Shape v() const { return {batch, kv_heads, keys, dv}; }
  Shape out() const { return {batch, heads, queries, dv}; }
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

// [B, Hk, N, c] → [B, Hk·group, N, c], each key/value head repeated for its query heads.
Value RepeatHeads(GraphBuilder& b, Value x, int64_t group) {
  Shape s = b.shape(x);
  Value expanded = b.BroadcastTo(b.Unsqueeze(x, {2}), {s[0], s[1], group, s[2], s[3]});
  return b.Reshape(expanded, {s[0], s[1] * group, s[2], s[3]});
}

// Inputs q, k, v, dout; outputs attention's out, the loss Σ dout ∘ out, and logsumexp.
Graph ForwardGraph(const AttentionCase& c) {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kF64, c.q());
  Value k = RepeatHeads(b, b.Parameter("k", DType::kF64, c.k()), c.heads / c.kv_heads);
  Value v = RepeatHeads(b, b.Parameter("v", DType::kF64, c.v()), c.heads / c.kv_heads);
  Value dout = b.Parameter("dout", DType::kF64, c.out());
  Value scores = b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), c.scale);
  if (c.causal) {  // top-left: key j seen by query i when j <= i
    Value rows = b.Iota({c.queries, c.keys}, 0, DType::kI64);
    Value cols = b.Iota({c.queries, c.keys}, 1, DType::kI64);
    Value visible = b.Binary(OpCode::kLessEqual, cols, rows);
    scores = b.Where(visible, scores, b.Scalar(-std::numeric_limits<double>::infinity(), DType::kF64));
  }
  Value out = b.MatMul(b.Softmax(scores, 3), v);
  b.Output(out, "out");
  b.Output(b.Reduce(OpCode::kReduceSum, b.Mul(dout, out), {}, /*keepdims=*/false), "loss");
  Value peak = b.Reduce(OpCode::kReduceMax, scores, {3}, /*keepdims=*/true);
  Value sum = b.Reduce(OpCode::kReduceSum, b.Unary(OpCode::kExp, b.Sub(scores, peak)), {3}, /*keepdims=*/true);
  b.Output(b.Reshape(b.Add(peak, b.Unary(OpCode::kLog, sum)), {c.batch, c.heads, c.queries}), "logsumexp");
  StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

// Inputs dout, q, k, v, out, logsumexp; outputs dQ, dK, dV.
Graph GradientGraph(const AttentionCase& c) {
  GraphBuilder b;
  Value dout = b.Parameter("dout", DType::kF64, c.out());
  Value q = b.Parameter("q", DType::kF64, c.q());
  Value k = b.Parameter("k", DType::kF64, c.k());
  Value v = b.Parameter("v", DType::kF64, c.v());
  Value out = b.Parameter("out", DType::kF64, c.out());
  Value lse = b.Parameter("logsumexp", DType::kF64, {c.batch, c.heads, c.queries});
  for (OpCode op : {OpCode::kAttentionGradQ, OpCode::kAttentionGradK, OpCode::kAttentionGradV})
    b.Output(b.AttentionGrad(op, dout, q, k, v, out, lse, c.scale, c.causal), std::string(OpName(op)));
  StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

struct Forward {
  Tensor out, logsumexp;
  double loss;
};

Forward RunForward(const Graph& forward, const std::vector<Tensor>& q_k_v_dout) {
  StatusOr<std::vector<Tensor>> result = RunReference(forward, q_k_v_dout);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) return {Tensor(), Tensor(), NAN};
  return {(*result)[0], (*result)[2], (*result)[1].GetDouble(0)};
}

// dQ, dK, dV from the gradient ops, given q, k, v, dout (out and logsumexp from the forward).
std::vector<Tensor> RunGradients(const AttentionCase& c, const std::vector<Tensor>& q_k_v_dout) {
  Forward f = RunForward(ForwardGraph(c), q_k_v_dout);
  StatusOr<std::vector<Tensor>> grads =
      RunReference(GradientGraph(c), {q_k_v_dout[3], q_k_v_dout[0], q_k_v_dout[1], q_k_v_dout[2], f.out, f.logsumexp});
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  return grads.ok() ? *grads : std::vector<Tensor>{};
}

std::vector<Tensor> RandomInputs(const AttentionCase& c, uint64_t seed) {
  return {Tensor::Random(DType::kF64, c.q(), seed), Tensor::Random(DType::kF64, c.k(), seed + 1),
          Tensor::Random(DType::kF64, c.v(), seed + 2), Tensor::Random(DType::kF64, c.out(), seed + 3)};
}

// Tensors share their bytes when copied: this one gets its own.
Tensor DeepCopy(const Tensor& t) { return Tensor::FromDoubles(t.dtype(), t.shape(), t.ToDoubles()); }

// ∂L/∂(input `which`: 0 q, 1 k, 2 v) by central differences.
Tensor FiniteDifferenceGradient(const Graph& forward, const std::vector<Tensor>& inputs, int which) {
  const double h = 1e-5;
  Tensor grad = Tensor::Uninitialized(DType::kF64, inputs[which].shape());
  std::vector<Tensor> moved = inputs;
  moved[which] = DeepCopy(inputs[which]);
  for (int64_t e = 0; e < grad.num_elements(); ++e) {
    const double x = inputs[which].GetDouble(e);
    moved[which].SetDouble(e, x + h);
    const double up = RunForward(forward, moved).loss;
    moved[which].SetDouble(e, x - h);
    const double down = RunForward(forward, moved).loss;
    moved[which].SetDouble(e, x);
    grad.SetDouble(e, (up - down) / (2 * h));
  }
  return grad;
}

class AttentionGradTest : public ::testing::TestWithParam<AttentionCase> {};

// Finite differences err by ~1e-10 here (h² truncation, roundoff ε·L/h); a wrong
// gradient by the gradient's own size.
TEST_P(AttentionGradTest, MatchesFiniteDifferencesOfTheForward) {
  const AttentionCase& c = GetParam();
  std::vector<Tensor> inputs = RandomInputs(c, 17);
  std::vector<Tensor> grads = RunGradients(c, inputs);
  ASSERT_EQ(grads.size(), 3u);
  Graph forward = ForwardGraph(c);
  const char* names[] = {"dQ", "dK", "dV"};
  for (int which = 0; which < 3; ++which) {
    Tensor expected = FiniteDifferenceGradient(forward, inputs, which);
    ASSERT_EQ(grads[which].shape(), expected.shape()) << names[which];
    double magnitude = 0;
    for (int64_t e = 0; e < expected.num_elements(); ++e) magnitude = std::max(magnitude, std::fabs(expected.GetDouble(e)));
    ASSERT_GT(magnitude, 1e-3) << names[which] << " vanishes: the check would be empty";
    for (int64_t e = 0; e < expected.num_elements(); ++e)
      EXPECT_NEAR(grads[which].GetDouble(e), expected.GetDouble(e), 1e-6 * magnitude) << names[which] << "[" << e << "]";
  }
}

const AttentionCase kCases[] = {
    {"plain", 2, 2, 2, 4, 4, 4, 4, false, 0.5},
    {"causal", 1, 2, 2, 4, 4, 4, 4, true, 0.5},
    {"causal_fewer_queries", 1, 2, 2, 3, 5, 4, 4, true, 0.7},
    {"causal_more_queries", 1, 2, 2, 5, 3, 4, 4, true, 0.7},
    {"grouped_query", 1, 4, 2, 3, 4, 4, 4, false, 0.5},
    {"grouped_query_causal", 2, 4, 2, 4, 3, 2, 3, true, 0.9},
    {"dv_larger_than_d", 1, 2, 1, 3, 4, 3, 5, false, 0.6},
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionGradTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return std::string(info.param.name); });

// Top-left causal always shows query i key 0, so no row is fully masked; what masking must
// get right is that masked pairs contribute nothing. Keys past the last query are seen by
// no query: their dK and dV are zero, and their k and v do not reach dQ.
TEST(AttentionGradMaskingTest, KeysNoQuerySeesGetNoGradientAndGiveNone) {
  const AttentionCase c{"", 1, 2, 2, 3, 5, 4, 4, true, 0.7};
  std::vector<Tensor> inputs = RandomInputs(c, 5);
  std::vector<Tensor> grads = RunGradients(c, inputs);
  ASSERT_EQ(grads.size(), 3u);
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t key = 3; key < 5; ++key)
      for (int64_t e = 0; e < 4; ++e) {
        const int64_t flat = (head * 5 + key) * 4 + e;
        EXPECT_EQ(grads[1].GetDouble(flat), 0.0) << "dK head " << head << " key " << key;
        EXPECT_EQ(grads[2].GetDouble(flat), 0.0) << "dV head " << head << " key " << key;
        inputs[1].SetDouble(flat, 100.0);  // a key every query would favour if it saw it
        inputs[2].SetDouble(flat, -50.0);
      }
  std::vector<Tensor> moved = RunGradients(c, inputs);
  ASSERT_EQ(moved.size(), 3u);
  for (int64_t e = 0; e < grads[0].num_elements(); ++e) EXPECT_EQ(moved[0].GetDouble(e), grads[0].GetDouble(e)) << "dQ " << e;
}

// With Nq = Nk the last key is seen by the last query alone: the other queries' rows of q,
// dout, out and logsumexp, whatever they hold, do not reach its dK and dV.
TEST(AttentionGradMaskingTest, TheLastKeyHearsOnlyTheLastQuery) {
  const AttentionCase c{"", 1, 1, 1, 4, 4, 3, 3, true, 0.5};
  Graph gradients = GradientGraph(c);
  std::vector<Tensor> inputs = {Tensor::Random(DType::kF64, c.out(), 1), Tensor::Random(DType::kF64, c.q(), 2),
                                Tensor::Random(DType::kF64, c.k(), 3),   Tensor::Random(DType::kF64, c.v(), 4),
                                Tensor::Random(DType::kF64, c.out(), 5), Tensor::Random(DType::kF64, {1, 1, 4}, 6)};
  auto before = RunReference(gradients, inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  for (int input : {0, 1, 4})  // dout, q, out: rows 0..2 of 4
    for (int64_t e = 0; e < 3 * 3; ++e) inputs[input].SetDouble(e, 3.0 - 0.25 * static_cast<double>(e));
  for (int64_t row = 0; row < 3; ++row) inputs[5].SetDouble(row, -2.0);
  auto after = RunReference(gradients, inputs);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  for (int grad : {1, 2}) {
    bool any_nonzero = false;
    for (int64_t e = 3 * 3; e < 4 * 3; ++e) {  // the last key's row
      EXPECT_EQ((*after)[grad].GetDouble(e), (*before)[grad].GetDouble(e)) << (grad == 1 ? "dK " : "dV ") << e;
      any_nonzero = any_nonzero || (*before)[grad].GetDouble(e) != 0;
    }
    EXPECT_TRUE(any_nonzero) << "the last key's gradient should not vanish";
    // The first key hears every query, so it must have moved.
    EXPECT_NE((*after)[grad].GetDouble(0), (*before)[grad].GetDouble(0));
  }
}

}  // namespace
}  // namespace tilefuse

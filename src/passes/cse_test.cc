#include "passes/cse.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

TEST(CseTest, MergesDuplicateExpNodes) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  b.SetLocation("", "first");
  Value e1 = b.Unary(OpCode::kExp, x);
  b.SetLocation("", "second");
  Value e2 = b.Unary(OpCode::kExp, x);
  b.Output(b.Add(e1, e2), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  ASSERT_EQ(CountOps(*graph, OpCode::kExp), 2);

  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(CountOps(*merged, OpCode::kExp), 1);
  const Node& add = merged->node(merged->outputs()[0].node);
  ASSERT_EQ(add.op, OpCode::kAdd);
  EXPECT_EQ(add.inputs[0], add.inputs[1]);
  EXPECT_EQ(merged->node(add.inputs[0]).name, "first");
}

TEST(CseTest, MergesTransitively) {
  // Once the two exps merge, the two negations of them are duplicates too.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  Value n1 = b.Unary(OpCode::kNeg, b.Unary(OpCode::kExp, x));
  Value n2 = b.Unary(OpCode::kNeg, b.Unary(OpCode::kExp, x));
  b.Output(b.Mul(n1, n2), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->num_nodes(), 4);  // x, exp, neg, mul
}

TEST(CseTest, KeepsRandomUniformWithDifferentSeeds) {
  GraphBuilder b;
  Value r1 = b.RandomUniform({8}, DType::kF32, 1);
  Value r2 = b.RandomUniform({8}, DType::kF32, 2);
  Value r3 = b.RandomUniform({8}, DType::kF32, 1);  // same stream as r1
  b.Output(b.Add(b.Add(r1, r2), r3), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(CountOps(*merged, OpCode::kRandomUniform), 2);
}

TEST(CseTest, NeverMergesParameters) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  Value y = b.Parameter("y", DType::kF32, {4});
  b.Output(b.Add(b.Unary(OpCode::kExp, x), b.Unary(OpCode::kExp, y)), "z");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->inputs().size(), 2u);
  EXPECT_EQ(CountOps(*merged, OpCode::kExp), 2);
}

TEST(CseTest, ComparesSmallConstantsByValue) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {});
  Value two_a = b.Scalar(2, DType::kF32);
  Value two_b = b.Scalar(2, DType::kF32);
  Value three = b.Scalar(3, DType::kF32);
  Value two_f64 = b.Scalar(2, DType::kF64);
  b.Output(b.Add(b.Add(b.Mul(x, two_a), b.Mul(x, two_b)), b.Mul(x, three)), "y");
  b.Output(two_f64, "two");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(CountOps(*merged, OpCode::kConstant), 3);  // 2.0f, 3.0f, 2.0 (f64)
  EXPECT_EQ(CountOps(*merged, OpCode::kMul), 2);
}

TEST(CseTest, DistinguishesAttributes) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 3});
  Value s0 = b.Reduce(OpCode::kReduceSum, x, {0}, true);
  Value s1 = b.Reduce(OpCode::kReduceSum, x, {1}, true);
  Value s1_again = b.Reduce(OpCode::kReduceSum, x, {1}, true);
  b.Output(s0, "a");
  b.Output(s1, "b");
  b.Output(s1_again, "c");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(CountOps(*merged, OpCode::kReduceSum), 2);
  EXPECT_EQ(merged->outputs()[1].node, merged->outputs()[2].node);
}

// Attention gradients of one set of operands under another scale or mask are other values.
TEST(CseTest, DistinguishesAttentionGradientsByScaleAndMask) {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kF32, {1, 1, 4, 8});
  Value lse = b.Parameter("lse", DType::kF32, {1, 1, 4});
  int i = 0;
  for (auto [scale, causal] : {std::pair{0.5, false}, std::pair{0.5, false}, std::pair{0.25, false}, std::pair{0.5, true}})
    b.Output(b.AttentionGrad(OpCode::kAttentionGradQ, q, q, q, q, q, lse, scale, causal), "dq" + std::to_string(i++));
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(CountOps(*merged, OpCode::kAttentionGradQ), 3);
}

TEST(CseTest, ComparesLargeConstantsByBuffer) {
  // Weights are not compared byte by byte: equal large tensors from separate buffers
  // stay apart, one buffer used twice merges.
  Tensor weights = Tensor::Random(DType::kF32, {64, 64}, 3);
  Tensor same_values = Tensor::FromDoubles(DType::kF32, {64, 64}, weights.ToDoubles());
  GraphBuilder b;
  Value a = b.Constant(weights);
  Value a_again = b.Constant(weights);
  Value c = b.Constant(same_values);
  b.Output(b.Add(b.Add(a, a_again), c), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto merged = EliminateCommonSubexpressions(*graph);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(CountOps(*merged, OpCode::kConstant), 2);
}

}  // namespace
}  // namespace tilefuse

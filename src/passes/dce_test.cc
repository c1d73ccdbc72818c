#include "passes/dce.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

TEST(DceTest, RemovesAnUnusedBranch) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  Value unused = b.Unary(OpCode::kLog, b.Unary(OpCode::kExp, x));
  (void)unused;
  b.Output(b.Unary(OpCode::kNeg, x), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  ASSERT_EQ(graph->num_nodes(), 4);

  auto live = EliminateDeadCode(*graph);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ(live->num_nodes(), 2);
  EXPECT_EQ(CountOps(*live, OpCode::kExp), 0);
  EXPECT_EQ(CountOps(*live, OpCode::kLog), 0);
  EXPECT_EQ(live->node(live->outputs()[0].node).op, OpCode::kNeg);
}

TEST(DceTest, KeepsUnusedParametersInOrder) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  Value unused = b.Parameter("unused", DType::kI64, {2});
  Value z = b.Parameter("z", DType::kF32, {4});
  (void)unused;
  b.Output(b.Add(x, z), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto live = EliminateDeadCode(*graph);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->inputs().size(), 3u);
  EXPECT_EQ(live->node(live->inputs()[0]).name, "x");
  EXPECT_EQ(live->node(live->inputs()[1]).name, "unused");
  EXPECT_EQ(live->node(live->inputs()[2]).name, "z");
}

TEST(DceTest, KeepsEverythingAnyOutputNeeds) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4});
  Value e = b.Unary(OpCode::kExp, x);
  Value s = b.Unary(OpCode::kSin, x);
  b.Output(b.Unary(OpCode::kNeg, e), "a");
  b.Output(s, "b");
  b.Output(s, "b_again");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto live = EliminateDeadCode(*graph);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ(live->num_nodes(), graph->num_nodes());
  EXPECT_EQ(live->outputs().size(), 3u);
}

}  // namespace
}  // namespace tilefuse

#include "tilefuse/builder.h"

#include <gtest/gtest.h>

#include "ir/printer.h"

namespace tilefuse {
namespace {

TEST(BuilderTest, BroadcastingInsertsExplicitBroadcast) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value bias = b.Parameter("bias", DType::kF32, {8});
  Value y = b.Add(x, bias);
  b.Output(y, "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const Node& add = graph->node(y.id);
  EXPECT_EQ(add.op, OpCode::kAdd);
  EXPECT_EQ(add.shape, (Shape{4, 8}));
  EXPECT_EQ(graph->node(add.inputs[1]).op, OpCode::kBroadcast);
}

TEST(BuilderTest, ShapeMismatchNamesTheLocation) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value z = b.Parameter("z", DType::kF32, {3});
  b.SetLocation("node 'add0' (Add)", "add0");
  Value y = b.Add(x, z);
  EXPECT_FALSE(y.valid());
  b.Output(y, "y");
  auto graph = b.Build();
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().message().find("add0"), std::string::npos) << graph.status().ToString();
  EXPECT_NE(graph.status().message().find("do not broadcast"), std::string::npos);
}

}  // namespace
}  // namespace tilefuse

#include "passes/infer.h"

#include <gtest/gtest.h>

#include "ir/verifier.h"

namespace tilefuse {
namespace {

// Graphs assembled with Graph::AddNode directly, as a careless frontend would, bypass
// the builder's inference; their declared types can be anything.
Node HandParameter(std::string name, DType dtype, Shape shape) {
  Node node;
  node.op = OpCode::kParameter;
  node.name = std::move(name);
  node.attrs.to = dtype;
  node.attrs.shape = std::move(shape);
  return node;  // dtype and shape deliberately left at their defaults
}

Node HandNode(OpCode op, std::vector<int> inputs) {
  Node node;
  node.op = op;
  node.inputs = std::move(inputs);
  node.name = "hand";
  node.dtype = DType::kI8;  // wrong on purpose
  node.shape = {7};
  return node;
}

TEST(InferTypesTest, FixesWrongDeclaredTypes) {
  Graph graph;
  int x = graph.AddNode(HandParameter("x", DType::kF16, {2, 3}));
  int y = graph.AddNode(HandParameter("y", DType::kF16, {2, 3}));
  int sum = graph.AddNode(HandNode(OpCode::kAdd, {x, y}));
  int less = graph.AddNode(HandNode(OpCode::kLess, {sum, x}));
  graph.AddOutput(less, "less");
  ASSERT_FALSE(VerifyGraph(graph).ok());  // the declared types really are wrong

  auto inferred = InferTypes(graph);
  ASSERT_TRUE(inferred.ok()) << inferred.status().ToString();
  EXPECT_TRUE(VerifyGraph(*inferred).ok());
  ASSERT_EQ(inferred->num_nodes(), 4);
  EXPECT_EQ(inferred->node(0).dtype, DType::kF16);
  EXPECT_EQ(inferred->node(2).dtype, DType::kF16);
  EXPECT_EQ(inferred->node(2).shape, (Shape{2, 3}));
  EXPECT_EQ(inferred->node(3).dtype, DType::kBool);
  EXPECT_EQ(inferred->node(3).shape, (Shape{2, 3}));
  EXPECT_EQ(inferred->node(3).name, "hand");
  ASSERT_EQ(inferred->outputs().size(), 1u);
  EXPECT_EQ(inferred->outputs()[0].name, "less");
  EXPECT_EQ(inferred->inputs(), (std::vector<int>{0, 1}));
}

TEST(InferTypesTest, RejectsANodeWithNoValidTypeAndNamesIt) {
  Graph graph;
  int x = graph.AddNode(HandParameter("x", DType::kF32, {2, 3}));
  int y = graph.AddNode(HandParameter("y", DType::kF32, {3}));
  int sum = graph.AddNode(HandNode(OpCode::kAdd, {x, y}));  // no implicit broadcasting
  graph.AddOutput(sum, "sum");
  auto inferred = InferTypes(graph);
  ASSERT_FALSE(inferred.ok());
  const std::string& message = inferred.status().message();
  EXPECT_NE(message.find("%2 (add, 'hand')"), std::string::npos) << message;
  EXPECT_NE(message.find("one shape"), std::string::npos) << message;
}

TEST(InferTypesTest, RejectsAReductionOverAMissingAxis) {
  Graph graph;
  int x = graph.AddNode(HandParameter("x", DType::kF32, {4}));
  Node sum = HandNode(OpCode::kReduceSum, {x});
  sum.attrs.axes = {1};
  graph.AddOutput(graph.AddNode(sum), "sum");
  auto inferred = InferTypes(graph);
  ASSERT_FALSE(inferred.ok());
  EXPECT_NE(inferred.status().message().find("reduce_sum"), std::string::npos) << inferred.status().ToString();
}

}  // namespace
}  // namespace tilefuse

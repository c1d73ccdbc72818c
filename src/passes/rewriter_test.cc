#include "passes/rewriter.h"

#include <gtest/gtest.h>

#include "ir/printer.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

TEST(RewriterTest, CopyGraphIsAnIdentity) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {2, 3});
  Value w = b.Parameter("w", DType::kBF16, {3, 4});
  b.SetLocation("", "mm");
  Value y = b.MatMul(x, w);
  b.SetLocation("", "red");
  b.Output(b.Reduce(OpCode::kReduceMax, y, {-1}, false), "r");
  b.Output(y, "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto copy = CopyGraph(*graph);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_EQ(PrintGraph(*copy), PrintGraph(*graph));
  EXPECT_EQ(copy->inputs(), graph->inputs());
}

TEST(RewriterTest, NodeLabelNamesIdOpAndName) {
  Node node;
  node.id = 7;
  node.op = OpCode::kExp;
  EXPECT_EQ(NodeLabel(node), "%7 (exp)");
  node.name = "Exp_1";
  EXPECT_EQ(NodeLabel(node), "%7 (exp, 'Exp_1')");
}

TEST(RewriterTest, ReportsTheFirstFailingNode) {
  Graph graph;
  Node x;
  x.op = OpCode::kParameter;
  x.name = "x";
  x.attrs.shape = {4};
  int xid = graph.AddNode(x);
  Node bad;
  bad.op = OpCode::kTranspose;
  bad.name = "t0";
  bad.inputs = {xid};
  bad.attrs.perm = {1, 0};  // rank 2 perm on a rank-1 input
  int tid = graph.AddNode(bad);
  Node after;
  after.op = OpCode::kNeg;
  after.name = "later";
  after.inputs = {tid};
  graph.AddOutput(graph.AddNode(after), "y");
  auto copy = CopyGraph(graph);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.status().message().rfind("%1 (transpose, 't0'): ", 0), 0u) << copy.status().ToString();
}

}  // namespace
}  // namespace tilefuse

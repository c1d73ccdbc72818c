// SplitGemmGroup and PrologueGroups on hand-made gemm groups: which prologue values get
// materialised, and what each prologue kernel computes.
#include "codegen/gemm_split.h"

#include <gtest/gtest.h>

#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct GemmGraph {
  Graph graph;
  FusionGroup group;  // every node but the parameters, output y
};

// y = matmul(transpose(c), w) + c with c = cast(x): the epilogue reads c, which is a
// prologue member but not an operand of the product.
GemmGraph EpilogueReadsPrologue() {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF16, {32, 32});
  Value w = b.Parameter("w", DType::kF32, {32, 32});
  Value c = b.Cast(x, DType::kF32);
  Value y = b.Add(b.MatMul(b.Transpose(c, {1, 0}), w), c);
  b.Output(y, "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  GemmGraph out{std::move(graph).value(), {}};
  out.group.id = 0;
  out.group.kind = GroupKind::kGemm;
  for (const Node& n : out.graph.nodes())
    if (n.op != OpCode::kParameter) out.group.nodes.push_back(n.id);
  out.group.outputs = {out.graph.outputs()[0].node};
  return out;
}

std::vector<OpCode> Ops(const Graph& g, const std::vector<int>& nodes) {
  std::vector<OpCode> ops;
  for (int id : nodes) ops.push_back(g.node(id).op);
  return ops;
}

TEST(GemmSplitTest, PrologueMaterialisesWhatTheEpilogueReads) {
  GemmGraph gg = EpilogueReadsPrologue();
  const Graph& g = gg.graph;
  GemmSplit split = SplitGemmGroup(g, gg.group);
  ASSERT_EQ(Ops(g, split.prologue), (std::vector<OpCode>{OpCode::kCast, OpCode::kTranspose}));
  EXPECT_EQ(Ops(g, split.epilogue.nodes), (std::vector<OpCode>{OpCode::kAdd}));
  std::vector<FusionGroup> parts = PrologueGroups(g, gg.group, split);
  ASSERT_EQ(parts.size(), 2u);
  // The cast alone (the epilogue's), then the transposed operand, recomputing the cast.
  EXPECT_EQ(Ops(g, parts[0].nodes), (std::vector<OpCode>{OpCode::kCast}));
  EXPECT_EQ(parts[0].outputs, std::vector<int>{split.prologue[0]});
  EXPECT_EQ(Ops(g, parts[1].nodes), (std::vector<OpCode>{OpCode::kCast, OpCode::kTranspose}));
  EXPECT_EQ(parts[1].outputs, std::vector<int>{g.node(split.matmul).inputs[0]});
  for (const FusionGroup& part : parts) EXPECT_EQ(part.kind, GroupKind::kPointwise);
}

}  // namespace
}  // namespace tilefuse

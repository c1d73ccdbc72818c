#include "codegen/gemm_amax.h"

#include <gtest/gtest.h>

#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// u [64, 96] of `dtype` (a graph input: outside the amax's group), then `amax(b, u)`, the amax's
// output; every node after u a member.
struct Built {
  Graph graph;
  int u = -1, out = -1;
  std::vector<bool> member;
};
template <class Amax>
Built Build(DType dtype, Amax amax) {
  GraphBuilder b;
  Value u = b.Parameter("u", dtype, {64, 96});
  const int first = b.graph().num_nodes();
  Value out = amax(b, u);
  b.Output(out, "amax");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  Built built{std::move(*graph), u.id, out.id, {}};
  built.member.assign(built.graph.num_nodes(), false);
  for (int id = first; id < built.graph.num_nodes(); ++id)
    if (built.graph.node(id).op != OpCode::kConstant) built.member[id] = true;
  return built;
}

std::optional<AmaxMatch> Match(const Built& b) { return MatchAmax(b.graph, b.out, b.member); }

TEST(GemmAmaxTest, MatchesTheMaxMagnitudeOverEveryElement) {
  for (bool keepdims : {false, true}) {
    const Built b = Build(DType::kF32, [&](GraphBuilder& g, Value u) { return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, u), {0, 1}, keepdims); });
    const std::optional<AmaxMatch> m = Match(b);
    ASSERT_TRUE(m.has_value()) << "keepdims " << keepdims;
    EXPECT_EQ(m->value, b.u);
    EXPECT_EQ(m->output, b.out);
  }
}

// Casts that hold every value of the type before them commute with |·| and max: bf16 widened to
// f32 before the Abs, the bf16 max widened after it, an 8-bit float's widened to bf16; a reshape
// moves no magnitude.
TEST(GemmAmaxTest, MatchesThroughExactCastsAndReshapes) {
  const Built widened_first = Build(DType::kBF16, [](GraphBuilder& g, Value u) {
    return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, g.Cast(u, DType::kF32)), {0, 1}, false);
  });
  const Built widened_after = Build(DType::kBF16, [](GraphBuilder& g, Value u) {
    return g.Cast(g.Reduce(OpCode::kReduceMax, g.Reshape(g.Unary(OpCode::kAbs, u), {64 * 96}), {0}, false), DType::kF32);
  });
  const Built from_fp8 = Build(DType::kF8E4M3, [](GraphBuilder& g, Value u) {
    return g.Reduce(OpCode::kReduceMax, g.Cast(g.Unary(OpCode::kAbs, g.Cast(u, DType::kF32)), DType::kF32), {0, 1}, false);
  });
  for (const Built* b : {&widened_first, &widened_after, &from_fp8}) {
    const std::optional<AmaxMatch> m = Match(*b);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->value, b->u);
  }
}

// The amax of a value the group computes (its scales, as the planner groups them): that value.
TEST(GemmAmaxTest, TheAmaxOfAMemberIsOfThatMember) {
  const Built b = Build(DType::kF32, [](GraphBuilder& g, Value u) {
    return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, g.Unary(OpCode::kNeg, u)), {0, 1}, true);
  });
  const std::optional<AmaxMatch> m = Match(b);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(b.graph.node(m->value).op, OpCode::kNeg);
  EXPECT_EQ(m->ops.size(), 2u) << "the Abs and the ReduceMax";
}

TEST(GemmAmaxTest, RefusesWhatIsNotTheMaxMagnitudeOfAllOfU) {
  // Per row: 64 results.
  EXPECT_FALSE(Match(Build(DType::kF32, [](GraphBuilder& g, Value u) { return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, u), {1}, false); })));
  // The max without the magnitude, a sum of magnitudes, the max of a negation.
  EXPECT_FALSE(Match(Build(DType::kF32, [](GraphBuilder& g, Value u) { return g.Reduce(OpCode::kReduceMax, u, {0, 1}, false); })));
  EXPECT_FALSE(Match(Build(DType::kF32, [](GraphBuilder& g, Value u) { return g.Reduce(OpCode::kReduceSum, g.Unary(OpCode::kAbs, u), {0, 1}, false); })));
  // f32 rounded to bf16 before the max: not exact, so the amax of a value the epilogue does not hold.
  const Built narrowed = Build(DType::kF32, [](GraphBuilder& g, Value u) {
    return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, g.Cast(u, DType::kBF16)), {0, 1}, false);
  });
  const std::optional<AmaxMatch> m = Match(narrowed);
  ASSERT_FALSE(m.has_value() && m->value == narrowed.u);
  // An Abs outside the group.
  Built outside = Build(DType::kF32, [](GraphBuilder& g, Value u) { return g.Reduce(OpCode::kReduceMax, g.Unary(OpCode::kAbs, u), {0, 1}, false); });
  for (size_t id = 0; id < outside.member.size(); ++id)
    if (outside.graph.node(static_cast<int>(id)).op == OpCode::kAbs) outside.member[id] = false;
  EXPECT_FALSE(Match(outside));
}

// A product's epilogue storing y = acc (f32) and z = 2y (bf16), as LowerGemmTemplate writes one.
GemmTemplateKernel ProductStoringTwo() {
  GemmTemplateKernel g;
  g.dtype = g.operand_dtype = DType::kBF16;
  g.product = 2;
  g.rows = 64, g.n = 96, g.k = 64;
  Kernel& k = g.epilogue;
  k.buffers = {{2, DType::kF32, 64 * 96, false}, {5, DType::kF32, 64 * 96, true}, {6, DType::kBF16, 64 * 96, true}};
  ScalarValue acc;
  acc.kind = ScalarValue::Kind::kLoad;
  acc.buffer = 0;
  acc.dtype = DType::kF32;
  ScalarValue twice;
  twice.kind = ScalarValue::Kind::kOp;
  twice.op = OpCode::kAdd;
  twice.args = {0, 0};
  twice.dtype = DType::kF32;
  k.values = {acc, twice};
  k.stores = {KernelStore{1, 0, {}}, KernelStore{2, 1, {}}};
  g.outputs = {5, 6};
  return g;
}

TEST(GemmAmaxTest, FoldingDropsTheStoreOfAValueOnlyTheAmaxReads) {
  const GemmTemplateKernel g = ProductStoringTwo();
  ASSERT_TRUE(AmaxFoldable(g, 6).ok());
  const GemmTemplateKernel dropped = FoldAmax(g, AmaxMatch{6, 9}, DType::kF32, /*keep_stored=*/false);
  ASSERT_TRUE(dropped.amax.has_value());
  EXPECT_EQ(dropped.amax->scalar, 1);
  EXPECT_EQ(dropped.amax->value_dtype, DType::kBF16) << "|u| of u as stored";
  EXPECT_FALSE(dropped.amax->stored);
  ASSERT_EQ(dropped.epilogue.stores.size(), 1u);
  EXPECT_EQ(dropped.epilogue.stores[0].buffer, 1);
  EXPECT_EQ(dropped.outputs, (std::vector<int>{5, 9}));
  const GemmTemplateKernel kept = FoldAmax(g, AmaxMatch{6, 9}, DType::kF32, /*keep_stored=*/true);
  EXPECT_EQ(kept.epilogue.stores.size(), 2u);
  EXPECT_EQ(kept.outputs, (std::vector<int>{5, 6, 9}));
  EXPECT_FALSE(AmaxFoldable(dropped, 5).ok()) << "one amax a product";
}

TEST(GemmAmaxTest, NotFoldableIntoGroupedOrGatedProductsOrOfAValueItDoesNotWrite) {
  const GemmTemplateKernel g = ProductStoringTwo();
  EXPECT_NE(AmaxFoldable(g, 7).message().find("does not write"), std::string::npos);
  GemmTemplateKernel gated = g;
  gated.gate.push_back(g);
  EXPECT_FALSE(AmaxFoldable(gated, 6).ok());
  GemmTemplateKernel grouped = g;
  grouped.n_parts = {g, g};
  EXPECT_FALSE(AmaxFoldable(grouped, 6).ok());
}

}  // namespace
}  // namespace tilefuse

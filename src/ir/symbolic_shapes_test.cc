#include "ir/symbolic_shapes.h"

#include <gtest/gtest.h>

#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

TEST(SymExprTest, ArithmeticPrintsAndEvaluates) {
  const SymExpr b = SymExpr::Symbol(0), t = SymExpr::Symbol(1);
  const SymExpr rows = b * t * SymExpr::Constant(12);
  EXPECT_EQ(rows.Print("s"), "s0 * s1 * 12");
  EXPECT_EQ(rows.Evaluate({2, 24}), 576);
  EXPECT_EQ((t + SymExpr::Constant(1)).Print(std::vector<std::string>{"batch", "past"}), "past + 1");
  EXPECT_EQ((SymExpr::Constant(0) - t).Print("s"), "-s1");
  EXPECT_EQ((t - t), SymExpr());
  EXPECT_TRUE((t - t).IsConstant());
  EXPECT_FALSE(rows.IsConstant());
  EXPECT_EQ(rows.Symbols(), (std::set<int>{0, 1}));
}

TEST(SymExprTest, DividesOnlyExactly) {
  const SymExpr b = SymExpr::Symbol(0), t = SymExpr::Symbol(1);
  const SymExpr elements = b * t * SymExpr::Constant(768);
  ASSERT_TRUE(elements.DividedBy(b * t).has_value());
  EXPECT_EQ(*elements.DividedBy(b * t), SymExpr::Constant(768));
  EXPECT_EQ(*elements.DividedBy(SymExpr::Constant(64)), b * t * SymExpr::Constant(12));
  EXPECT_FALSE(elements.DividedBy(SymExpr::Constant(7)).has_value());           // 768 / 7
  EXPECT_FALSE((t + SymExpr::Constant(1)).DividedBy(t).has_value());            // (T + 1) / T
  EXPECT_FALSE(elements.DividedBy(b + t).has_value());                          // not one term
  EXPECT_FALSE((b * SymExpr::Constant(4)).DividedBy(t).has_value());            // T does not divide 4B
}

// A graph whose input x is [batch, seq, 64], bound at batch 2, seq 24 (or as given).
struct Bound {
  GraphBuilder b;
  Value x;
  std::map<std::string, std::vector<std::string>> dims = {{"x", {"batch", "seq", ""}}};
  std::map<std::string, int64_t> values = {{"batch", 2}, {"seq", 24}};
  explicit Bound(Shape shape = {2, 24, 64}) { x = b.Parameter("x", DType::kF32, shape); }
  SymbolicShapes Infer(Value out) {
    b.Output(out, "y");
    StatusOr<Graph> g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status().message();
    graph = std::move(*g);
    graph.set_symbolic_inputs({dims, values});
    return InferSymbolicShapes(graph);
  }
  std::string Dims(const SymbolicShapes& s, Value v) const {
    std::string text;
    for (const SymExpr& d : s.dims.at(static_cast<size_t>(v.id))) text += (text.empty() ? "" : ", ") + d.Print(s.names);
    return "[" + text + "]";
  }
  Graph graph;
};

TEST(InferSymbolicShapesTest, FollowsHeadsThroughReshapesAndTransposes) {
  Bound t;
  Value rows = t.b.Reshape(t.x, {48, 64});
  Value heads = t.b.Reshape(rows, {2, 24, 4, 16});
  Value moved = t.b.Transpose(heads, {0, 2, 1, 3});
  Value scores = t.b.MatMul(moved, t.b.Transpose(moved, {0, 1, 3, 2}));
  Value sums = t.b.Reduce(OpCode::kReduceSum, scores, {3}, true);
  const SymbolicShapes s = t.Infer(sums);
  EXPECT_EQ(s.names, (std::vector<std::string>{"batch", "seq"}));
  EXPECT_EQ(t.Dims(s, rows), "[batch * seq, 64]");
  EXPECT_EQ(t.Dims(s, heads), "[batch, seq, 4, 16]");
  EXPECT_EQ(t.Dims(s, moved), "[batch, 4, seq, 16]");
  EXPECT_EQ(t.Dims(s, scores), "[batch, 4, seq, seq]");
  EXPECT_EQ(t.Dims(s, sums), "[batch, 4, seq, 1]");
  EXPECT_EQ(s.Elements(scores.id).Print(s.names), "batch * seq * seq * 4");
}

TEST(InferSymbolicShapesTest, ConcatenationsAddAndBroadcastsAlign) {
  Bound t;
  // A KV cache: the past keys [batch, past, 64] and this step's [batch, seq, 64].
  Value past = t.b.Parameter("past", DType::kF32, {2, 100, 64});
  t.dims["past"] = {"batch", "past", ""};
  t.values["past"] = 100;
  Value both = t.b.Concat({past, t.x}, 1);
  Value bias = t.b.Parameter("bias", DType::kF32, {64});
  Value biased = t.b.Add(t.b.BroadcastTo(bias, {2, 124, 64}), both);
  const SymbolicShapes s = t.Infer(biased);
  EXPECT_EQ(t.Dims(s, both), "[batch, past + seq, 64]");
  EXPECT_EQ(t.Dims(s, biased), "[batch, past + seq, 64]");
  EXPECT_EQ(s.Elements(biased.id).Print(s.names), "batch * past * 64 + batch * seq * 64");
}

TEST(InferSymbolicShapesTest, DimsThatCannotBeToldApartStayConstants) {
  Bound t({24, 24, 64});
  t.values = {{"batch", 24}, {"seq", 24}};
  // batch = seq = 24: splitting batch · seq back into two dims of 24 cannot say which is
  // which, so they stay constants (a kernel over them is compiled for this binding).
  Value rows = t.b.Reshape(t.x, {576, 64});
  Value split = t.b.Reshape(rows, {24, 24, 4, 16});
  const SymbolicShapes s = t.Infer(split);
  EXPECT_EQ(t.Dims(s, rows), "[batch * seq, 64]");
  EXPECT_EQ(t.Dims(s, split), "[24, 24, 4, 16]");
  // Every expression the analysis gives evaluates to its dim.
  for (const Node& n : t.graph.nodes())
    for (size_t d = 0; d < n.shape.size(); ++d) EXPECT_EQ(s.dims[static_cast<size_t>(n.id)][d].Evaluate(s.values), n.shape[d]) << n.id;
}

TEST(InferSymbolicShapesTest, AStaticSizeIsNotTakenForASymbolOfTheSameValue) {
  // batch = 64 = the features: a mean over the features broadcast back is [batch, seq, 64],
  // not [batch, seq, batch] (the broadcast's 64 found by value).
  Bound t({64, 24, 64});
  t.values = {{"batch", 64}, {"seq", 24}};
  Value mean = t.b.Reduce(OpCode::kReduceMean, t.x, {2}, true);
  Value back = t.b.BroadcastTo(mean, {64, 24, 64});
  Value centred = t.b.Sub(t.x, back);
  const SymbolicShapes s = t.Infer(centred);
  EXPECT_EQ(t.Dims(s, mean), "[batch, seq, 1]");
  EXPECT_EQ(t.Dims(s, back), "[batch, seq, 64]");
  EXPECT_EQ(t.Dims(s, centred), "[batch, seq, 64]");
}

TEST(InferSymbolicShapesTest, AProductsRowsAreItsOperandsWhateverItsWidth) {
  // seq = 512 = the weight's static width: the product's rows are still batch · seq.
  Bound t({2, 512, 64});
  t.values = {{"batch", 2}, {"seq", 512}};
  Value w = t.b.Parameter("w", DType::kF32, {64, 512});
  Value y = t.b.MatMul(t.x, w);
  Value first = t.b.Slice(y, {0, 0, 0}, {2, 512, 256}, {0, 1, 2}, {1, 1, 1});
  const SymbolicShapes s = t.Infer(first);
  EXPECT_EQ(t.Dims(s, y), "[batch, seq, 512]");
  EXPECT_EQ(t.Dims(s, first), "[batch, seq, 256]");
}

TEST(InferSymbolicShapesTest, ABroadcastsNewDimsAreWhatItsUserKnows) {
  // batch = 4 = the heads, seq = 64 = the features: a scale and a padding mask broadcast to the
  // scores guess their new dims by size (heads → batch, seq → 64); the scores derive them, and
  // the sum and both broadcasts take the scores' dims.
  Bound t({4, 64, 64});
  t.values = {{"batch", 4}, {"seq", 64}};
  Value mask = t.b.Parameter("mask", DType::kF32, {4, 64});
  t.dims["mask"] = {"batch", "seq"};
  Value heads = t.b.Transpose(t.b.Reshape(t.x, {4, 64, 4, 16}), {0, 2, 1, 3});
  Value scores = t.b.MatMul(heads, t.b.Transpose(heads, {0, 1, 3, 2}));
  Value scale = t.b.BroadcastTo(t.b.Scalar(0.25, DType::kF32), {4, 4, 64, 64});
  Value padding = t.b.BroadcastTo(t.b.Unsqueeze(mask, {1, 2}), {4, 4, 64, 64});
  Value logits = t.b.Add(t.b.Mul(scores, scale), padding);
  const SymbolicShapes s = t.Infer(logits);
  EXPECT_EQ(t.Dims(s, scores), "[batch, 4, seq, seq]");
  EXPECT_EQ(t.Dims(s, logits), "[batch, 4, seq, seq]");
  EXPECT_EQ(t.Dims(s, scale), "[batch, 4, seq, seq]");
  EXPECT_EQ(t.Dims(s, padding), "[batch, 4, seq, seq]");
}

TEST(InferSymbolicShapesTest, AGraphWithoutSymbolicInputsHasNone) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 3});
  b.Output(b.Add(x, x), "y");
  StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(InferSymbolicShapes(*g).empty());
}

}  // namespace
}  // namespace tilefuse

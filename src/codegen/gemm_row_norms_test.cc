#include "codegen/gemm_row_norms.h"

#include <gtest/gtest.h>

#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// How a test writes the norm: the square, the root and where the scale sits.
struct NormForm {
  bool pow_square = true;     // pow(x, 2), else x · x
  int root = 0;               // 0: rsqrt, 1: 1 / sqrt, 2: a division by sqrt
  bool scale_first = true;    // scale · normed, else normed · scale
  bool cast_to_f32 = true;    // the sums in f32 (transformers' LlamaRMSNorm)
  DType scale_dtype = DType::kBF16;
};

struct Built {
  Graph graph;
  int x = -1, scale = -1, out = -1;
  std::vector<bool> member;  // every node the norm computes
};

Built BuildNorm(const NormForm& f, double epsilon = 1e-6) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {1, 8, 128});
  Value scale = b.Parameter("scale", f.scale_dtype, {128});
  const int first_computed = b.graph().num_nodes();
  Value xf = f.cast_to_f32 ? b.Cast(x, DType::kF32) : x;
  Value square = f.pow_square ? b.Binary(OpCode::kPow, xf, b.Scalar(2.0, b.dtype(xf))) : b.Mul(xf, xf);
  Value mean = b.Reduce(OpCode::kReduceMean, square, {2}, true);
  Value sum = b.AddScalar(mean, epsilon);
  Value normed;
  if (f.root == 0) normed = b.Mul(xf, b.Unary(OpCode::kRsqrt, sum));
  else if (f.root == 1) normed = b.Mul(xf, b.Unary(OpCode::kReciprocal, b.Unary(OpCode::kSqrt, sum)));
  else normed = b.Div(xf, b.Unary(OpCode::kSqrt, sum));
  Value rounded = b.Cast(normed, f.scale_dtype);
  Value out = f.scale_first ? b.Mul(scale, rounded) : b.Mul(rounded, scale);
  b.Output(out, "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  Built built{std::move(*graph), x.id, scale.id, out.id, {}};
  built.member.assign(built.graph.num_nodes(), false);
  for (int id = first_computed; id < built.graph.num_nodes(); ++id)
    if (built.graph.node(id).op != OpCode::kConstant && id != scale.id) built.member[id] = true;
  return built;
}

// Whether `out` of the graph `b` holds matches, every node a member but x and scale.
bool MatchesWithOnlyInputsOutside(GraphBuilder& b, Value x, Value scale, Value out) {
  b.Output(out, "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return false;
  std::vector<bool> member(graph->num_nodes(), true);
  member[x.id] = member[scale.id] = false;
  return MatchRmsNorm(*graph, out.id, member).has_value();
}

TEST(GemmRowNormsTest, MatchesTheFormsTransformersTraces) {
  for (bool pow_square : {true, false})
    for (int root : {0, 1, 2})
      for (bool scale_first : {true, false})
        for (bool cast_to_f32 : {true, false}) {
          SCOPED_TRACE(testing::Message() << "pow " << pow_square << " root " << root << " scale first " << scale_first << " f32 " << cast_to_f32);
          NormForm f;
          f.pow_square = pow_square, f.root = root, f.scale_first = scale_first, f.cast_to_f32 = cast_to_f32;
          Built n = BuildNorm(f, 1e-5);
          std::optional<RmsNormMatch> m = MatchRmsNorm(n.graph, n.out, n.member);
          ASSERT_TRUE(m.has_value());
          EXPECT_EQ(m->input, n.x);
          EXPECT_EQ(m->scale, n.scale);
          EXPECT_NEAR(m->epsilon, 1e-5, cast_to_f32 ? 1e-12 : 1e-7);  // (a bf16 constant without the cast)
        }
}

TEST(GemmRowNormsTest, RefusesWhatIsNotThatNorm) {
  {
    SCOPED_TRACE("a scale of another type than x");
    NormForm f;
    f.scale_dtype = DType::kF32;
    Built n = BuildNorm(f);
    EXPECT_FALSE(MatchRmsNorm(n.graph, n.out, n.member).has_value());
  }
  {
    SCOPED_TRACE("an op of the norm computed outside its group");
    Built n = BuildNorm(NormForm{});
    for (int id = 0; id < n.graph.num_nodes(); ++id)
      if (n.graph.node(id).op == OpCode::kReduceMean) n.member[id] = false;
    EXPECT_FALSE(MatchRmsNorm(n.graph, n.out, n.member).has_value());
  }
  {
    // (LLaMA's final norm: its last residual sum written as f32 by the down product, the bf16
    // sum in no memory.)
    SCOPED_TRACE("x's cast to f32 computed outside the group, by x's producer");
    Built n = BuildNorm(NormForm{});
    for (int id = 0; id < n.graph.num_nodes(); ++id)
      if (n.graph.node(id).op == OpCode::kCast && n.graph.node(id).inputs[0] == n.x) n.member[id] = false;
    EXPECT_FALSE(MatchRmsNorm(n.graph, n.out, n.member).has_value());
  }
  {
    SCOPED_TRACE("x computed in the group (a residual added first)");
    Built n = BuildNorm(NormForm{});
    n.member[n.x] = true;
    EXPECT_FALSE(MatchRmsNorm(n.graph, n.out, n.member).has_value());
  }
  {
    SCOPED_TRACE("a layer norm: the mean subtracted first");
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kBF16, {8, 128});
    Value scale = b.Parameter("scale", DType::kBF16, {128});
    Value xf = b.Cast(x, DType::kF32);
    Value centered = b.Sub(xf, b.Reduce(OpCode::kReduceMean, xf, {1}, true));
    Value var = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), {1}, true);
    Value normed = b.Mul(centered, b.Unary(OpCode::kRsqrt, b.AddScalar(var, 1e-5)));
    Value out = b.Mul(scale, b.Cast(normed, DType::kBF16));
    EXPECT_FALSE(MatchesWithOnlyInputsOutside(b, x, scale, out));
  }
  for (int64_t axis : {0, 1}) {
    // (Over the last axis it matches: the refusal is the axis's.)
    SCOPED_TRACE(axis == 0 ? "the mean over another axis" : "the same over the last axis");
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kBF16, {128, 128});
    Value scale = b.Parameter("scale", DType::kBF16, {128});
    Value xf = b.Cast(x, DType::kF32);
    Value mean = b.Reduce(OpCode::kReduceMean, b.Mul(xf, xf), {axis}, true);
    Value out = b.Mul(scale, b.Cast(b.Mul(xf, b.Unary(OpCode::kRsqrt, b.AddScalar(mean, 1e-5))), DType::kBF16));
    EXPECT_EQ(MatchesWithOnlyInputsOutside(b, x, scale, out), axis == 1);
  }
}

TEST(GemmRowNormsTest, FoldsIntoEveryPartOfTheProduct) {
  GemmTemplateKernel g;
  g.a = 7, g.k = 2048, g.rows = 128, g.n = 3072;
  g.n_parts.resize(3);
  for (GemmTemplateKernel& p : g.n_parts) p.a = 7;
  ASSERT_TRUE(RowNormFoldable(g).ok());
  const GemmTemplateKernel folded = FoldRowNorm(g, 7, RmsNormMatch{3, 4, 1e-6});
  EXPECT_EQ(folded.a, 3);
  ASSERT_TRUE(folded.row_norm.has_value());
  EXPECT_EQ(folded.row_norm->normed, 7);
  EXPECT_EQ(folded.row_norm->scale, 4);
  for (const GemmTemplateKernel& p : folded.n_parts) {
    EXPECT_EQ(p.a, 3);
    EXPECT_TRUE(p.row_norm.has_value());
  }
  EXPECT_FALSE(RowNormFoldable(folded).ok()) << "normed twice";
  GemmTemplateKernel odd_k = g;
  odd_k.k = 2000;
  EXPECT_FALSE(RowNormFoldable(odd_k).ok());
  GemmTemplateKernel f32 = g;
  f32.operand_dtype = DType::kF32;
  EXPECT_FALSE(RowNormFoldable(f32).ok());
}

}  // namespace
}  // namespace tilefuse

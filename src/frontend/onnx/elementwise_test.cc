#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxElementwiseTest, AddBroadcastsLikeNumpy) {
  Graph g = Import(WithOpset(17, R"(
    g (float[2, 3] x, float[3] y) => (float[2, 3] z) { z = Add(x, y) })"));
  const Node& add = OutputNode(g);
  EXPECT_EQ(add.op, OpCode::kAdd);
  EXPECT_EQ(add.name, "z");  // unnamed node: named after its first output
  EXPECT_EQ(g.node(add.inputs[1]).op, OpCode::kBroadcast);
  ExpectNear(RunGraph(g, {F32({2, 3}, {1, 2, 3, 4, 5, 6}), F32({3}, {10, 20, 30})}), {11, 22, 33, 14, 25, 36});
}

TEST(OnnxElementwiseTest, ArithmeticAndMath) {
  Graph g = Import(WithOpset(17, R"(
    g (float[4] a, float[4] b) => (float[4] sub, float[4] div, float[4] pow, float[4] sqrt, float[4] recip) {
      sub = Sub(a, b)
      div = Div(a, b)
      pow = Pow(a, b)
      sqrt = Sqrt(a)
      recip = Reciprocal(b)
    })"));
  std::vector<Tensor> in = {F32({4}, {1, 4, 9, 16}), F32({4}, {2, 0.5, 1, 4})};
  ExpectNear(RunGraph(g, in, 0), {-1, 3.5, 8, 12});
  ExpectNear(RunGraph(g, in, 1), {0.5, 8, 9, 4});
  ExpectNear(RunGraph(g, in, 2), {1, 2, 9, 65536});
  ExpectNear(RunGraph(g, in, 3), {1, 2, 3, 4});
  ExpectNear(RunGraph(g, in, 4), {0.5, 2, 1, 0.25});
}

// Asin, Acos and Atan: exact values at the points where they are known in closed form, and
// NaN outside asin's and acos's domain.
TEST(OnnxElementwiseTest, InverseTrigonometry) {
  Graph g = Import(WithOpset(7, R"(
    g (double[5] s, double[3] t) => (double[5] asin, double[5] acos, double[3] atan) {
      asin = Asin(s)
      acos = Acos(s)
      atan = Atan(t)
    })"));
  const double pi = std::numbers::pi;
  std::vector<Tensor> in = {Tensor::FromDoubles(DType::kF64, {5}, {-1, -0.5, 0, 0.5, 1}), Tensor::FromDoubles(DType::kF64, {3}, {-1, 0, 1e300})};
  ExpectNear(RunGraph(g, in, 0), {-pi / 2, -pi / 6, 0, pi / 6, pi / 2}, 1e-15);
  ExpectNear(RunGraph(g, in, 1), {pi, 2 * pi / 3, pi / 2, pi / 3, 0}, 1e-15);
  ExpectNear(RunGraph(g, in, 2), {-pi / 4, 0, pi / 2}, 1e-15);
  const std::vector<double> outside = RunGraph(g, {Tensor::FromDoubles(DType::kF64, {5}, {1.5, -2, 0, 0, 0}), in[1]}, 0);
  ASSERT_EQ(outside.size(), 5u);
  EXPECT_TRUE(std::isnan(outside[0]) && std::isnan(outside[1]));
}

TEST(OnnxElementwiseTest, PowCastsTheExponentToTheBaseType) {
  Graph g = Import(WithOpset(15, R"(
    g (float[3] a, int64[3] e) => (float[3] y) { y = Pow(a, e) })"));
  EXPECT_EQ(OutputNode(g).dtype, DType::kF32);
  ExpectNear(RunGraph(g, {F32({3}, {2, 3, -2}), I64({3}, {3, 2, 2})}), {8, 9, 4});
}

TEST(OnnxElementwiseTest, ModFollowsTheFmodAttribute) {
  Graph g = Import(WithOpset(13, R"(
    g (int64[4] a, int64[4] b, float[2] fa, float[2] fb) => (int64[4] m, float[2] f) {
      m = Mod(a, b)
      f = Mod <fmod = 1> (fa, fb)
    })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kMod);
  EXPECT_EQ(OutputNode(g, 1).op, OpCode::kFMod);
  std::vector<Tensor> in = {I64({4}, {7, -7, 7, -7}), I64({4}, {3, 3, -3, -3}), F32({2}, {-7.5, 7.5}), F32({2}, {2, 2})};
  ExpectNear(RunGraph(g, in, 0), {1, 2, -2, -1});  // Python's %: sign of the divisor
  ExpectNear(RunGraph(g, in, 1), {-1.5, 1.5});     // C's fmod: sign of the dividend
}

TEST(OnnxElementwiseTest, ComparisonsAndLogic) {
  Graph g = Import(WithOpset(16, R"(
    g (float[4] a, float[4] b) => (bool[4] le, bool[4] x) {
      le = LessOrEqual(a, b)
      gt = Greater(a, b)
      eq = Equal(a, b)
      ne = Not(eq)
      x = Xor(gt, ne)
    })"));
  EXPECT_EQ(OutputNode(g).dtype, DType::kBool);
  std::vector<Tensor> in = {F32({4}, {1, 2, 3, 4}), F32({4}, {2, 2, 2, 5})};
  ExpectNear(RunGraph(g, in, 0), {1, 1, 0, 1});
  // gt = {0,0,1,0}, ne = {1,0,1,1}: xor = {1,0,0,1}
  ExpectNear(RunGraph(g, in, 1), {1, 0, 0, 1});
}

TEST(OnnxElementwiseTest, WhereBroadcastsAllThreeInputs) {
  Graph g = Import(WithOpset(16, R"(
    g (bool[2, 1] c, float[3] x, float y) => (float[2, 3] z) { z = Where(c, x, y) })"));
  EXPECT_EQ(OutputNode(g).shape, (Shape{2, 3}));
  ExpectNear(RunGraph(g, {Tensor::FromDoubles(DType::kBool, {2, 1}, {1, 0}), F32({3}, {1, 2, 3}), F32({}, {-1})}),
             {1, 2, 3, -1, -1, -1});
}

TEST(OnnxElementwiseTest, CastAndCastLike) {
  Graph g = Import(WithOpset(19, R"(
    g (float[3] x, int32[1] like) => (int64[3] a, int32[3] b, float16[3] c) {
      a = Cast <to = 7> (x)
      b = CastLike(x, like)
      c = Cast <to = 10> (x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).dtype, DType::kI64);
  EXPECT_EQ(OutputNode(g, 1).dtype, DType::kI32);
  EXPECT_EQ(OutputNode(g, 2).dtype, DType::kF16);
  std::vector<Tensor> in = {F32({3}, {1.7, -2.7, 3.0}), Tensor::FromDoubles(DType::kI32, {1}, {0})};
  ExpectNear(RunGraph(g, in, 0), {1, -2, 3});  // truncation toward zero
  ExpectNear(RunGraph(g, in, 1), {1, -2, 3});
  ExpectNear(RunGraph(g, in, 2), {1.7001953125, -2.69921875, 3});  // nearest half values
}

TEST(OnnxElementwiseTest, CastToStringIsUnsupported) {
  std::string error = ImportError(WithOpset(17, "g (float[3] x) => (string[3] y) { y = Cast <to = 8> (x) }"));
  EXPECT_TRUE(Contains(error, "node 'y' (Cast, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "STRING")) << error;
}

TEST(OnnxElementwiseTest, IsNaNAndIsInfDirections) {
  Graph g = Import(WithOpset(20, R"(
    g (float[4] x) => (bool[4] nan, bool[4] inf, bool[4] pos, bool[4] neg) {
      nan = IsNaN(x)
      inf = IsInf(x)
      pos = IsInf <detect_negative = 0> (x)
      neg = IsInf <detect_positive = 0> (x)
    })"));
  double inf = std::numeric_limits<double>::infinity();
  std::vector<Tensor> in = {F32({4}, {1, std::nan(""), inf, -inf})};
  ExpectNear(RunGraph(g, in, 0), {0, 1, 0, 0});
  ExpectNear(RunGraph(g, in, 1), {0, 0, 1, 1});
  ExpectNear(RunGraph(g, in, 2), {0, 0, 1, 0});
  ExpectNear(RunGraph(g, in, 3), {0, 0, 0, 1});
}

TEST(OnnxElementwiseTest, ClipBoundsAsAttributesBeforeOpset11) {
  Graph g = Import(WithOpset(10, R"(
    g (float[4] x) => (float[4] y) { y = Clip <min = -1.0, max = 2.0> (x) })"));
  ExpectNear(RunGraph(g, {F32({4}, {-3, 0.5, 1.5, 9})}), {-1, 0.5, 1.5, 2});
}

TEST(OnnxElementwiseTest, ClipBoundsAsOptionalInputs) {
  Graph g = Import(WithOpset(13, R"(
    g (float[4] x, float hi) => (float[4] only_max, float[4] both) {
      lo = Constant <value = float {-1.0}> ()
      only_max = Clip(x, , hi)
      both = Clip(x, lo, hi)
    })"));
  std::vector<Tensor> in = {F32({4}, {-3, 0.5, 1.5, 9}), F32({}, {1})};
  ExpectNear(RunGraph(g, in, 0), {-3, 0.5, 1, 1});
  ExpectNear(RunGraph(g, in, 1), {-1, 0.5, 1, 1});
}

TEST(OnnxElementwiseTest, VariadicMaxMinSumMean) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3] a, float[1] b, float[3] c) => (float[3] mx, float[3] mn, float[3] s, float[3] m, float[3] one) {
      mx = Max(a, b, c)
      mn = Min(a, b, c)
      s = Sum(a, b, c)
      m = Mean(a, b, c)
      one = Max(a)
    })"));
  std::vector<Tensor> in = {F32({3}, {1, 5, 3}), F32({1}, {2}), F32({3}, {0, 4, 9})};
  ExpectNear(RunGraph(g, in, 0), {2, 5, 9});
  ExpectNear(RunGraph(g, in, 1), {0, 2, 2});
  ExpectNear(RunGraph(g, in, 2), {3, 11, 14});
  ExpectNear(RunGraph(g, in, 3), {1, 11.0 / 3, 14.0 / 3});
  ExpectNear(RunGraph(g, in, 4), {1, 5, 3});
}

TEST(OnnxElementwiseTest, UnaryMath) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3] x) => (float[3] neg, float[3] abs, float[3] exp, float[3] log, float[3] erf,
                       float[3] floor, float[3] ceil, float[3] sin, float[3] sign) {
      neg = Neg(x)
      abs = Abs(x)
      exp = Exp(x)
      log = Log(abs)
      erf = Erf(x)
      floor = Floor(x)
      ceil = Ceil(x)
      sin = Sin(x)
      sign = Sign(x)
    })"));
  std::vector<double> x = {-1.5, 0.25, 2};
  std::vector<Tensor> in = {F32({3}, x)};
  ExpectNear(RunGraph(g, in, 0), {1.5, -0.25, -2});
  ExpectNear(RunGraph(g, in, 1), {1.5, 0.25, 2});
  ExpectNear(RunGraph(g, in, 2), {std::exp(-1.5), std::exp(0.25), std::exp(2.0)});
  ExpectNear(RunGraph(g, in, 3), {std::log(1.5), std::log(0.25), std::log(2.0)});
  ExpectNear(RunGraph(g, in, 4), {std::erf(-1.5), std::erf(0.25), std::erf(2.0)});
  ExpectNear(RunGraph(g, in, 5), {-2, 0, 2});
  ExpectNear(RunGraph(g, in, 6), {-1, 1, 2});
  ExpectNear(RunGraph(g, in, 7), {std::sin(-1.5), std::sin(0.25), std::sin(2.0)});
  ExpectNear(RunGraph(g, in, 8), {-1, 1, 1});
}

TEST(OnnxElementwiseTest, MismatchedShapesNameTheNode) {
  std::string error = ImportError(WithOpset(17, R"(
    g (float[2, 3] x, float[4] y) => (float[2, 3] z) { z = Mul(x, y) })"));
  EXPECT_TRUE(Contains(error, "node 'z' (Mul, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "do not broadcast")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

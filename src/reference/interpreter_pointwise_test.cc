// Pointwise ops of the reference interpreter: each op's semantics against a direct
// formula, rounding on store for half and integer dtypes, NaN rules, iota and Philox.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference/interpreter_test_util.h"
#include "support/philox.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::RunGraph;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> RunUnary(OpCode op, DType dtype, const std::vector<double>& x) {
  GraphBuilder b;
  Shape shape = {static_cast<int64_t>(x.size())};
  Value p = b.Parameter("x", dtype, shape);
  return RunGraph(b, b.Unary(op, p), {Tensor::FromDoubles(dtype, shape, x)});
}

std::vector<double> RunBinary(OpCode op, DType dtype, const std::vector<double>& x, const std::vector<double>& y) {
  GraphBuilder b;
  Shape shape = {static_cast<int64_t>(x.size())};
  Value p = b.Parameter("x", dtype, shape);
  Value q = b.Parameter("y", dtype, shape);
  return RunGraph(b, b.Binary(op, p, q), {Tensor::FromDoubles(dtype, shape, x), Tensor::FromDoubles(dtype, shape, y)});
}

TEST(InterpreterPointwiseTest, UnaryFloatOpsMatchTheirFormulas) {
  const std::vector<double> x = {-2.5, -0.5, 0.25, 1.0, 3.0};
  struct Case {
    OpCode op;
    double (*formula)(double);
  };
  const Case cases[] = {
      {OpCode::kNeg, [](double v) { return -v; }},
      {OpCode::kAbs, [](double v) { return v < 0 ? -v : v; }},
      {OpCode::kExp, [](double v) { return std::exp(v); }},
      {OpCode::kTanh, [](double v) { return (std::exp(2 * v) - 1) / (std::exp(2 * v) + 1); }},
      {OpCode::kSigmoid, [](double v) { return std::exp(v) / (1 + std::exp(v)); }},
      {OpCode::kErf, [](double v) { return std::erf(v); }},
      {OpCode::kSin, [](double v) { return std::sin(v); }},
      {OpCode::kCos, [](double v) { return std::cos(v); }},
      {OpCode::kRelu, [](double v) { return v > 0 ? v : 0.0; }},
      {OpCode::kFloor, [](double v) { return std::floor(v); }},
      {OpCode::kCeil, [](double v) { return std::ceil(v); }},
      {OpCode::kReciprocal, [](double v) { return 1 / v; }},
  };
  for (const Case& c : cases) {
    std::vector<double> out = RunUnary(c.op, DType::kF64, x);
    ASSERT_EQ(out.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], c.formula(x[i]), 1e-12) << OpName(c.op) << " " << x[i];
  }
}

TEST(InterpreterPointwiseTest, LogSqrtRsqrtOnPositiveAndEdgeValues) {
  std::vector<double> log = RunUnary(OpCode::kLog, DType::kF64, {std::exp(2.0), 1, 0, -1});
  EXPECT_NEAR(log[0], 2.0, 1e-15);
  EXPECT_EQ(log[1], 0.0);
  EXPECT_EQ(log[2], -kInf);
  EXPECT_TRUE(std::isnan(log[3]));
  EXPECT_EQ(RunUnary(OpCode::kSqrt, DType::kF64, {16, 2.25}), (std::vector<double>{4, 1.5}));
  EXPECT_EQ(RunUnary(OpCode::kRsqrt, DType::kF64, {16, 0.25}), (std::vector<double>{0.25, 2}));
}

TEST(InterpreterPointwiseTest, BinaryArithmetic) {
  std::vector<double> x = {6, -3, 2.5, 2}, y = {4, 2, -0.5, 10};
  EXPECT_EQ(RunBinary(OpCode::kAdd, DType::kF64, x, y), (std::vector<double>{10, -1, 2, 12}));
  EXPECT_EQ(RunBinary(OpCode::kSub, DType::kF64, x, y), (std::vector<double>{2, -5, 3, -8}));
  EXPECT_EQ(RunBinary(OpCode::kMul, DType::kF64, x, y), (std::vector<double>{24, -6, -1.25, 20}));
  EXPECT_EQ(RunBinary(OpCode::kDiv, DType::kF64, x, y), (std::vector<double>{1.5, -1.5, -5, 0.2}));
  EXPECT_EQ(RunBinary(OpCode::kPow, DType::kF64, {2, 9, 4}, {10, 0.5, -1}), (std::vector<double>{1024, 3, 0.25}));
  EXPECT_EQ(RunBinary(OpCode::kMax, DType::kF64, x, y), (std::vector<double>{6, 2, 2.5, 10}));
  EXPECT_EQ(RunBinary(OpCode::kMin, DType::kF64, x, y), (std::vector<double>{4, -3, -0.5, 2}));
}

TEST(InterpreterPointwiseTest, MaxAndMinPropagateNaNFromEitherSide) {
  std::vector<double> max = RunBinary(OpCode::kMax, DType::kF32, {kNaN, 1, 3}, {1, kNaN, -kInf});
  EXPECT_TRUE(std::isnan(max[0]));
  EXPECT_TRUE(std::isnan(max[1]));
  EXPECT_EQ(max[2], 3);
  std::vector<double> min = RunBinary(OpCode::kMin, DType::kF32, {kNaN, 1}, {1, kNaN});
  EXPECT_TRUE(std::isnan(min[0]));
  EXPECT_TRUE(std::isnan(min[1]));
}

TEST(InterpreterPointwiseTest, IntegerDivisionTruncatesTowardZero) {
  EXPECT_EQ(RunBinary(OpCode::kDiv, DType::kI32, {7, -7, 7, -7, 1}, {2, 2, -2, -2, 3}),
            (std::vector<double>{3, -3, -3, 3, 0}));
  EXPECT_EQ(RunBinary(OpCode::kDiv, DType::kI64, {-9}, {4}), (std::vector<double>{-2}));
}

TEST(InterpreterPointwiseTest, ModTakesTheDivisorsSignAndFModTheDividends) {
  EXPECT_EQ(RunBinary(OpCode::kMod, DType::kI32, {7, -7, 7, -7, 6}, {3, 3, -3, -3, 3}),
            (std::vector<double>{1, 2, -2, -1, 0}));
  EXPECT_EQ(RunBinary(OpCode::kFMod, DType::kI32, {7, -7, 7, -7}, {3, 3, -3, -3}), (std::vector<double>{1, -1, 1, -1}));
  EXPECT_EQ(RunBinary(OpCode::kMod, DType::kF64, {-5.5}, {2}), (std::vector<double>{0.5}));
}

TEST(InterpreterPointwiseTest, ComparisonsGiveBools) {
  std::vector<double> x = {1, 2, 3, kNaN}, y = {2, 2, 2, kNaN};
  EXPECT_EQ(RunBinary(OpCode::kEqual, DType::kF32, x, y), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(RunBinary(OpCode::kLess, DType::kF32, x, y), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(RunBinary(OpCode::kLessEqual, DType::kF32, x, y), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(RunBinary(OpCode::kGreater, DType::kF32, x, y), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(RunBinary(OpCode::kGreaterEqual, DType::kF32, x, y), (std::vector<double>{0, 1, 1, 0}));
}

TEST(InterpreterPointwiseTest, LogicalOpsAndPredicates) {
  std::vector<double> p = {0, 0, 1, 1}, q = {0, 1, 0, 1};
  EXPECT_EQ(RunBinary(OpCode::kAnd, DType::kBool, p, q), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(RunBinary(OpCode::kOr, DType::kBool, p, q), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(RunBinary(OpCode::kXor, DType::kBool, p, q), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(RunUnary(OpCode::kNot, DType::kBool, p), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(RunUnary(OpCode::kIsNaN, DType::kF32, {kNaN, 1, kInf}), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(RunUnary(OpCode::kIsInf, DType::kF32, {kNaN, -kInf, kInf, 0}), (std::vector<double>{0, 1, 1, 0}));
}

TEST(InterpreterPointwiseTest, WhereSelectsAndTakesTheDTypeOfItsValues) {
  GraphBuilder b;
  Value cond = b.Parameter("c", DType::kBool, {3});
  Value x = b.Parameter("x", DType::kI32, {3});
  Value y = b.Parameter("y", DType::kI32, {1});  // broadcast by the builder
  StatusOr<Tensor> out = interpreter_test::TryRun(
      b, b.Where(cond, x, y),
      {Tensor::FromDoubles(DType::kBool, {3}, {1, 0, 1}), Tensor::FromDoubles(DType::kI32, {3}, {10, 20, 30}),
       Tensor::FromDoubles(DType::kI32, {1}, {-1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->dtype(), DType::kI32);
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{10, -1, 30}));
}

TEST(InterpreterPointwiseTest, CastRoundsToTheTargetDType) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {5});
  Tensor input = Tensor::FromDoubles(DType::kF32, {5}, {2.75, -2.75, 0, 300, 0.5});
  {
    GraphBuilder bi;
    Value xi = bi.Parameter("x", DType::kF32, {5});
    EXPECT_EQ(RunGraph(bi, bi.Cast(xi, DType::kI32), {input}), (std::vector<double>{2, -2, 0, 300, 0}));
  }
  {
    GraphBuilder bb;
    Value xb = bb.Parameter("x", DType::kF32, {5});
    EXPECT_EQ(RunGraph(bb, bb.Cast(xb, DType::kBool), {input}), (std::vector<double>{1, 1, 0, 1, 1}));
  }
  // u8 wraps modulo 256 like a C cast: 300 -> 44.
  EXPECT_EQ(RunGraph(b, b.Cast(x, DType::kU8), {input}), (std::vector<double>{2, 254, 0, 44, 0}));
}

TEST(InterpreterPointwiseTest, BF16ResultsRoundToNearestEvenOnStore) {
  // bf16 keeps 8 significant bits: near 1 the spacing is 2^-7. 1 + 2^-8 is a tie and
  // rounds to the even 1.0; 1 + 3 * 2^-8 is a tie between 1 + 2^-7 (odd) and
  // 1 + 2^-6 (even) and rounds up to the even one.
  std::vector<double> out = RunBinary(OpCode::kAdd, DType::kBF16, {1, 1, 1}, {0.00390625, 0.01171875, 0.0078125});
  EXPECT_EQ(out, (std::vector<double>{1.0, 1.015625, 1.0078125}));
}

TEST(InterpreterPointwiseTest, F16ResultsRoundOnStore) {
  // f16 keeps 11 significant bits: from 2048 the spacing is 2. 2049 -> 2048 (even),
  // 2051 -> 2052 (even), and 70000 overflows to inf.
  std::vector<double> out = RunBinary(OpCode::kAdd, DType::kF16, {2048, 2048, 60000}, {1, 3, 10000});
  EXPECT_EQ(out, (std::vector<double>{2048, 2052, kInf}));
}

TEST(InterpreterPointwiseTest, F32ResultsRoundOnStore) {
  // 1 + 2^-30 is not an f32: it rounds to 1.
  EXPECT_EQ(RunBinary(OpCode::kAdd, DType::kF32, {1}, {std::ldexp(1.0, -30)}), (std::vector<double>{1}));
  EXPECT_EQ(RunBinary(OpCode::kAdd, DType::kF64, {1}, {std::ldexp(1.0, -30)}),
            (std::vector<double>{1 + std::ldexp(1.0, -30)}));
}

TEST(InterpreterPointwiseTest, IotaCountsAlongItsAxis) {
  {
    GraphBuilder b;
    EXPECT_EQ(RunGraph(b, b.Iota({2, 3}, 1, DType::kI64)), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  }
  {
    GraphBuilder b;
    EXPECT_EQ(RunGraph(b, b.Iota({2, 3}, 0, DType::kF32)), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  }
  {
    GraphBuilder b;
    EXPECT_EQ(RunGraph(b, b.Iota({2, 2, 2}, 1, DType::kI32)), (std::vector<double>{0, 0, 1, 1, 0, 0, 1, 1}));
  }
}

TEST(InterpreterPointwiseTest, RandomUniformIsPhiloxOfTheFlatIndex) {
  GraphBuilder b;
  std::vector<double> out = RunGraph(b, b.RandomUniform({3, 5}, DType::kF32, 77));
  ASSERT_EQ(out.size(), 15u);
  for (int i = 0; i < 15; ++i) EXPECT_EQ(out[i], PhiloxUniform(77, i)) << i;
  GraphBuilder again;
  EXPECT_EQ(RunGraph(again, again.RandomUniform({3, 5}, DType::kF32, 77)), out);
  GraphBuilder other;
  EXPECT_NE(RunGraph(other, other.RandomUniform({3, 5}, DType::kF32, 78)), out);
}

TEST(InterpreterPointwiseTest, RandomUniformRoundsToHalfTypes) {
  GraphBuilder b;
  std::vector<double> out = RunGraph(b, b.RandomUniform({64}, DType::kBF16, 5));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(out[i], RoundToDType(PhiloxUniform(5, i), DType::kBF16)) << i;
    EXPECT_GE(out[i], 0.0);
    EXPECT_LE(out[i], 1.0);
  }
}

TEST(InterpreterPointwiseTest, BinaryOpsBroadcastThroughTheBuilder) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3});
  Value row = b.Parameter("row", DType::kF64, {3});
  Value col = b.Parameter("col", DType::kF64, {2, 1});
  Value y = b.Add(b.Mul(x, row), col);
  std::vector<double> out = RunGraph(b, y, {F64({2, 3}, {1, 2, 3, 4, 5, 6}), F64({3}, {10, 100, 1000}), F64({2, 1}, {1, 2})});
  EXPECT_EQ(out, (std::vector<double>{11, 201, 3001, 42, 502, 6002}));
}

}  // namespace
}  // namespace tilefuse

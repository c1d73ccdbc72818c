// Composite ops of the reference interpreter: softmax, log-softmax, layer norm, GELU.
#include <gtest/gtest.h>

#include <cmath>

#include "reference/interpreter_test_util.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::Filled;
using interpreter_test::RunGraph;

TEST(InterpreterCompositesTest, SoftmaxRowsSumToOneAndFollowTheDefinition) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3});
  std::vector<double> in = {1, 2, 3, -1, 0, 5};
  std::vector<double> out = RunGraph(b, b.Softmax(x, -1), {F64({2, 3}, in)});
  ASSERT_EQ(out.size(), 6u);
  for (int r = 0; r < 2; ++r) {
    double denominator = 0;
    for (int j = 0; j < 3; ++j) denominator += std::exp(in[r * 3 + j]);
    double row_sum = 0;
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(out[r * 3 + j], std::exp(in[r * 3 + j]) / denominator, 1e-15);
      row_sum += out[r * 3 + j];
    }
    EXPECT_NEAR(row_sum, 1.0, 1e-15);
  }
}

TEST(InterpreterCompositesTest, SoftmaxOverAnOuterAxisOnly) {
  // Axis 0 of [2, 2]: each column is its own softmax (opset 13 semantics, not the
  // old "flatten from axis" form). Column 1 holds equal values -> 0.5 each.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 2});
  std::vector<double> out = RunGraph(b, b.Softmax(x, 0), {F64({2, 2}, {0, 7, std::log(3.0), 7})});
  EXPECT_NEAR(out[0], 0.25, 1e-15);
  EXPECT_NEAR(out[2], 0.75, 1e-15);
  EXPECT_NEAR(out[1], 0.5, 1e-15);
  EXPECT_NEAR(out[3], 0.5, 1e-15);
}

TEST(InterpreterCompositesTest, SoftmaxIsStableForLargeInputs) {
  GraphBuilder b;
  // exp(1000) overflows f64: only the max-subtracted form gives finite results.
  Value x = b.Parameter("x", DType::kF64, {2});
  std::vector<double> out = RunGraph(b, b.Softmax(x, 0), {F64({2}, {1000, 1000 + std::log(3.0)})});
  EXPECT_NEAR(out[0], 0.25, 1e-12);
  EXPECT_NEAR(out[1], 0.75, 1e-12);
}

TEST(InterpreterCompositesTest, LogSoftmaxIsLogOfSoftmax) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {4});
  std::vector<double> in = {0.5, -2, 3, 800};
  std::vector<double> out = RunGraph(b, b.LogSoftmax(x, 0), {F64({4}, in)});
  // log softmax(x)_i = x_i - m - log Σ exp(x_j - m) with m = 800.
  double log_sum = 0;
  for (double v : in) log_sum += std::exp(v - 800);
  log_sum = std::log(log_sum);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], in[i] - 800 - log_sum, 1e-12);
  EXPECT_NEAR(out[3], 0.0, 1e-12);
}

TEST(InterpreterCompositesTest, LayerNormGivesZeroMeanUnitVariance) {
  GraphBuilder b;
  Shape shape = {3, 8};
  Value x = b.Parameter("x", DType::kF64, shape);
  Value scale = b.Constant(Filled(DType::kF64, {8}, [](int64_t) { return 1.0; }));
  Value y = b.LayerNorm(x, scale, Value(), -1, 0.0);
  std::vector<double> out =
      RunGraph(b, y, {Filled(DType::kF64, shape, [](int64_t i) { return std::sin(i * 1.7) * 10 + i; })});
  for (int r = 0; r < 3; ++r) {
    double mean = 0, variance = 0;
    for (int j = 0; j < 8; ++j) mean += out[r * 8 + j] / 8;
    for (int j = 0; j < 8; ++j) variance += (out[r * 8 + j] - mean) * (out[r * 8 + j] - mean) / 8;
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(variance, 1.0, 1e-12);
  }
}

TEST(InterpreterCompositesTest, LayerNormAppliesEpsilonScaleAndBias) {
  // Row [1 3]: mean 2, population variance 1; with eps 3 the std is 2, so the
  // normalised row is [-0.5 0.5]; then scale [2 4] and bias [10 20].
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {1, 2});
  Value scale = b.Constant(F64({2}, {2, 4}));
  Value bias = b.Constant(F64({2}, {10, 20}));
  std::vector<double> out = RunGraph(b, b.LayerNorm(x, scale, bias, 1, 3.0), {F64({1, 2}, {1, 3})});
  EXPECT_EQ(out, (std::vector<double>{9, 22}));
}

TEST(InterpreterCompositesTest, LayerNormOverSeveralTrailingDims) {
  // Axis 1 of [2, 2, 2]: each batch entry's 4 values form one row.
  // Row [0 1 2 3]: mean 1.5, variance 1.25.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 2, 2});
  Value scale = b.Constant(F64({2, 2}, {1, 1, 1, 1}));
  std::vector<double> out = RunGraph(b, b.LayerNorm(x, scale, Value(), 1, 0.0),
                                {Filled(DType::kF64, {2, 2, 2}, [](int64_t i) { return static_cast<double>(i); })});
  double inv_std = 1 / std::sqrt(1.25);
  std::vector<double> row = {-1.5 * inv_std, -0.5 * inv_std, 0.5 * inv_std, 1.5 * inv_std};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(out[i], row[i % 4], 1e-15) << i;
}

TEST(InterpreterCompositesTest, GeluExactAtKnownPoints) {
  // gelu(x) = x Φ(x); Φ(1) = 0.841344746068543, Φ(-1) = 1 - Φ(1), Φ(2) = 0.977249868051821.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {4});
  std::vector<double> out = RunGraph(b, b.Gelu(x, false), {F64({4}, {0, 1, -1, 2})});
  EXPECT_EQ(out[0], 0.0);
  EXPECT_NEAR(out[1], 0.841344746068543, 1e-14);
  EXPECT_NEAR(out[2], -(1 - 0.841344746068543), 1e-14);
  EXPECT_NEAR(out[3], 2 * 0.977249868051821, 1e-14);
}

TEST(InterpreterCompositesTest, GeluTanhApproximation) {
  // 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) at x = 1: the argument is
  // 0.7978845608 · 1.044715 = 0.8335625; tanh of it = 0.6823840; half of 1.6823840.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2});
  std::vector<double> out = RunGraph(b, b.Gelu(x, true), {F64({2}, {1, -3})});
  EXPECT_NEAR(out[0], 0.841192, 2e-6);
  // At -3 the tail is tiny and negative: -1.5 (1 + tanh(-2.5551)) ≈ -0.00363739.
  EXPECT_NEAR(out[1], -0.0036374, 1e-6);
}

}  // namespace
}  // namespace tilefuse

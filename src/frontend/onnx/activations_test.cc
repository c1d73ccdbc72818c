#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

TEST(OnnxActivationsTest, PiecewiseActivations) {
  Graph g = Import(WithOpset(17, R"(
    g (float[4] x) => (float[4] relu, float[4] leaky, float[4] elu, float[4] hsig, float[4] hswish, float[4] thr) {
      relu = Relu(x)
      leaky = LeakyRelu <alpha = 0.1> (x)
      elu = Elu <alpha = 2.0> (x)
      hsig = HardSigmoid(x)
      hswish = HardSwish(x)
      thr = ThresholdedRelu <alpha = 0.5> (x)
    })"));
  std::vector<double> x = {-4, -1, 0.5, 3};
  std::vector<Tensor> in = {F32({4}, x)};
  ExpectNear(RunGraph(g, in, 0), {0, 0, 0.5, 3});
  ExpectNear(RunGraph(g, in, 1), {-0.4, -0.1, 0.5, 3});
  ExpectNear(RunGraph(g, in, 2), {2 * (std::exp(-4.0) - 1), 2 * (std::exp(-1.0) - 1), 0.5, 3});
  ExpectNear(RunGraph(g, in, 3), {0, 0.3, 0.6, 1});  // clamp(0.2 x + 0.5, 0, 1)
  ExpectNear(RunGraph(g, in, 4), {0, -1 * (1.0 / 3), 0.5 * (0.5 / 6 + 0.5), 3});
  ExpectNear(RunGraph(g, in, 5), {0, 0, 0, 3});
}

TEST(OnnxActivationsTest, SmoothActivations) {
  Graph g = Import(WithOpset(18, R"(
    g (float[3] x) => (float[3] sig, float[3] tanh, float[3] softplus, float[3] softsign, float[3] mish) {
      sig = Sigmoid(x)
      tanh = Tanh(x)
      softplus = Softplus(x)
      softsign = Softsign(x)
      mish = Mish(x)
    })"));
  std::vector<double> x = {-2, 0.5, 1.5};
  std::vector<Tensor> in = {F32({3}, x)};
  std::vector<double> sig, tanh, softplus, softsign, mish;
  for (double v : x) {
    sig.push_back(Sigmoid(v));
    tanh.push_back(std::tanh(v));
    softplus.push_back(std::log1p(std::exp(v)));
    softsign.push_back(v / (1 + std::fabs(v)));
    mish.push_back(v * std::tanh(std::log1p(std::exp(v))));
  }
  ExpectNear(RunGraph(g, in, 0), sig);
  ExpectNear(RunGraph(g, in, 1), tanh);
  ExpectNear(RunGraph(g, in, 2), softplus);
  ExpectNear(RunGraph(g, in, 3), softsign);
  ExpectNear(RunGraph(g, in, 4), mish);
}

TEST(OnnxActivationsTest, PReluBroadcastsTheSlope) {
  Graph g = Import(WithOpset(16, R"(
    g (float[2, 2] x, float[2] slope) => (float[2, 2] y) { y = PRelu(x, slope) })"));
  ExpectNear(RunGraph(g, {F32({2, 2}, {-1, -1, 2, -4}), F32({2}, {0.5, 0.25})}), {-0.5, -0.25, 2, -1});
}

TEST(OnnxActivationsTest, GeluIsTheComposite) {
  Graph g = Import(WithOpset(20, R"(
    g (float[3] x) => (float[3] exact, float[3] approx) {
      exact = Gelu(x)
      approx = Gelu <approximate = "tanh"> (x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kGelu);
  EXPECT_FALSE(OutputNode(g, 0).attrs.approximate_tanh);
  EXPECT_TRUE(OutputNode(g, 1).attrs.approximate_tanh);
  std::vector<double> x = {-1, 0.5, 2}, exact, approx;
  for (double v : x) {
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    approx.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  ExpectNear(RunGraph(g, {F32({3}, x)}, 0), exact);
  ExpectNear(RunGraph(g, {F32({3}, x)}, 1), approx);
}

TEST(OnnxActivationsTest, GeluRejectsAnUnknownApproximation) {
  std::string error = ImportError(WithOpset(20, R"(
    g (float[3] x) => (float[3] y) { y = Gelu <approximate = "fast"> (x) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Gelu, opset 20)")) << error;
  EXPECT_TRUE(Contains(error, "approximate")) << error;
}

TEST(OnnxActivationsTest, SoftmaxFromOpset13NormalizesOneAxis) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2] x) => (float[2, 2] y, float[2, 2] logy) {
      y = Softmax(x)
      logy = LogSoftmax <axis = 0> (x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kSoftmax);
  EXPECT_EQ(OutputNode(g, 0).attrs.axis, 1);  // default -1
  EXPECT_EQ(OutputNode(g, 1).op, OpCode::kLogSoftmax);
  EXPECT_EQ(OutputNode(g, 1).attrs.axis, 0);
  std::vector<Tensor> in = {F32({2, 2}, {0, 1, 2, 4})};
  double e1 = std::exp(1.0), e2 = std::exp(2.0);
  ExpectNear(RunGraph(g, in, 0), {1 / (1 + e1), e1 / (1 + e1), 1 / (1 + e2), e2 / (1 + e2)});
  // columns {0, 2} and {1, 4}
  ExpectNear(RunGraph(g, in, 1), {-std::log1p(std::exp(2.0)), -std::log1p(std::exp(3.0)),
                                  2 - std::log1p(std::exp(2.0)), 3 - std::log1p(std::exp(3.0))});
}

TEST(OnnxActivationsTest, SoftmaxBeforeOpset13FlattensTo2D) {
  Graph g = Import(WithOpset(11, R"(
    g (float[1, 2, 2] x) => (float[1, 2, 2] y) { y = Softmax(x) })"));  // default axis 1: rows of 4
  const Node& out = OutputNode(g);
  EXPECT_EQ(out.op, OpCode::kReshape);
  EXPECT_EQ(g.node(out.inputs[0]).op, OpCode::kSoftmax);
  EXPECT_EQ(g.node(out.inputs[0]).shape, (Shape{1, 4}));
  double total = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  ExpectNear(RunGraph(g, {F32({1, 2, 2}, {0, 1, 2, 3})}),
             {1 / total, std::exp(1.0) / total, std::exp(2.0) / total, std::exp(3.0) / total});
}

TEST(OnnxActivationsTest, HardmaxMarksTheFirstLargest) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[2, 3] y, float[2, 3] cols) {
      y = Hardmax(x)
      cols = Hardmax <axis = 0> (x)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, {1, 3, 3, 2, 0, -1})};
  ExpectNear(RunGraph(g, in, 0), {0, 1, 0, 1, 0, 0});
  ExpectNear(RunGraph(g, in, 1), {0, 1, 1, 1, 0, 0});
}

TEST(OnnxActivationsTest, HardmaxBeforeOpset13FlattensAtAxis) {
  // axis 1 of [2, 2, 2]: rows of 4 elements.
  Graph g = Import(WithOpset(11, "g (float[2, 2, 2] x) => (float[2, 2, 2] y) { y = Hardmax(x) }"));
  ExpectNear(RunGraph(g, {F32({2, 2, 2}, {1, 2, 3, 0, 9, 8, 9, 1})}), {0, 0, 1, 0, 1, 0, 0, 0});
}

}  // namespace
}  // namespace tilefuse::onnx_testing

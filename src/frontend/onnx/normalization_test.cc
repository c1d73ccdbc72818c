#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxNormalizationTest, LayerNormalizationIsTheComposite) {
  Graph g = Import(WithOpset(17, R"(
    g (float[2, 4] x, float[4] scale, float[4] bias) => (float[2, 4] y) {
      y = LayerNormalization <epsilon = 0.0> (x, scale, bias)
    })"));
  const Node& ln = OutputNode(g);
  EXPECT_EQ(ln.op, OpCode::kLayerNorm);
  EXPECT_EQ(ln.attrs.axis, 1);
  EXPECT_EQ(ln.inputs.size(), 3u);
  // Row {1, 2, 3, 4}: mean 2.5, variance 1.25.
  double inv = 1 / std::sqrt(1.25);
  // Row {4, 0, 0, 0}: mean 1, variance 3.
  double inv2 = 1 / std::sqrt(3.0);
  std::vector<Tensor> in = {F32({2, 4}, {1, 2, 3, 4, 4, 0, 0, 0}), F32({4}, {1, 1, 2, 2}), F32({4}, {0, 0, 0, 1})};
  ExpectNear(RunGraph(g, in), {-1.5 * inv, -0.5 * inv, 2 * 0.5 * inv, 2 * 1.5 * inv + 1,  //
                               3 * inv2, -inv2, -2 * inv2, -2 * inv2 + 1});
}

TEST(OnnxNormalizationTest, LayerNormalizationMeanAndInverseStdOutputs) {
  Graph g = Import(WithOpset(17, R"(
    g (float[2, 4] x, float[4] scale) => (float[2, 4] y, float[2, 1] mean, float[2, 1] inv_std) {
      y, mean, inv_std = LayerNormalization <epsilon = 0.0> (x, scale)
    })"));
  std::vector<Tensor> in = {F32({2, 4}, {1, 2, 3, 4, 4, 0, 0, 0}), F32({4}, {1, 1, 1, 1})};
  ExpectNear(RunGraph(g, in, 1), {2.5, 1});
  ExpectNear(RunGraph(g, in, 2), {1 / std::sqrt(1.25), 1 / std::sqrt(3.0)});
}

TEST(OnnxNormalizationTest, UnsupportedOutputFailsOnlyWhenUsed) {
  std::string text = R"(
    g (float[1, 1, 4, 4] x) => (float[1, 1, 2, 2] y%s) {
      y, indices = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (x)
    })";
  std::string unused = text, used = text;
  unused.replace(unused.find("%s"), 2, "");
  used.replace(used.find("%s"), 2, ", int64[1, 1, 2, 2] indices");
  Import(WithOpset(17, unused));
  std::string error = ImportError(WithOpset(17, used));
  EXPECT_TRUE(Contains(error, "node 'y' (MaxPool, opset 17)")) << error;
  EXPECT_TRUE(Contains(error, "output 1 ('indices') is not supported")) << error;
}

TEST(OnnxNormalizationTest, BatchNormalizationUsesRunningStatistics) {
  Graph g = Import(WithOpset(15, R"(
    g (float[1, 2, 2] x) => (float[1, 2, 2] y) {
      scale = Constant <value = float[2] {2.0, 1.0}> ()
      bias = Constant <value = float[2] {0.0, 1.0}> ()
      mean = Constant <value = float[2] {1.0, 0.0}> ()
      var = Constant <value = float[2] {4.0, 1.0}> ()
      y = BatchNormalization <epsilon = 0.0> (x, scale, bias, mean, var)
    })"));
  // channel 0: (x - 1) * 2 / 2; channel 1: x * 1 / 1 + 1
  ExpectNear(RunGraph(g, {F32({1, 2, 2}, {1, 3, 5, 7})}), {0, 2, 6, 8});
}

TEST(OnnxNormalizationTest, BatchNormalizationTrainingModeIsUnsupported) {
  std::string error = ImportError(WithOpset(15, R"(
    g (float[1, 2, 2] x, float[2] s, float[2] b, float[2] m, float[2] v) => (float[1, 2, 2] y) {
      y = BatchNormalization <training_mode = 1> (x, s, b, m, v)
    })"));
  EXPECT_TRUE(Contains(error, "node 'y' (BatchNormalization, opset 15)")) << error;
  EXPECT_TRUE(Contains(error, "training")) << error;
}

TEST(OnnxNormalizationTest, InstanceNormalizationPerSampleAndChannel) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 1, 4] x, float[1] s, float[1] b) => (float[1, 1, 4] y) {
      y = InstanceNormalization <epsilon = 0.0> (x, s, b)
    })"));
  double inv = 1 / std::sqrt(1.25);
  ExpectNear(RunGraph(g, {F32({1, 1, 4}, {1, 2, 3, 4}), F32({1}, {2}), F32({1}, {1})}),
             {1 - 3 * inv, 1 - inv, 1 + inv, 1 + 3 * inv});
}

}  // namespace
}  // namespace tilefuse::onnx_testing

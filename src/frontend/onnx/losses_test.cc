#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// log-probabilities of 2 samples over 3 classes; targets 2 and 0; class weights 1, 2, 3.
const std::vector<double> kLogProb = {-1, -2, -3, -4, -5, -6};

TEST(OnnxLossesTest, NegativeLogLikelihoodReductionsWithWeights) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x, int64[2] t, float[3] w) => (float[2] none, float sum, float mean) {
      none = NegativeLogLikelihoodLoss <reduction = "none"> (x, t, w)
      sum = NegativeLogLikelihoodLoss <reduction = "sum"> (x, t, w)
      mean = NegativeLogLikelihoodLoss(x, t, w)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, kLogProb), I64({2}, {2, 0}), F32({3}, {1, 2, 3})};
  // -x[0, 2] * w[2] = 9, -x[1, 0] * w[0] = 4; the mean divides by the picked weights 3 + 1.
  ExpectNear(RunGraph(g, in, 0), {9, 4});
  ExpectNear(RunGraph(g, in, 1), {13});
  ExpectNear(RunGraph(g, in, 2), {13.0 / 4});
}

TEST(OnnxLossesTest, NegativeLogLikelihoodIgnoreIndexDropsFromSumAndCount) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x, int64[2] t) => (float[2] none, float mean) {
      none = NegativeLogLikelihoodLoss <reduction = "none", ignore_index = 0> (x, t)
      mean = NegativeLogLikelihoodLoss <ignore_index = 0> (x, t)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, kLogProb), I64({2}, {2, 0})};
  ExpectNear(RunGraph(g, in, 0), {3, 0});
  ExpectNear(RunGraph(g, in, 1), {3});  // one sample counted
}

TEST(OnnxLossesTest, NegativeLogLikelihoodOverSpatialDims) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 2, 2] x, int64[1, 2] t) => (float[1, 2] none) {
      none = NegativeLogLikelihoodLoss <reduction = "none"> (x, t)
    })"));
  // x[0, c, d]: class 0 = {-1, -2}, class 1 = {-3, -4}; targets per position 1, 0.
  ExpectNear(RunGraph(g, {F32({1, 2, 2}, {-1, -2, -3, -4}), I64({1, 2}, {1, 0})}), {3, 2});
}

TEST(OnnxLossesTest, SoftmaxCrossEntropyAndLogProb) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2] x, int64[2] t) => (float loss, float[2, 2] log_prob) {
      loss, log_prob = SoftmaxCrossEntropyLoss(x, t)
    })"));
  // Row 0: equal scores, log p = -ln 2 each. Row 1: scores 0 and ln 3, p = 1/4 and 3/4.
  std::vector<Tensor> in = {F32({2, 2}, {0, 0, 0, std::log(3.0)}), I64({2}, {1, 0})};
  ExpectNear(RunGraph(g, in, 0), {(std::log(2.0) + std::log(4.0)) / 2});
  ExpectNear(RunGraph(g, in, 1), {-std::log(2.0), -std::log(2.0), -std::log(4.0), std::log(0.75)});
}

TEST(OnnxLossesTest, BadTargetShapeAndReductionNameTheNode) {
  std::string shape_error = ImportError(WithOpset(13, R"(
    g (float[2, 3] x, int64[3] t) => (float y) { y = NegativeLogLikelihoodLoss(x, t) })"));
  EXPECT_TRUE(Contains(shape_error, "(NegativeLogLikelihoodLoss, opset 13)")) << shape_error;
  EXPECT_TRUE(Contains(shape_error, "target has shape [3], expected [2]")) << shape_error;
  std::string reduction_error = ImportError(WithOpset(13, R"(
    g (float[2, 3] x, int64[2] t) => (float y) { y = SoftmaxCrossEntropyLoss <reduction = "max"> (x, t) })"));
  EXPECT_TRUE(Contains(reduction_error, "reduction 'max' must be none, sum or mean")) << reduction_error;
  std::string dtype_error = ImportError(WithOpset(13, R"(
    g (float[2, 3] x, float[2] t) => (float y) { y = NegativeLogLikelihoodLoss(x, t) })"));
  EXPECT_TRUE(Contains(dtype_error, "target must hold integers")) << dtype_error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// Expected values worked out by hand from the ONNX definition (half_pixel: source
// coordinate (x + 0.5) / scale - 0.5, clamped to the edge).
TEST(OnnxResizeTest, NearestAndLinearUpsampleHalfPixel) {
  Graph g = Import(WithOpset(19, R"(
    g (float[1, 2] x) => (float[1, 4] nearest, float[1, 4] linear) {
      scales = Constant <value = float[2] {1.0, 2.0}> ()
      nearest = Resize(x, , scales)
      linear = Resize <mode = "linear"> (x, , scales)
    })"));
  std::vector<Tensor> in = {F32({1, 2}, {1, 2})};
  ExpectNear(RunGraph(g, in, 0), {1, 1, 2, 2});
  ExpectNear(RunGraph(g, in, 1), {1, 1.25, 1.75, 2});
  EXPECT_EQ(CountOps(g, OpCode::kGather), 1);  // nearest picks, it does not multiply
}

TEST(OnnxResizeTest, AlignCornersWithSizesAndAxes) {
  Graph g = Import(WithOpset(19, R"(
    g (float[2, 2] x) => (float[2, 3] y) {
      sizes = Constant <value = int64[1] {3}> ()
      y = Resize <mode = "linear", coordinate_transformation_mode = "align_corners", axes = [-1]> (x, , , sizes)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 2}, {1, 2, 10, 20})}), {1, 1.5, 2, 10, 15, 20});
}

TEST(OnnxResizeTest, CropAndResizeExtrapolatesOutsideTheBox) {
  // roi [0, 2] over 3 elements to 3 outputs: source coordinates 0, 2, 4; 4 is outside.
  Graph g = Import(WithOpset(19, R"(
    g (float[3] x) => (float[3] y) {
      roi = Constant <value = float[2] {0.0, 2.0}> ()
      sizes = Constant <value = int64[1] {3}> ()
      y = Resize <mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize",
                  extrapolation_value = 10.0> (x, roi, , sizes)
    })"));
  ExpectNear(RunGraph(g, {F32({3}, {1, 2, 3})}), {1, 3, 10});
}

TEST(OnnxResizeTest, NearestDownsampleWithFloorAndAsymmetric) {
  // asymmetric: source x / 0.5 = 2x, exact: elements 0 and 2.
  Graph g = Import(WithOpset(13, R"(
    g (float[4] x) => (float[2] y) {
      scales = Constant <value = float[1] {0.5}> ()
      y = Resize <coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
    })"));
  ExpectNear(RunGraph(g, {F32({4}, {5, 6, 7, 8})}), {5, 7});
}

TEST(OnnxResizeTest, BadAttributesAndInputsNameTheNode) {
  std::string mode_error = ImportError(WithOpset(19, R"(
    g (float[2] x) => (float[4] y) {
      scales = Constant <value = float[1] {2.0}> ()
      y = Resize <mode = "bicubic"> (x, , scales)
    })"));
  EXPECT_TRUE(Contains(mode_error, "(Resize, opset 19)")) << mode_error;
  EXPECT_TRUE(Contains(mode_error, "unknown mode 'bicubic'")) << mode_error;
  std::string count_error = ImportError(WithOpset(19, R"(
    g (float[2, 2] x) => (float[4, 4] y) {
      scales = Constant <value = float[1] {2.0}> ()
      y = Resize(x, , scales)
    })"));
  EXPECT_TRUE(Contains(count_error, "scales has 1 values for 2 axes")) << count_error;
  std::string runtime_error = ImportError(WithOpset(19, R"(
    g (float[2] x, float[1] scales) => (float[4] y) { y = Resize(x, , scales) })"));
  EXPECT_TRUE(Contains(runtime_error, "scales")) << runtime_error;
}

// An antialiased downsample to one element of a 2^25-element axis: 67 million taps, each
// weighed at import (it took 8 s, and a fuzzer's timeout); refused as unsupported, naming
// the node, before any is computed.
TEST(OnnxResizeTest, AntialiasOverTooManyTapsIsRefused) {
  std::string error = ImportError(WithOpset(19, R"(
    g (float[1, 33554432] x) => (float[1, 1] y) {
      scales = Constant <value = float[2] {1.0, 3e-8}> ()
      y = Resize <mode = "linear", antialias = 1> (x, , scales)
    })"));
  EXPECT_TRUE(Contains(error, "(Resize, opset 19)")) << error;
  EXPECT_TRUE(Contains(error, "too many to weigh")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

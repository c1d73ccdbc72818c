#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// x = [1 2 3] padded by 2 before and 1 after in each mode (see padding.cc).
TEST(OnnxPaddingTest, FourModesOnOneAxis) {
  Graph g = Import(WithOpset(19, R"(
    g (float[3] x) => (float[6] constant, float[6] edge, float[6] reflect, float[6] wrap) {
      pads = Constant <value = int64[2] {2, 1}> ()
      fill = Constant <value = float {9.0}> ()
      constant = Pad(x, pads, fill)
      edge = Pad <mode = "edge"> (x, pads)
      reflect = Pad <mode = "reflect"> (x, pads)
      wrap = Pad <mode = "wrap"> (x, pads)
    })"));
  std::vector<Tensor> in = {F32({3}, {1, 2, 3})};
  ExpectNear(RunGraph(g, in, 0), {9, 9, 1, 2, 3, 9});
  ExpectNear(RunGraph(g, in, 1), {1, 1, 1, 2, 3, 3});
  ExpectNear(RunGraph(g, in, 2), {3, 2, 1, 2, 3, 2});
  ExpectNear(RunGraph(g, in, 3), {2, 3, 1, 2, 3, 1});
}

TEST(OnnxPaddingTest, AxesInputNegativePadsAndOldAttributes) {
  Graph g = Import(WithOpset(18, R"(
    g (float[2, 3] x) => (float[2, 3] y) {
      pads = Constant <value = int64[2] {-1, 1}> ()
      axes = Constant <value = int64[1] {-1}> ()
      y = Pad(x, pads, , axes)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 3}, {1, 2, 3, 4, 5, 6})}), {2, 3, 0, 5, 6, 0});
  Graph old = Import(WithOpset(10, R"(
    g (float[1, 2] x) => (float[3, 2] y) { y = Pad <pads = [1, 0, 1, 0], value = 7.0> (x) })"));
  ExpectNear(RunGraph(old, {F32({1, 2}, {1, 2})}), {7, 7, 1, 2, 7, 7});
}

TEST(OnnxPaddingTest, ReflectBeyondTheAxisNamesTheNode) {
  std::string error = ImportError(WithOpset(13, R"(
    g (float[2] x) => (float[5] y) {
      pads = Constant <value = int64[2] {3, 0}> ()
      y = Pad <mode = "reflect"> (x, pads)
    })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Pad, opset 13)")) << error;
}

TEST(OnnxPaddingTest, DepthToSpaceAndBack) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 4, 1, 1] x) => (float[1, 1, 2, 2] s, float[1, 4, 1, 1] d) {
      s = DepthToSpace <blocksize = 2> (x)
      d = SpaceToDepth <blocksize = 2> (s)
    })"));
  ExpectNear(RunGraph(g, {F32({1, 4, 1, 1}, {1, 2, 3, 4})}, 0), {1, 2, 3, 4});
  ExpectNear(RunGraph(g, {F32({1, 4, 1, 1}, {1, 2, 3, 4})}, 1), {1, 2, 3, 4});
}

TEST(OnnxPaddingTest, OneHotAndShrink) {
  Graph g = Import(WithOpset(13, R"(
    g (int64[3] i, float[3] x) => (float[3, 3] hot, float[3] shrunk) {
      depth = Constant <value = int64 {3}> ()
      values = Constant <value = float[2] {0.0, 5.0}> ()
      hot = OneHot(i, depth, values)
      shrunk = Shrink <bias = 1.0, lambd = 1.5> (x)
    })"));
  std::vector<Tensor> in = {I64({3}, {0, 2, -1}), F32({3}, {-2, 1, 3})};
  ExpectNear(RunGraph(g, in, 0), {5, 0, 0, 0, 0, 5, 0, 0, 5});
  ExpectNear(RunGraph(g, in, 1), {-1, 0, 2});
}

}  // namespace
}  // namespace tilefuse::onnx_testing

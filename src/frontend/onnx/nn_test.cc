#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

std::vector<double> Iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(OnnxNnTest, ConvTakesKernelFromTheWeightAndPadsSame) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 1, 3, 3] x, float[2, 1, 3, 3] w, float[2] b) => (float[1, 2, 3, 3] y) {
      y = Conv <auto_pad = "SAME_UPPER"> (x, w, b)
    })"));
  const Node& conv = OutputNode(g);
  EXPECT_EQ(conv.op, OpCode::kConv);
  EXPECT_EQ(conv.attrs.kernel, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(conv.attrs.pads, (std::vector<int64_t>{1, 1, 1, 1}));
  std::vector<double> ones(18, 1.0);
  std::vector<double> y = RunGraph(g, {F32({1, 1, 3, 3}, Iota(9)), F32({2, 1, 3, 3}, ones), F32({2}, {0, 100})});
  ASSERT_EQ(y.size(), 18u);
  EXPECT_EQ(y[4], 36);        // centre: sum of 0..8
  EXPECT_EQ(y[0], 0 + 1 + 3 + 4);  // corner
  EXPECT_EQ(y[9 + 4], 136);
}

TEST(OnnxNnTest, ConvWithStridesAndGroups) {
  Graph g = Import(WithOpset(11, R"(
    g (float[1, 2, 4, 4] x, float[2, 1, 2, 2] w) => (float[1, 2, 2, 2] y) {
      y = Conv <strides = [2, 2], group = 2, kernel_shape = [2, 2]> (x, w)
    })"));
  EXPECT_EQ(OutputNode(g).attrs.group, 2);
  EXPECT_EQ(OutputNode(g).shape, (Shape{1, 2, 2, 2}));
}

TEST(OnnxNnTest, MaxPoolCeilModeAddsEndPadding) {
  Graph g = Import(WithOpset(12, R"(
    g (float[1, 1, 5, 5] x) => (float[1, 1, 3, 3] y) {
      y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (x)
    })"));
  EXPECT_EQ(OutputNode(g).attrs.pads, (std::vector<int64_t>{0, 0, 1, 1}));
  ExpectNear(RunGraph(g, {F32({1, 1, 5, 5}, Iota(25))}), {6, 8, 9, 16, 18, 19, 21, 23, 24});
}

TEST(OnnxNnTest, AveragePoolExcludesPaddingByDefault) {
  Graph g = Import(WithOpset(11, R"(
    g (float[1, 1, 2, 2] x) => (float[1, 1, 2, 2] y) {
      y = AveragePool <kernel_shape = [2, 2], pads = [0, 0, 1, 1]> (x)
    })"));
  ExpectNear(RunGraph(g, {F32({1, 1, 2, 2}, {1, 2, 3, 4})}), {2.5, 3, 3.5, 4});
}

TEST(OnnxNnTest, GlobalPoolsReduceSpatialDims) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 2, 2, 2] x) => (float[1, 2, 1, 1] avg, float[1, 2, 1, 1] max) {
      avg = GlobalAveragePool(x)
      max = GlobalMaxPool(x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kReduceMean);
  ExpectNear(RunGraph(g, {F32({1, 2, 2, 2}, Iota(8))}, 0), {1.5, 5.5});
  ExpectNear(RunGraph(g, {F32({1, 2, 2, 2}, Iota(8))}, 1), {3, 7});
}

TEST(OnnxNnTest, PoolWithoutKernelShapeNamesTheNode) {
  std::string error = ImportError(WithOpset(13, R"(
    g (float[1, 1, 4, 4] x) => (float[1, 1, 2, 2] y) { y = MaxPool <strides = [2, 2]> (x) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (MaxPool, opset 13)")) << error;
  EXPECT_TRUE(Contains(error, "kernel_shape")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

const std::vector<double> kX = {1, 2, 3, 4, 5, 6};  // [2, 3]

TEST(OnnxReductionsTest, ReduceSumAxesAsInputFromOpset13) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[2, 1] rows, float[3] cols, float[1, 1] all) {
      one = Constant <value = int64[1] {1}> ()
      rows = ReduceSum(x, one)
      zero = Constant <value = int64[1] {0}> ()
      cols = ReduceSum <keepdims = 0> (x, zero)
      all = ReduceSum(x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kReduceSum);
  EXPECT_EQ(OutputNode(g, 0).attrs.axes, (std::vector<int64_t>{1}));
  ExpectNear(RunGraph(g, {F32({2, 3}, kX)}, 0), {6, 15});
  ExpectNear(RunGraph(g, {F32({2, 3}, kX)}, 1), {5, 7, 9});
  ExpectNear(RunGraph(g, {F32({2, 3}, kX)}, 2), {21});
}

TEST(OnnxReductionsTest, AxesAsAttributeBeforeOpset18) {
  Graph g = Import(WithOpset(17, R"(
    g (float[2, 3] x) => (float[2] mean, float[2, 1] max, float[1, 3] min, float[2, 1] prod) {
      mean = ReduceMean <axes = [-1], keepdims = 0> (x)
      max = ReduceMax <axes = [1]> (x)
      min = ReduceMin <axes = [0]> (x)
      prod = ReduceProd <axes = [1]> (x)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, kX)};
  ExpectNear(RunGraph(g, in, 0), {2, 5});
  ExpectNear(RunGraph(g, in, 1), {3, 6});
  ExpectNear(RunGraph(g, in, 2), {1, 2, 3});
  ExpectNear(RunGraph(g, in, 3), {6, 120});
}

TEST(OnnxReductionsTest, AxesAsInputFromOpset18AndNoopWithEmptyAxes) {
  Graph g = Import(WithOpset(18, R"(
    g (float[2, 3] x) => (float[2, 1] mean, float[2, 3] same) {
      one = Constant <value = int64[1] {1}> ()
      mean = ReduceMean(x, one)
      same = ReduceMax <noop_with_empty_axes = 1> (x)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 3}, kX)}, 0), {2, 5});
  EXPECT_EQ(OutputNode(g, 1).op, OpCode::kParameter);
}

TEST(OnnxReductionsTest, DerivedReductions) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[2] l2, float[2] l1, float[2] sq, float[2] lse) {
      l2 = ReduceL2 <axes = [1], keepdims = 0> (x)
      l1 = ReduceL1 <axes = [1], keepdims = 0> (x)
      sq = ReduceSumSquare <axes = [1], keepdims = 0> (x)
      lse = ReduceLogSumExp <axes = [1], keepdims = 0> (x)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, {1, -2, 2, 0, 3, -4})};
  ExpectNear(RunGraph(g, in, 0), {3, 5});
  ExpectNear(RunGraph(g, in, 1), {5, 7});
  ExpectNear(RunGraph(g, in, 2), {9, 25});
  ExpectNear(RunGraph(g, in, 3), {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(2.0)),
                                  std::log(1 + std::exp(3.0) + std::exp(-4.0))});
}

TEST(OnnxReductionsTest, RuntimeAxesAreAnError) {
  std::string error = ImportError(WithOpset(18, R"(
    g (float[2, 3] x, int64[1] axes) => (float[2, 1] y) { y = ReduceSum(x, axes) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (ReduceSum, opset 18)")) << error;
  EXPECT_TRUE(Contains(error, "axes")) << error;
}

TEST(OnnxReductionsTest, ArgMaxArgMinFirstAndLastIndex) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (int64[2, 1] first, int64[2] last, int64[1, 3] low) {
      first = ArgMax <axis = 1> (x)
      last = ArgMax <axis = -1, keepdims = 0, select_last_index = 1> (x)
      low = ArgMin(x)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, {1, 3, 3, 2, 0, -1})};
  EXPECT_EQ(OutputNode(g, 0).dtype, DType::kI64);
  ExpectNear(RunGraph(g, in, 0), {1, 0});
  ExpectNear(RunGraph(g, in, 1), {2, 0});
  ExpectNear(RunGraph(g, in, 2), {0, 1, 1});
}

TEST(OnnxReductionsTest, ArgMaxPicksTheFirstNaN) {
  Graph g = Import(WithOpset(13, "g (float[4] x) => (int64 y) { y = ArgMax <keepdims = 0> (x) }"));
  ExpectNear(RunGraph(g, {F32({4}, {1, std::nan(""), 5, std::nan("")})}), {1});
}

TEST(OnnxReductionsTest, CumSumForwardReverseExclusive) {
  Graph g = Import(WithOpset(14, R"(
    g (float[3] x, int32[2, 2] m) => (float[3] a, float[3] b, float[3] c, float[3] d, int32[2, 2] e) {
      zero = Constant <value = int64 {0}> ()
      a = CumSum(x, zero)
      b = CumSum <exclusive = 1> (x, zero)
      c = CumSum <reverse = 1> (x, zero)
      d = CumSum <reverse = 1, exclusive = 1> (x, zero)
      last = Constant <value = int32 {-1}> ()
      e = CumSum(m, last)
    })"));
  std::vector<Tensor> in = {F32({3}, {1, 2, 3}), Tensor::FromDoubles(DType::kI32, {2, 2}, {1, 2, 10, 20})};
  ExpectNear(RunGraph(g, in, 0), {1, 3, 6});
  ExpectNear(RunGraph(g, in, 1), {0, 1, 3});
  ExpectNear(RunGraph(g, in, 2), {6, 5, 3});
  ExpectNear(RunGraph(g, in, 3), {5, 3, 0});
  ExpectNear(RunGraph(g, in, 4), {1, 3, 10, 30});
}

TEST(OnnxReductionsTest, CumSumAxisOutOfRangeNamesTheNode) {
  std::string error = ImportError(WithOpset(14, R"(
    g (float[3] x) => (float[3] y) {
      axis = Constant <value = int64 {2}> ()
      y = CumSum(x, axis)
    })"));
  EXPECT_TRUE(Contains(error, "(CumSum, opset 14)")) << error;
  EXPECT_TRUE(Contains(error, "axis 2 is out of range for rank 1")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

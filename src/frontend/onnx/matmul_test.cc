#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxMatMulTest, BatchedMatMulBroadcastsBatchDims) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 1, 2] a, float[2, 2] b) => (float[2, 1, 2] y) { y = MatMul(a, b) })"));
  EXPECT_EQ(CountOps(g, OpCode::kMatMul), 1);
  // [1, 2] @ [[1, 2], [3, 4]] = [7, 10]; [3, 4] @ ... = [15, 22]
  ExpectNear(RunGraph(g, {F32({2, 1, 2}, {1, 2, 3, 4}), F32({2, 2}, {1, 2, 3, 4})}), {7, 10, 15, 22});
}

// MatMulInteger: zero points per row of A and per column of B, int32 out, exact where an f32
// sum would round (255 · 255 · 300 > 2^24).
TEST(OnnxMatMulTest, MatMulIntegerSubtractsZeroPointsPerRowAndColumnExactly) {
  Graph g = Import(WithOpset(10, R"(
    g (uint8[2, 3] a, int8[3, 2] b, uint8[2] za, int8[2] zb) => (int32[2, 2] y) { y = MatMulInteger(a, b, za, zb) })"));
  EXPECT_EQ(OutputNode(g).dtype, DType::kI32);
  // (a - za) = [[1-1, 2-1, 3-1], [4-2, 5-2, 6-2]] = [[0, 1, 2], [2, 3, 4]];
  // (b - zb) = [[1-1, 2+1], [3-1, 4+1], [5-1, 6+1]] = [[0, 3], [2, 5], [4, 7]].
  ExpectNear(RunGraph(g, {Tensor::FromDoubles(DType::kU8, {2, 3}, {1, 2, 3, 4, 5, 6}), Tensor::FromDoubles(DType::kI8, {3, 2}, {1, 2, 3, 4, 5, 6}),
                          Tensor::FromDoubles(DType::kU8, {2}, {1, 2}), Tensor::FromDoubles(DType::kI8, {2}, {1, -1})}),
             {10, 19, 22, 49}, 0);
  Graph wide = Import(WithOpset(10, R"(
    g (uint8[1, 300] a, uint8[300, 1] b) => (int32[1, 1] y) { y = MatMulInteger(a, b) })"));
  const std::vector<double> all_255(300, 255.0);
  ExpectNear(RunGraph(wide, {Tensor::FromDoubles(DType::kU8, {1, 300}, all_255), Tensor::FromDoubles(DType::kU8, {300, 1}, all_255)}),
             {255.0 * 255.0 * 300.0}, 0);
  EXPECT_NE(ImportError(WithOpset(10, R"(
    g (float[2, 3] a, int8[3, 2] b) => (int32[2, 2] y) { y = MatMulInteger(a, b) })")).find("A is f32"), std::string::npos);
}

TEST(OnnxMatMulTest, MatMulOfVectors) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3] a, float[3, 2] b) => (float[2] y) { y = MatMul(a, b) })"));
  EXPECT_EQ(OutputNode(g).shape, (Shape{2}));
  ExpectNear(RunGraph(g, {F32({3}, {1, 2, 3}), F32({3, 2}, {1, 0, 0, 1, 1, 1})}), {4, 5});
}

TEST(OnnxMatMulTest, GemmWithTransposesAlphaBetaAndBias) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2] a, float[3, 2] b, float[3] c) => (float[2, 3] y) {
      y = Gemm <transA = 1, transB = 1, alpha = 2.0, beta = 0.5> (a, b, c)
    })"));
  // A^T = [[1, 3], [2, 4]]; B^T = [[1, 0, 1], [0, 1, 1]]
  // A^T B^T = [[1, 3, 4], [2, 4, 6]]; y = 2 * that + 0.5 * [10, 20, 30]
  ExpectNear(RunGraph(g, {F32({2, 2}, {1, 2, 3, 4}), F32({3, 2}, {1, 0, 0, 1, 1, 1}), F32({3}, {10, 20, 30})}),
             {7, 16, 23, 9, 18, 27});
}

TEST(OnnxMatMulTest, GemmWithoutBias) {
  Graph g = Import(WithOpset(13, R"(
    g (float[1, 2] a, float[2, 1] b) => (float[1, 1] y) { y = Gemm(a, b) })"));
  ExpectNear(RunGraph(g, {F32({1, 2}, {2, 3}), F32({2, 1}, {4, 5})}), {23});
}

TEST(OnnxMatMulTest, InnerDimMismatchNamesTheNode) {
  std::string error = ImportError(WithOpset(13, R"(
    g (float[2, 3] a, float[2, 3] b) => (float[2, 3] y) { y = MatMul(a, b) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (MatMul, opset 13)")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

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

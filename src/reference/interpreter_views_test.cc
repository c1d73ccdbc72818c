// Broadcast and view ops of the reference interpreter, with expected values written
// out by hand from the ONNX / numpy definitions.
#include <gtest/gtest.h>

#include <limits>

#include "reference/interpreter_test_util.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::Filled;
using interpreter_test::RunGraph;
using interpreter_test::TryRun;

// 0, 1, 2, ... as f64 of `shape`.
Tensor Counting(Shape shape) { return Filled(DType::kF64, shape, [](int64_t i) { return static_cast<double>(i); }); }

TEST(InterpreterViewsTest, BroadcastRepeatsAlongSizeOneAndMissingDims) {
  {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {3});
    EXPECT_EQ(RunGraph(b, b.BroadcastTo(x, {2, 3}), {F64({3}, {1, 2, 3})}), (std::vector<double>{1, 2, 3, 1, 2, 3}));
  }
  {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {2, 1});
    EXPECT_EQ(RunGraph(b, b.BroadcastTo(x, {2, 3}), {F64({2, 1}, {7, 8})}), (std::vector<double>{7, 7, 7, 8, 8, 8}));
  }
  {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {});
    EXPECT_EQ(RunGraph(b, b.BroadcastTo(x, {2, 2}), {F64({}, {5})}), (std::vector<double>{5, 5, 5, 5}));
  }
}

TEST(InterpreterViewsTest, ReshapeKeepsRowMajorOrder) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3});
  StatusOr<Tensor> out = TryRun(b, b.Reshape(x, {3, 2}), {Counting({2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->shape(), (Shape{3, 2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST(InterpreterViewsTest, TransposeTwoDims) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3});
  // [[0 1 2] [3 4 5]]^T = [[0 3] [1 4] [2 5]]
  EXPECT_EQ(RunGraph(b, b.Transpose(x, {1, 0}), {Counting({2, 3})}), (std::vector<double>{0, 3, 1, 4, 2, 5}));
}

TEST(InterpreterViewsTest, TransposeThreeDimsFollowsPerm) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3, 4});
  // out[i][j][k] = x[j][k][i] with perm {2, 0, 1}; x[a][b][c] = 12a + 4b + c.
  std::vector<double> out = RunGraph(b, b.Transpose(x, {2, 0, 1}), {Counting({2, 3, 4})});
  ASSERT_EQ(out.size(), 24u);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(out[i * 6 + j * 3 + k], 12 * j + 4 * k + i);
}

TEST(InterpreterViewsTest, SliceWithPositiveSteps) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {3, 5});
  // rows 1..2, columns 0, 2, 4
  std::vector<double> out = RunGraph(b, b.Slice(x, {1, 0}, {3, 5}, {0, 1}, {1, 2}), {Counting({3, 5})});
  EXPECT_EQ(out, (std::vector<double>{5, 7, 9, 10, 12, 14}));
}

TEST(InterpreterViewsTest, SliceWithNegativeStepReverses) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {7});
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  // x[::-2] of 0..6 = 6, 4, 2, 0
  std::vector<double> out = RunGraph(b, b.Slice(x, {-1}, {kMin}, {0}, {-2}), {Counting({7})});
  EXPECT_EQ(out, (std::vector<double>{6, 4, 2, 0}));
}

TEST(InterpreterViewsTest, SliceNegativeStepOnInnerDim) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 4});
  // x[:, 2:0:-1] = [[2 1] [6 5]]
  std::vector<double> out = RunGraph(b, b.Slice(x, {2}, {0}, {1}, {-1}), {Counting({2, 4})});
  EXPECT_EQ(out, (std::vector<double>{2, 1, 6, 5}));
}

TEST(InterpreterViewsTest, ConcatAlongInnerAndOuterAxes) {
  {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {2, 2});
    Value y = b.Parameter("y", DType::kF64, {2, 1});
    std::vector<double> out = RunGraph(b, b.Concat({x, y, x}, 1), {F64({2, 2}, {1, 2, 3, 4}), F64({2, 1}, {9, 8})});
    EXPECT_EQ(out, (std::vector<double>{1, 2, 9, 1, 2, 3, 4, 8, 3, 4}));
  }
  {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {1, 2});
    Value y = b.Parameter("y", DType::kF64, {2, 2});
    std::vector<double> out = RunGraph(b, b.Concat({x, y}, 0), {F64({1, 2}, {1, 2}), F64({2, 2}, {3, 4, 5, 6})});
    EXPECT_EQ(out, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  }
}

TEST(InterpreterViewsTest, SplitPartsAreSlices) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 5});
  std::vector<Value> parts = b.Split(x, 1, {2, 3});
  ASSERT_EQ(parts.size(), 2u);
  StatusOr<Tensor> second = TryRun(b, parts[1], {Counting({2, 5})});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->ToDoubles(), (std::vector<double>{2, 3, 4, 7, 8, 9}));
}

TEST(InterpreterViewsTest, GatherRowsWithNegativeIndex) {
  GraphBuilder b;
  Value table = b.Parameter("table", DType::kF32, {4, 2});
  Value ids = b.Parameter("ids", DType::kI64, {2, 2});
  // Embedding lookup: rows 3, -1 (= 3), 0, -4 (= 0).
  std::vector<double> out = RunGraph(b, b.Gather(table, ids, 0),
                                {Tensor::FromDoubles(DType::kF32, {4, 2}, {0, 1, 10, 11, 20, 21, 30, 31}),
                                 Tensor::FromDoubles(DType::kI64, {2, 2}, {3, -1, 0, -4})});
  EXPECT_EQ(out, (std::vector<double>{30, 31, 30, 31, 0, 1, 0, 1}));
}

TEST(InterpreterViewsTest, GatherAlongInnerAxis) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {2, 3});
  Value ids = b.Constant(Tensor::FromDoubles(DType::kI32, {2}, {2, -3}));
  StatusOr<Tensor> out = TryRun(b, b.Gather(x, ids, 1), {Counting({2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{2, 2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{2, 0, 5, 3}));
}

TEST(InterpreterViewsTest, GatherWithScalarIndexDropsTheAxis) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {3, 2});
  StatusOr<Tensor> out = TryRun(b, b.Gather(x, b.Scalar(1, DType::kI64), 0), {Counting({3, 2})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{2, 3}));
}

TEST(InterpreterViewsTest, GatherOutOfRangeIsAnError) {
  for (double bad : {3.0, -4.0}) {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF64, {3});
    Value ids = b.Constant(Tensor::FromDoubles(DType::kI64, {2}, {0, bad}));
    StatusOr<Tensor> out = TryRun(b, b.Gather(x, ids, 0), {Counting({3})});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("out of range [-3, 3)"), std::string::npos) << out.status().message();
  }
}

TEST(InterpreterViewsTest, GatherElementsPicksAlongTheAxis) {
  // ONNX example: data [[1 2] [3 4]], indices [[0 0] [1 0]], axis 1 -> [[1 1] [4 3]].
  GraphBuilder b;
  Value data = b.Parameter("data", DType::kF64, {2, 2});
  Value ids = b.Parameter("ids", DType::kI64, {2, 2});
  std::vector<double> out = RunGraph(b, b.GatherElements(data, ids, 1),
                                {F64({2, 2}, {1, 2, 3, 4}), Tensor::FromDoubles(DType::kI64, {2, 2}, {0, 0, 1, 0})});
  EXPECT_EQ(out, (std::vector<double>{1, 1, 4, 3}));
}

TEST(InterpreterViewsTest, GatherElementsAxisZeroWithNegativeIndexAndSmallerIndices) {
  // ONNX example 2 (axis 0), with -1 for the last row: data 3x3 of 1..9,
  // indices [[1 2 0] [2 0 -3]] -> [[4 8 3] [7 2 3]].
  GraphBuilder b;
  Value data = b.Parameter("data", DType::kF64, {3, 3});
  Value ids = b.Parameter("ids", DType::kI32, {2, 3});
  std::vector<double> out = RunGraph(b, b.GatherElements(data, ids, 0),
                                {F64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
                                 Tensor::FromDoubles(DType::kI32, {2, 3}, {1, 2, 0, -1, 0, -3})});
  EXPECT_EQ(out, (std::vector<double>{4, 8, 3, 7, 2, 3}));
}

TEST(InterpreterViewsTest, GatherElementsOutOfRangeIsAnError) {
  GraphBuilder b;
  Value data = b.Parameter("data", DType::kF64, {2, 2});
  Value ids = b.Constant(Tensor::FromDoubles(DType::kI64, {2, 2}, {0, 2, 1, 0}));
  StatusOr<Tensor> out = TryRun(b, b.GatherElements(data, ids, 1), {Counting({2, 2})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("index 2 out of range [-2, 2)"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace tilefuse

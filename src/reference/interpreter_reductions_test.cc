// Reductions and matmul of the reference interpreter.
#include <gtest/gtest.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmath>
#include <limits>

#include "reference/interpreter_test_util.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::Filled;
using interpreter_test::RunGraph;
using interpreter_test::TryRun;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> Reduce(OpCode op, const Tensor& x, std::vector<int64_t> axes, bool keepdims,
                           Shape* shape_out = nullptr) {
  GraphBuilder b;
  Value p = b.Parameter("x", x.dtype(), x.shape());
  StatusOr<Tensor> out = TryRun(b, b.Reduce(op, p, std::move(axes), keepdims), {x});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  if (shape_out) *shape_out = out->shape();
  return out->ToDoubles();
}

// [[1 2 3] [4 5 6]]
Tensor Matrix23() { return F64({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(InterpreterReductionsTest, EachReductionOverRows) {
  EXPECT_EQ(Reduce(OpCode::kReduceSum, Matrix23(), {1}, false), (std::vector<double>{6, 15}));
  EXPECT_EQ(Reduce(OpCode::kReduceMax, Matrix23(), {1}, false), (std::vector<double>{3, 6}));
  EXPECT_EQ(Reduce(OpCode::kReduceMin, Matrix23(), {1}, false), (std::vector<double>{1, 4}));
  EXPECT_EQ(Reduce(OpCode::kReduceMean, Matrix23(), {1}, false), (std::vector<double>{2, 5}));
  EXPECT_EQ(Reduce(OpCode::kReduceProd, Matrix23(), {1}, false), (std::vector<double>{6, 120}));
}

TEST(InterpreterReductionsTest, OverColumnsWithKeepdims) {
  Shape shape;
  EXPECT_EQ(Reduce(OpCode::kReduceSum, Matrix23(), {0}, true, &shape), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(shape, (Shape{1, 3}));
  EXPECT_EQ(Reduce(OpCode::kReduceMean, Matrix23(), {-1}, true, &shape), (std::vector<double>{2, 5}));
  EXPECT_EQ(shape, (Shape{2, 1}));
}

TEST(InterpreterReductionsTest, OverAllAxesAndNonAdjacentAxes) {
  Shape shape;
  EXPECT_EQ(Reduce(OpCode::kReduceSum, Matrix23(), {}, false, &shape), (std::vector<double>{21}));
  EXPECT_EQ(shape, Shape{});
  // x[a][b][c] = 6a + 3b + c over [2, 2, 3]; summing a and c leaves one value per b.
  Tensor x = Filled(DType::kF64, {2, 2, 3}, [](int64_t i) { return static_cast<double>(i); });
  std::vector<double> out = Reduce(OpCode::kReduceSum, x, {0, 2}, true, &shape);
  EXPECT_EQ(shape, (Shape{1, 2, 1}));
  for (int bdim = 0; bdim < 2; ++bdim) {
    double expected = 0;
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 3; ++c) expected += 6 * a + 3 * bdim + c;
    EXPECT_EQ(out[bdim], expected);
  }
}

TEST(InterpreterReductionsTest, MaxAndMinPropagateNaN) {
  Tensor x = F64({2, 3}, {1, kNaN, 3, 4, 5, 6});
  std::vector<double> max = Reduce(OpCode::kReduceMax, x, {1}, false);
  EXPECT_TRUE(std::isnan(max[0]));
  EXPECT_EQ(max[1], 6);
  std::vector<double> min = Reduce(OpCode::kReduceMin, F64({3}, {kNaN, -1, 2}), {0}, false);
  EXPECT_TRUE(std::isnan(min[0]));
}

TEST(InterpreterReductionsTest, EmptyReductionsGiveTheIdentity) {
  Tensor empty = F64({2, 0}, {});
  EXPECT_EQ(Reduce(OpCode::kReduceSum, empty, {1}, false), (std::vector<double>{0, 0}));
  EXPECT_EQ(Reduce(OpCode::kReduceProd, empty, {1}, false), (std::vector<double>{1, 1}));
  EXPECT_EQ(Reduce(OpCode::kReduceMax, empty, {1}, false), (std::vector<double>{-kInf, -kInf}));
  EXPECT_EQ(Reduce(OpCode::kReduceMin, empty, {1}, false), (std::vector<double>{kInf, kInf}));
  std::vector<double> mean = Reduce(OpCode::kReduceMean, empty, {1}, false);
  ASSERT_EQ(mean.size(), 2u);
  EXPECT_TRUE(std::isnan(mean[0]));
}

TEST(InterpreterReductionsTest, IntegerMeanTruncatesOnStore) {
  Tensor x = Tensor::FromDoubles(DType::kI32, {4}, {1, 2, 2, 2});
  EXPECT_EQ(Reduce(OpCode::kReduceMean, x, {0}, false), (std::vector<double>{1}));  // 7/4
}

TEST(InterpreterMatMulTest, TwoByThreeTimesThreeByTwo) {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kF64, {2, 3});
  Value c = b.Parameter("b", DType::kF64, {3, 2});
  // [[1 2 3] [4 5 6]] · [[7 8] [9 10] [11 12]] = [[58 64] [139 154]]
  std::vector<double> out = RunGraph(b, b.MatMul(a, c), {Matrix23(), F64({3, 2}, {7, 8, 9, 10, 11, 12})});
  EXPECT_EQ(out, (std::vector<double>{58, 64, 139, 154}));
}

TEST(InterpreterMatMulTest, BatchDimsBroadcast) {
  // a [2, 1, 2, 3] x b [3, 3, 2] -> [2, 3, 2, 2]; compared with the defining sum.
  Shape a_shape = {2, 1, 2, 3}, b_shape = {3, 3, 2};
  Tensor a = Filled(DType::kF64, a_shape, [](int64_t i) { return 0.5 * i - 3; });
  Tensor bt = Filled(DType::kF64, b_shape, [](int64_t i) { return (i % 7) - 2.0; });
  GraphBuilder b;
  Value pa = b.Parameter("a", DType::kF64, a_shape);
  Value pb = b.Parameter("b", DType::kF64, b_shape);
  StatusOr<Tensor> out = TryRun(b, b.MatMul(pa, pb), {a, bt});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->shape(), (Shape{2, 3, 2, 2}));
  for (int i0 = 0; i0 < 2; ++i0)
    for (int i1 = 0; i1 < 3; ++i1)
      for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 2; ++n) {
          double expected = 0;
          for (int k = 0; k < 3; ++k) expected += a.GetDouble(i0 * 6 + m * 3 + k) * bt.GetDouble(i1 * 6 + k * 2 + n);
          EXPECT_EQ(out->GetDouble(((i0 * 3 + i1) * 2 + m) * 2 + n), expected) << i0 << i1 << m << n;
        }
}

// Large products compute their rows on several threads; each row is one thread's sum in
// the same order, so one thread and many give the same bits.
TEST(InterpreterMatMulTest, ThreadCountDoesNotChangeTheResult) {
#ifdef _OPENMP
  Shape a_shape = {3, 160, 300}, b_shape = {300, 170};  // 24M multiply-adds: the threaded path
  Tensor a = Filled(DType::kF32, a_shape, [](int64_t i) { return std::sin(0.37 * i) * 3; });
  Tensor bt = Filled(DType::kF32, b_shape, [](int64_t i) { return std::cos(1.3 * i) / 7; });
  auto run = [&](int threads) {
    const int before = omp_get_max_threads();
    omp_set_num_threads(threads);
    GraphBuilder b;
    Value pa = b.Parameter("a", DType::kF32, a_shape);
    Value pb = b.Parameter("b", DType::kF32, b_shape);
    std::vector<double> out = RunGraph(b, b.MatMul(pa, pb), {a, bt});
    omp_set_num_threads(before);
    return out;
  };
  const std::vector<double> one = run(1), several = run(4);
  ASSERT_EQ(one.size(), size_t{3 * 160 * 170});
  EXPECT_EQ(several, one);
  // And the values are the product's (a spot check against the defining sum, in f64).
  double expected = 0;
  for (int p = 0; p < 300; ++p) expected += a.GetDouble(2 * 160 * 300 + 77 * 300 + p) * bt.GetDouble(p * 170 + 101);
  EXPECT_NEAR(one[(2 * 160 + 77) * 170 + 101], expected, 1e-5 * std::abs(expected) + 1e-6);
#else
  GTEST_SKIP() << "built without OpenMP: the reference's products run on one thread";
#endif
}

TEST(InterpreterMatMulTest, VectorOperandsThroughTheBuilder) {
  GraphBuilder b;
  Value v = b.Parameter("v", DType::kF64, {3});
  Value m = b.Parameter("m", DType::kF64, {3, 2});
  // [1 2 3] · [[1 0] [0 1] [1 1]] = [4 5]
  StatusOr<Tensor> out = TryRun(b, b.MatMul(v, m), {F64({3}, {1, 2, 3}), F64({3, 2}, {1, 0, 0, 1, 1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{4, 5}));
}

TEST(InterpreterMatMulTest, ZeroTimesNaNIsNaN) {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kF32, {1, 2});
  Value c = b.Parameter("b", DType::kF32, {2, 1});
  std::vector<double> out = RunGraph(b, b.MatMul(a, c), {Tensor::FromDoubles(DType::kF32, {1, 2}, {0, 1}),
                                                    Tensor::FromDoubles(DType::kF32, {2, 1}, {kNaN, 1})});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isnan(out[0]));
}

TEST(InterpreterMatMulTest, HalfResultsRoundOnceAfterF64Accumulation) {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kF16, {1, 5});
  Value c = b.Parameter("b", DType::kF16, {5, 1});
  std::vector<double> out = RunGraph(b, b.MatMul(a, c), {Tensor::FromDoubles(DType::kF16, {1, 5}, {1024, 0.25, 0.25, 0.25, 0.25}),
                                                    Tensor::FromDoubles(DType::kF16, {5, 1}, {1, 1, 1, 1, 1})});
  // f16 spacing at 1024 is 1: 1024 + 1 exactly, whereas rounding after every add would
  // keep 1024 (each +0.25 is below half a spacing).
  EXPECT_EQ(out, (std::vector<double>{1025}));
}

}  // namespace
}  // namespace tilefuse

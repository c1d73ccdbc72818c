#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// The k best indices of row r of a [rows, n] matrix (ties: lower index first,
// NaN above every number), by a stable sort.
std::vector<double> TopIndices(const std::vector<double>& x, int64_t n, int64_t r, int64_t k, bool largest) {
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int64_t i) { return x[r * n + i]; };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    double xa = key(a), xb = key(b);
    if (std::isnan(xa) || std::isnan(xb)) return largest ? std::isnan(xa) && !std::isnan(xb) : !std::isnan(xa) && std::isnan(xb);
    return largest ? xa > xb : xa < xb;
  });
  return std::vector<double>(idx.begin(), idx.begin() + k);
}

TEST(OnnxTopKTest, LargestAlongTheLastAxisWithTies) {
  Graph g = Import(WithOpset(11, R"(
    g (float[3, 6] x) => (float[3, 4] values, int64[3, 4] indices) {
      k = Constant <value = int64[1] {4}> ()
      values, indices = TopK(x, k)
    })"));
  std::vector<double> x = RandomNonZero(18, 21);
  x[2] = x[4];    // a tie in row 0
  x[7] = x[11];   // and in row 1
  std::vector<double> values, indices;
  for (int64_t r = 0; r < 3; ++r)
    for (double i : TopIndices(x, 6, r, 4, true)) {
      indices.push_back(i);
      values.push_back(x[r * 6 + static_cast<int64_t>(i)]);
    }
  std::vector<Tensor> in = {F32({3, 6}, x)};
  ExpectNear(RunGraph(g, in, 0), values);
  EXPECT_EQ(RunGraph(g, in, 1), indices);
}

TEST(OnnxTopKTest, SmallestAlongAxisZeroAndNegativeAxis) {
  Graph g = Import(WithOpset(11, R"(
    g (float[5, 2] x) => (float[2, 2] values, int64[2, 2] indices, float[5, 1] last) {
      k = Constant <value = int64[1] {2}> ()
      one = Constant <value = int64[1] {1}> ()
      values, indices = TopK <axis = 0, largest = 0> (x, k)
      last, unused = TopK <axis = -1, largest = 0, sorted = 0> (x, one)
    })"));
  std::vector<double> x = RandomNonZero(10, 22);
  std::vector<double> columns(10);  // x transposed: row c holds column c
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 2; ++c) columns[c * 5 + r] = x[r * 2 + c];
  std::vector<double> values(4), indices(4), last;
  for (int c = 0; c < 2; ++c) {
    std::vector<double> best = TopIndices(columns, 5, c, 2, false);
    for (int p = 0; p < 2; ++p) {
      indices[p * 2 + c] = best[p];
      values[p * 2 + c] = columns[c * 5 + static_cast<int64_t>(best[p])];
    }
  }
  for (int r = 0; r < 5; ++r) last.push_back(std::min(x[r * 2], x[r * 2 + 1]));
  std::vector<Tensor> in = {F32({5, 2}, x)};
  ExpectNear(RunGraph(g, in, 0), values);
  EXPECT_EQ(RunGraph(g, in, 1), indices);
  ExpectNear(RunGraph(g, in, 2), last);
}

TEST(OnnxTopKTest, NaNRanksAboveNumbersAndOpset1TakesKAsAttribute) {
  Graph g = Import(WithOpset(1, R"(
    g (float[1, 4] x) => (float[1, 3] values, int64[1, 3] indices) { values, indices = TopK <k = 3> (x) })"));
  std::vector<double> x = {0.5, NAN, -1.5, 2.0};
  std::vector<Tensor> in = {F32({1, 4}, x)};
  EXPECT_EQ(RunGraph(g, in, 1), TopIndices(x, 4, 0, 3, true));
  std::vector<double> values = RunGraph(g, in, 0);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], 2.0);
  EXPECT_EQ(values[2], 0.5);
}

TEST(OnnxTopKTest, IntegerInputs) {
  Graph g = Import(WithOpset(13, R"(
    g (int64[5] x) => (int64[3] values, int64[3] indices) {
      k = Constant <value = int64[1] {3}> ()
      values, indices = TopK(x, k)
    })"));
  std::vector<Tensor> in = {I64({5}, {4, -7, 9, 4, 12})};
  EXPECT_EQ(RunGraph(g, in, 0), (std::vector<double>{12, 9, 4}));
  EXPECT_EQ(RunGraph(g, in, 1), (std::vector<double>{4, 2, 0}));
}

TEST(OnnxTopKTest, BadKIsANamedError) {
  std::string too_big = ImportError(WithOpset(11, R"(
    g (float[2, 3] x) => (float[2, 4] values, int64[2, 4] indices) {
      k = Constant <value = int64[1] {4}> ()
      values, indices = TopK(x, k)
    })"));
  EXPECT_TRUE(Contains(too_big, "node 'values' (TopK, opset 11)")) << too_big;
  EXPECT_TRUE(Contains(too_big, "K = 4 must be in [0, 3]")) << too_big;

  std::string negative = ImportError(WithOpset(11, R"(
    g (float[2, 3] x) => (float[2, 1] values, int64[2, 1] indices) {
      k = Constant <value = int64[1] {-1}> ()
      values, indices = TopK(x, k)
    })"));
  EXPECT_TRUE(Contains(negative, "must be in [0, 3]")) << negative;

  std::string runtime = ImportError(WithOpset(11, R"(
    g (float[2, 3] x, int64[1] k) => (float[2, 1] values, int64[2, 1] indices) { values, indices = TopK(x, k) })"));
  EXPECT_TRUE(Contains(runtime, "must be known at import time")) << runtime;

  std::string axis = ImportError(WithOpset(11, R"(
    g (float[2, 3] x) => (float[2, 1] values, int64[2, 1] indices) {
      k = Constant <value = int64[1] {1}> ()
      values, indices = TopK <axis = 2> (x, k)
    })"));
  EXPECT_TRUE(Contains(axis, "axis 2 is out of range")) << axis;

  std::string huge = ImportError(WithOpset(11, R"(
    g (float[2097152] x) => (float[1] values, int64[1] indices) {
      k = Constant <value = int64[1] {1}> ()
      values, indices = TopK(x, k)
    })"));
  EXPECT_TRUE(Contains(huge, "pairwise comparison")) << huge;

  std::string missing_k = ImportError(WithOpset(11, R"(
    g (float[2, 3] x) => (float[2, 1] values) { values = TopK(x) })"));
  EXPECT_TRUE(Contains(missing_k, "K")) << missing_k;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

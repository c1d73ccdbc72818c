// Conv and pooling of the reference interpreter: small cases worked by hand, and a
// larger conv against the ONNX definition written as direct loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference/interpreter_test_util.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::Filled;
using interpreter_test::TryRun;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

PoolParams Params2D(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                    int64_t group = 1) {
  PoolParams p;
  p.kernel = std::move(kernel);
  p.strides = std::move(strides);
  p.pads = std::move(pads);
  p.dilations.assign(p.kernel.size(), 1);
  p.group = group;
  return p;
}

// 0, 1, 2, ... of `shape`, plus `offset`.
Tensor Counting(Shape shape, double offset = 0) {
  return Filled(DType::kF64, shape, [offset](int64_t i) { return static_cast<double>(i) + offset; });
}

StatusOr<Tensor> RunConv(const Tensor& x, const Tensor& w, const Tensor* bias, const PoolParams& p) {
  GraphBuilder b;
  Value px = b.Parameter("x", x.dtype(), x.shape());
  Value pw = b.Parameter("w", w.dtype(), w.shape());
  std::vector<Tensor> inputs = {x, w};
  Value pbias;
  if (bias) {
    pbias = b.Parameter("bias", bias->dtype(), bias->shape());
    inputs.push_back(*bias);
  }
  return TryRun(b, b.Conv(px, pw, pbias, p), inputs);
}

TEST(InterpreterWindowsTest, ConvWithPaddingAndStride) {
  // x = 3x3 of 1..9, 2x2 kernel of ones, pad 1 all round, stride 2: each output is the
  // sum of the window's in-bounds elements.
  //   (0,0): x00 = 1              (0,1): x01 + x02 = 5
  //   (1,0): x10 + x20 = 11       (1,1): x11 + x12 + x21 + x22 = 28
  Tensor x = Counting({1, 1, 3, 3}, 1);
  Tensor w = F64({1, 1, 2, 2}, {1, 1, 1, 1});
  StatusOr<Tensor> out = RunConv(x, w, nullptr, Params2D({2, 2}, {2, 2}, {1, 1, 1, 1}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{1, 5, 11, 28}));
}

TEST(InterpreterWindowsTest, ConvWithAsymmetricPadsAndBias) {
  // 1-D: x = [1 2 3], kernel [1 -1], pads begin 0 end 1, bias 10:
  // windows [1 2] [2 3] [3 pad] -> -1, -1, 3 -> plus 10.
  PoolParams p = Params2D({2}, {1}, {0, 1});
  Tensor bias = F64({1}, {10});
  StatusOr<Tensor> out = RunConv(F64({1, 1, 3}, {1, 2, 3}), F64({1, 1, 2}, {1, -1}), &bias, p);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{9, 9, 13}));
}

TEST(InterpreterWindowsTest, GroupedConvKeepsChannelsApart) {
  // Two channels, group 2, 1x1 kernels scaling channel 0 by 2 and channel 1 by -1.
  Tensor x = F64({1, 2, 1, 2}, {1, 2, 3, 4});
  Tensor w = F64({2, 1, 1, 1}, {2, -1});
  StatusOr<Tensor> out = RunConv(x, w, nullptr, Params2D({1, 1}, {1, 1}, {0, 0, 0, 0}, 2));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{2, 4, -3, -4}));
}

TEST(InterpreterWindowsTest, ConvMatchesTheDefinition) {
  // N=2, C=4, group 2 (6 output channels, 3 per group), 3x2 kernel, strides (2, 1),
  // dilations (1, 2), pads begin (1, 0) end (0, 2).
  const int64_t n = 2, c = 4, h = 6, wd = 5, oc = 6, group = 2, kh = 3, kw = 2;
  PoolParams p = Params2D({kh, kw}, {2, 1}, {1, 0, 0, 2}, group);
  p.dilations = {1, 2};
  Tensor x = Filled(DType::kF64, {n, c, h, wd}, [](int64_t i) { return ((i * 37) % 11) - 5.0; });
  Tensor w = Filled(DType::kF64, {oc, c / group, kh, kw}, [](int64_t i) { return ((i * 13) % 7) - 3.0; });
  Tensor bias = F64({oc}, {1, 2, 3, 4, 5, 6});
  StatusOr<Tensor> out = RunConv(x, w, &bias, p);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  // out size: (6 + 1 + 0 - 3) / 2 + 1 = 3 rows, (5 + 0 + 2 - 3) / 1 + 1 = 5 columns.
  const int64_t oh = 3, ow = 5;
  ASSERT_EQ(out->shape(), (Shape{n, oc, oh, ow}));
  auto xv = [&](int64_t b, int64_t ch, int64_t y, int64_t xx) {
    if (y < 0 || y >= h || xx < 0 || xx >= wd) return 0.0;
    return x.GetDouble(((b * c + ch) * h + y) * wd + xx);
  };
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          double expected = bias.GetDouble(o);
          int64_t g = o / (oc / group);
          for (int64_t ci = 0; ci < c / group; ++ci)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx)
                expected += xv(b, g * (c / group) + ci, y * 2 - 1 + ky, xx - 0 + kx * 2) *
                            w.GetDouble(((o * (c / group) + ci) * kh + ky) * kw + kx);
          EXPECT_EQ(out->GetDouble(((b * oc + o) * oh + y) * ow + xx), expected) << b << o << y << xx;
        }
}

StatusOr<Tensor> RunPool(OpCode op, const Tensor& x, const PoolParams& p) {
  GraphBuilder b;
  Value px = b.Parameter("x", x.dtype(), x.shape());
  Value y = op == OpCode::kMaxPool ? b.MaxPool(px, p) : b.AveragePool(px, p);
  return TryRun(b, y, {x});
}

TEST(InterpreterWindowsTest, MaxPoolTwoByTwoStrideTwo) {
  // 4x4 of 0..15 -> max of each 2x2 block: 5 7 13 15
  StatusOr<Tensor> out = RunPool(OpCode::kMaxPool, Counting({1, 1, 4, 4}), Params2D({2, 2}, {2, 2}, {0, 0, 0, 0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{5, 7, 13, 15}));
}

TEST(InterpreterWindowsTest, MaxPoolPadsWithMinusInfinity) {
  // All inputs negative: zero padding would win, -inf padding never does.
  // x = [-1 -2 -3], kernel 2, stride 1, pads 1/1: windows [pad -1] [-1 -2] [-2 -3] [-3 pad].
  PoolParams p = Params2D({2}, {1}, {1, 1});
  StatusOr<Tensor> out = RunPool(OpCode::kMaxPool, F64({1, 1, 3}, {-1, -2, -3}), p);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{-1, -1, -2, -3}));
}

TEST(InterpreterWindowsTest, MaxPoolPropagatesNaN) {
  StatusOr<Tensor> out = RunPool(OpCode::kMaxPool, F64({1, 1, 4}, {1, kNaN, 3, 4}), Params2D({2}, {2}, {0, 0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(std::isnan(out->GetDouble(0)));
  EXPECT_EQ(out->GetDouble(1), 4);
}

TEST(InterpreterWindowsTest, AveragePoolCountsPadsOnlyWhenAsked) {
  // x = 2x2 of 1..4, 2x2 kernel, stride 1, pad 1 all round -> 3x3 outputs. The corner
  // window holds only x00 = 1; the centre window holds all four (sum 10).
  Tensor x = Counting({1, 1, 2, 2}, 1);
  PoolParams p = Params2D({2, 2}, {1, 1}, {1, 1, 1, 1});
  StatusOr<Tensor> excluded = RunPool(OpCode::kAveragePool, x, p);
  ASSERT_TRUE(excluded.ok()) << excluded.status().ToString();
  // Divisors are the in-bounds counts: corners 1, edges 2, centre 4.
  EXPECT_EQ(excluded->ToDoubles(), (std::vector<double>{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}));
  p.count_include_pad = true;
  StatusOr<Tensor> included = RunPool(OpCode::kAveragePool, x, p);
  ASSERT_TRUE(included.ok()) << included.status().ToString();
  // Every window has 4 positions inside the padded input.
  EXPECT_EQ(included->ToDoubles(), (std::vector<double>{0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}));
}

TEST(InterpreterWindowsTest, PoolsRunPerChannelAndBatch) {
  // [2, 2, 2] (N, C, W): global average over W per (n, c).
  StatusOr<Tensor> out =
      RunPool(OpCode::kAveragePool, F64({2, 2, 2}, {1, 3, 10, 20, -1, -2, 0, 8}), Params2D({2}, {1}, {0, 0}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->ToDoubles(), (std::vector<double>{2, 15, -1.5, 4}));
}

}  // namespace
}  // namespace tilefuse

// QuantizeLinear, DequantizeLinear and the 8-bit float casts, against values worked out by
// hand from ONNX's definitions (round half to even, the type's range, saturate).
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxQuantizeTest, Int8RoundsHalfToEvenAddsTheZeroPointAndSaturates) {
  Graph g = Import(WithOpset(19, R"(
    g (float[6] x) => (int8[6] q, uint8[6] u) {
      scale = Constant <value = float {0.5}> ()
      zp = Constant <value = int8 {-1}> ()
      uzp = Constant <value = uint8 {3}> ()
      q = QuantizeLinear (x, scale, zp)
      u = QuantizeLinear (x, scale, uzp)
    })"));
  // x / 0.5 = 0, 1.5 -> 2 (even), 2.5 -> 2 (even), -7.4 -> -7, 300, -300
  std::vector<Tensor> in = {F32({6}, {0, 0.75, 1.25, -3.7, 150, -150})};
  ExpectNear(RunGraph(g, in, 0), {-1, 1, 1, -8, 127, -128});
  ExpectNear(RunGraph(g, in, 1), {3, 5, 5, 0, 255, 0});
}

TEST(OnnxQuantizeTest, DequantizePerAxisAndBackToTheScaleType) {
  Graph g = Import(WithOpset(19, R"(
    g (uint8[2, 3] x, float16 hscale) => (float[2, 3] y, float16[2, 3] h) {
      scale = Constant <value = float[2] {0.5, 2}> ()
      zp = Constant <value = uint8[2] {0, 10}> ()
      y = DequantizeLinear <axis = 0> (x, scale, zp)
      h = DequantizeLinear (x, hscale)
    })"));
  std::vector<Tensor> in = {Tensor::FromDoubles(DType::kU8, {2, 3}, {0, 1, 255, 10, 11, 0}),
                            Tensor::FromDoubles(DType::kF16, {}, {0.25})};
  ExpectNear(RunGraph(g, in, 0), {0, 0.5, 127.5, 0, 2, -20});
  ExpectNear(RunGraph(g, in, 1), {0, 0.25, 63.75, 2.5, 2.75, 0});
  EXPECT_EQ(OutputNode(g, 1).dtype, DType::kF16);
}

TEST(OnnxQuantizeTest, Float8CastsSaturateOrOverflow) {
  // to = 17: FLOAT8E4M3FN, 19: FLOAT8E5M2; back to float to read them.
  Graph g = Import(WithOpset(19, R"(
    g (float[5] x) => (float[5] sat, float[5] nosat, float[5] e5, float[5] e5nosat) {
      a = Cast <to = 17> (x)
      sat = Cast <to = 1> (a)
      b = Cast <to = 17, saturate = 0> (x)
      nosat = Cast <to = 1> (b)
      c = Cast <to = 19> (x)
      e5 = Cast <to = 1> (c)
      d = Cast <to = 19, saturate = 0> (x)
      e5nosat = Cast <to = 1> (d)
    })"));
  // 0.001 is 0.512 of e4m3's smallest subnormal 2^-9: rounds to it; 1.0625 ties to 1.
  std::vector<Tensor> in = {F32({5}, {1.0625, 464, 1e6, -INFINITY, 0.001})};
  ExpectNear(RunGraph(g, in, 0), {1, 448, 448, -448, std::ldexp(1.0, -9)});
  std::vector<double> nosat = RunGraph(g, in, 1);
  EXPECT_EQ(nosat[1], 448);
  EXPECT_TRUE(std::isnan(nosat[2]) && std::isnan(nosat[3]));  // e4m3 has no infinity
  ExpectNear(RunGraph(g, in, 2), {1, 448, 57344, -57344, std::ldexp(1.0, -10)});
  std::vector<double> e5nosat = RunGraph(g, in, 3);
  EXPECT_EQ(e5nosat[2], INFINITY);
  EXPECT_EQ(e5nosat[3], -INFINITY);
}

TEST(OnnxQuantizeTest, QuantizeToFloat8ThroughOutputDtype) {
  Graph g = Import(WithOpset(21, R"(
    g (float[3] x) => (float[3] y) {
      scale = Constant <value = float {2}> ()
      q = QuantizeLinear <output_dtype = 17> (x, scale)
      y = DequantizeLinear (q, scale)
    })"));
  // x / 2 = 1.5, 500 (saturates to 448), -0.0625; times 2 on the way back.
  ExpectNear(RunGraph(g, {F32({3}, {3, 1000, -0.125})}), {3, 896, -0.125});
}

// Blocked scales (block_size): one scale per 2 elements along axis 1, the last block cut at
// x's extent of 5; the expected values are each x times its block's scale, less its zero point.
TEST(OnnxQuantizeTest, BlockedScalesRepeatAlongTheAxisAndTheLastBlockIsCut) {
  Graph g = Import(WithOpset(21, R"(
    g (int8[2, 5] x) => (float[2, 5] y) {
      scale = Constant <value = float[2, 3] {0.5, 2, 4, 1, 0.25, 8}> ()
      zp = Constant <value = int8[2, 3] {0, 1, -1, 2, 0, 0}> ()
      y = DequantizeLinear <axis = 1, block_size = 2> (x, scale, zp)
    })"));
  const std::vector<double> x = {1, 2, 3, 4, 5, -1, -2, -3, -4, -5};
  const std::vector<double> scale = {0.5, 2, 4, 1, 0.25, 8}, zp = {0, 1, -1, 2, 0, 0};
  std::vector<double> expected;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 5; ++c) expected.push_back((x[r * 5 + c] - zp[r * 3 + c / 2]) * scale[r * 3 + c / 2]);
  ExpectNear(RunGraph(g, {Tensor::FromDoubles(DType::kI8, {2, 5}, x)}), expected);
}

TEST(OnnxQuantizeTest, BlockedScalesOfTheWrongShapeAreRefusedWithTheReason) {
  // Four blocks of 2 would cover 8 columns, not x's 5.
  std::string blocked = ImportError(WithOpset(21, R"(
    g (float[2, 5] x) => (int8[2, 5] q) {
      scale = Constant <value = float[2, 4] {1, 1, 1, 1, 1, 1, 1, 1}> ()
      zp = Constant <value = int8[2, 4] {0, 0, 0, 0, 0, 0, 0, 0}> ()
      q = QuantizeLinear <axis = 1, block_size = 2> (x, scale, zp)
    })"));
  EXPECT_TRUE(Contains(blocked, "need one value per block")) << blocked;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

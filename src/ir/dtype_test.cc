// The 8-bit float conversions against values worked out by hand from the formats (ONNX's
// FLOAT8E4M3FN: bias 7, 3 mantissa bits, no infinity, 448 largest; FLOAT8E5M2: bias 15, 2
// mantissa bits, IEEE), and every bit pattern round-tripped.
#include "tilefuse/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace tilefuse {
namespace {

constexpr DType kE4M3 = DType::kF8E4M3, kE5M2 = DType::kF8E5M2;

TEST(Float8Test, E4M3EncodesNormalsSubnormalsAndTheLargestValue) {
  EXPECT_EQ(FloatToFloat8Bits(1.0, kE4M3, true), 0x38);   // exponent field 7, mantissa 0
  EXPECT_EQ(FloatToFloat8Bits(-1.5, kE4M3, true), 0xbc);  // sign, field 7, mantissa 100
  EXPECT_EQ(FloatToFloat8Bits(0.5, kE4M3, true), 0x30);
  EXPECT_EQ(FloatToFloat8Bits(448.0, kE4M3, true), 0x7e);  // S.1111.110: 1.75 * 2^8
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(1.0, -9), kE4M3, true), 0x01);  // the smallest subnormal
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(1.0, -6), kE4M3, true), 0x08);  // the smallest normal
  EXPECT_EQ(FloatToFloat8Bits(-0.0, kE4M3, true), 0x80);
  EXPECT_EQ(FloatToFloat8Bits(NAN, kE4M3, true) & 0x7f, 0x7f);
  // 1 + 1/16 is halfway between 1 and 1.125: ties to the even mantissa (1); 1 + 3/16 to 1.25.
  EXPECT_EQ(FloatToFloat8Bits(1.0625, kE4M3, true), 0x38);
  EXPECT_EQ(FloatToFloat8Bits(1.1875, kE4M3, true), 0x3a);
  // A quarter of the smallest subnormal rounds to zero; three quarters to it.
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(0.25, -9), kE4M3, true), 0x00);
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(0.75, -9), kE4M3, true), 0x01);
}

TEST(Float8Test, E4M3OverflowSaturatesOrIsNaN) {
  // 464 is halfway between 448 (mantissa 110) and 480 (would be 111, NaN's pattern): to 448.
  EXPECT_EQ(FloatToFloat8Bits(464.0, kE4M3, false), 0x7e);
  EXPECT_EQ(FloatToFloat8Bits(465.0, kE4M3, true), 0x7e);
  EXPECT_EQ(FloatToFloat8Bits(465.0, kE4M3, false), 0x7f);
  EXPECT_EQ(FloatToFloat8Bits(-INFINITY, kE4M3, true), 0xfe);
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(FloatToFloat8Bits(INFINITY, kE4M3, false), kE4M3)));
}

TEST(Float8Test, E5M2IsIeeeLike) {
  EXPECT_EQ(FloatToFloat8Bits(1.0, kE5M2, true), 0x3c);
  EXPECT_EQ(FloatToFloat8Bits(57344.0, kE5M2, true), 0x7b);  // 1.75 * 2^15
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(1.0, -16), kE5M2, true), 0x01);
  EXPECT_EQ(FloatToFloat8Bits(INFINITY, kE5M2, false), 0x7c);
  EXPECT_EQ(FloatToFloat8Bits(INFINITY, kE5M2, true), 0x7b);
  // 61440 is halfway between 57344 (mantissa 11) and 65536 (the next binade, mantissa 00):
  // to 65536, past the largest value.
  EXPECT_EQ(FloatToFloat8Bits(61440.0, kE5M2, false), 0x7c);
  EXPECT_EQ(FloatToFloat8Bits(-61440.0, kE5M2, true), 0xfb);
  EXPECT_EQ(Float8BitsToFloat(0x7c, kE5M2), INFINITY);
  EXPECT_TRUE(std::isnan(Float8BitsToFloat(0x7d, kE5M2)));
}

// ONNX's FLOAT8E4M3FNUZ and FLOAT8E5M2FNUZ (the ONNX spec's table of special values): the
// exponent bias one higher, 0x80 the only NaN, one zero, no infinity.
TEST(Float8Test, FnuzFormsHaveOneZeroOneNaNAndNoInfinity) {
  constexpr DType kE4M3Fnuz = DType::kF8E4M3Fnuz, kE5M2Fnuz = DType::kF8E5M2Fnuz;
  EXPECT_EQ(FloatToFloat8Bits(1.0, kE4M3Fnuz, true), 0x40);  // exponent field 8
  EXPECT_EQ(FloatToFloat8Bits(1.0, kE5M2Fnuz, true), 0x40);  // exponent field 16
  EXPECT_EQ(FloatToFloat8Bits(-1.5, kE4M3Fnuz, true), 0xc4);
  EXPECT_EQ(FloatToFloat8Bits(240.0, kE4M3Fnuz, true), 0x7f);  // S.1111.111 is a value: 1.875 * 2^7
  EXPECT_EQ(Float8BitsToFloat(0x7f, kE4M3Fnuz), 240.0);
  EXPECT_EQ(Float8BitsToFloat(0x7f, kE5M2Fnuz), 57344.0);  // 1.75 * 2^15
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(1.0, -10), kE4M3Fnuz, true), 0x01);  // the smallest subnormals
  EXPECT_EQ(FloatToFloat8Bits(std::ldexp(1.0, -17), kE5M2Fnuz, true), 0x01);
  for (DType d : {kE4M3Fnuz, kE5M2Fnuz}) {
    EXPECT_EQ(FloatToFloat8Bits(-0.0, d, true), 0x00) << DTypeName(d);
    EXPECT_EQ(FloatToFloat8Bits(-std::ldexp(1.0, -30), d, true), 0x00) << DTypeName(d);  // rounds to the one zero
    EXPECT_EQ(FloatToFloat8Bits(NAN, d, true), 0x80) << DTypeName(d);
    EXPECT_TRUE(std::isnan(Float8BitsToFloat(0x80, d))) << DTypeName(d);
    EXPECT_EQ(FloatToFloat8Bits(1e6, d, true), 0x7f) << DTypeName(d);
    EXPECT_EQ(FloatToFloat8Bits(-INFINITY, d, true), 0xff) << DTypeName(d);
    EXPECT_EQ(FloatToFloat8Bits(1e6, d, false), 0x80) << DTypeName(d);  // no infinity: NaN
    EXPECT_EQ(FloatToFloat8Bits(INFINITY, d, false), 0x80) << DTypeName(d);
    EXPECT_TRUE(IsFloat8(d) && IsFloat8Fnuz(d) && DTypeSize(d) == 1);
  }
  EXPECT_FALSE(IsFloat8Fnuz(kE4M3));
  EXPECT_EQ(ParseDType("f8e5m2fnuz"), kE5M2Fnuz);
}

TEST(Float8Test, EveryPatternRoundTrips) {
  for (DType d : {kE4M3, kE5M2, DType::kF8E4M3Fnuz, DType::kF8E5M2Fnuz})
    for (int bits = 0; bits < 256; ++bits) {
      const double v = Float8BitsToFloat(static_cast<uint8_t>(bits), d);
      if (std::isnan(v)) continue;
      EXPECT_EQ(FloatToFloat8Bits(v, d, /*saturate=*/false), bits) << DTypeName(d) << " " << v;
      EXPECT_EQ(RoundToDType(v, d), v);
    }
}

TEST(Float8Test, RoundToDTypeSaturatesFiniteValuesAndKeepsInfinities) {
  EXPECT_EQ(RoundToDType(1000.0, kE4M3), 448.0);
  EXPECT_EQ(RoundToDType(1e9, kE5M2), 57344.0);
  EXPECT_EQ(RoundToDType(-INFINITY, kE5M2), -INFINITY);
  EXPECT_TRUE(std::isnan(RoundToDType(INFINITY, kE4M3)));
  EXPECT_EQ(DTypeSize(kE4M3), 1);
  EXPECT_TRUE(IsFloat(kE5M2) && IsFloat8(kE5M2) && !IsFloat8(DType::kBF16));
  EXPECT_EQ(ParseDType("f8e4m3"), kE4M3);
}

TEST(DTypeTest, TheHalfTypesAreTheSixteenBitFloats) {
  for (DType d : kAllDTypes) EXPECT_EQ(IsHalf(d), IsFloat(d) && DTypeSize(d) == 2) << DTypeName(d);
}

}  // namespace
}  // namespace tilefuse

#include "support/philox.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

using Words = std::array<uint32_t, 4>;

// Known-answer vectors published with Random123 (kat_vectors, philox4x32 10 rounds).
TEST(PhiloxTest, KnownAnswerZeroCounterZeroKey) {
  EXPECT_EQ(Philox4x32Block({0, 0, 0, 0}, {0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
}

TEST(PhiloxTest, KnownAnswerAllOnes) {
  EXPECT_EQ(Philox4x32Block({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
}

TEST(PhiloxTest, KnownAnswerPiDigits) {
  EXPECT_EQ(Philox4x32Block({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, SixtyFourBitFormSplitsIntoLowAndHighWords) {
  // counter 0 / key 0 through the 64-bit entry point is the first known answer.
  EXPECT_EQ(Philox4x32(0, 0), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  uint64_t counter = 0x85a308d3243f6a88ull, key = 0x299f31d0a4093822ull;
  EXPECT_EQ(Philox4x32(counter, key), Philox4x32Block({0x243f6a88, 0x85a308d3, 0, 0}, {0xa4093822, 0x299f31d0}));
}

TEST(PhiloxTest, UniformUsesTopTwentyFourBitsOfTheIndexedWord) {
  for (uint64_t index : {0ull, 1ull, 2ull, 3ull, 4ull, 7ull, 1001ull}) {
    uint32_t word = Philox4x32(index / 4, 42)[index % 4];
    EXPECT_EQ(PhiloxUniform(42, index), static_cast<float>(word >> 8) / 16777216.0f) << index;
  }
  // Index 0..3 of seed 0 come from the first known-answer block.
  EXPECT_FLOAT_EQ(PhiloxUniform(0, 0), static_cast<float>(0x6627e8d5u >> 8) / 16777216.0f);
  EXPECT_FLOAT_EQ(PhiloxUniform(0, 3), static_cast<float>(0x9b00dbd8u >> 8) / 16777216.0f);
}

TEST(PhiloxTest, UniformValuesLieInUnitIntervalWithMeanOneHalf) {
  const int n = 100000;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < n; ++i) {
    float v = PhiloxUniform(1234, i);
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  double mean = sum / n;
  // Standard error of the mean of U[0,1) over 1e5 draws is ~0.0009; allow 5 sigma.
  EXPECT_NEAR(mean, 0.5, 0.0046);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0 / 12.0, 0.003);
}

TEST(PhiloxTest, DifferentSeedsGiveDifferentStreams) {
  int equal = 0;
  for (int i = 0; i < 64; ++i) equal += PhiloxUniform(1, i) == PhiloxUniform(2, i);
  EXPECT_LT(equal, 2);
}

}  // namespace
}  // namespace tilefuse

#include "support/content_hash.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace tilefuse {
namespace {

// Test vectors from the FNV reference test suite (fnv64a_test_vector in test_fnv.c).
TEST(ContentHashTest, Fnv1a64MatchesPublishedVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(ContentHashTest, WordMixSeesEveryByteAndTheLength) {
  std::string base = "the quick brown fox jumps over";  // 30 bytes: full words and a tail
  std::set<uint64_t> seen = {WordMix64(base)};
  for (size_t i = 0; i < base.size(); ++i) {
    std::string flipped = base;
    flipped[i] ^= 0x01;
    EXPECT_TRUE(seen.insert(WordMix64(flipped)).second) << "flipping byte " << i << " collided";
  }
  EXPECT_NE(WordMix64("a"), WordMix64(std::string("a\0", 2)));
  EXPECT_NE(WordMix64(""), WordMix64(std::string(8, '\0')));
}

TEST(ContentHashTest, PartsAreSeparatedByTheirLengths) {
  std::vector<std::string_view> ab_c = {"ab", "c"}, a_bc = {"a", "bc"}, abc = {"abc"};
  EXPECT_NE(HashParts(ab_c), HashParts(a_bc));
  EXPECT_NE(HashParts(ab_c), HashParts(abc));
  EXPECT_EQ(HashParts(ab_c), HashParts(std::vector<std::string_view>{"ab", "c"}));
}

TEST(ContentHashTest, HexIsThirtyTwoDigitsHighWordFirst) {
  ContentHash128 hash{0x0123456789abcdefull, 0x1ull};
  EXPECT_EQ(hash.ToHex(), "0123456789abcdef0000000000000001");
}

}  // namespace
}  // namespace tilefuse

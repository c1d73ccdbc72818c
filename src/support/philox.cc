#include "support/philox.h"

namespace tilefuse {

namespace {

// Round multipliers and Weyl key increments of Philox4x32 (Salmon et al. 2011, Random123).
constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kKeyBump0 = 0x9E3779B9u;
constexpr uint32_t kKeyBump1 = 0xBB67AE85u;
constexpr int kRounds = 10;

std::array<uint32_t, 4> Round(const std::array<uint32_t, 4>& c, const std::array<uint32_t, 2>& key) {
  uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * c[0];
  uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * c[2];
  uint32_t hi0 = static_cast<uint32_t>(product0 >> 32), lo0 = static_cast<uint32_t>(product0);
  uint32_t hi1 = static_cast<uint32_t>(product1 >> 32), lo1 = static_cast<uint32_t>(product1);
  return {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
}

}  // namespace

std::array<uint32_t, 4> Philox4x32Block(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      key[0] += kKeyBump0;
      key[1] += kKeyBump1;
    }
    counter = Round(counter, key);
  }
  return counter;
}

std::array<uint32_t, 4> Philox4x32(uint64_t counter, uint64_t key) {
  return Philox4x32Block({static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0},
                         {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
}

float PhiloxUniform(uint64_t seed, uint64_t index) {
  uint32_t word = Philox4x32(index / 4, seed)[index % 4];
  // The top 24 bits fill a float mantissa exactly, so the value is in [0, 1) and never
  // rounds up to 1.
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace tilefuse

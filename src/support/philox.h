// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011), the one definition
// every backend uses so a seeded random op gives the same values everywhere.
//
// Element `index` of a random_uniform with `seed` is
//   words = Philox4x32_10(counter = {index / 4 (low 32, high 32 bits), 0, 0},
//                         key = {seed low 32, seed high 32 bits})
//   value = (words[index % 4] >> 8) * 2^-24            // float in [0, 1)
// so a kernel can draw 4 consecutive elements from one Philox call.
#pragma once

#include <array>
#include <cstdint>

namespace tilefuse {

std::array<uint32_t, 4> Philox4x32(uint64_t counter, uint64_t key);
// The full Philox4x32-10 block function with a 4-word counter and 2-word key, as in
// Random123; Philox4x32 above is this with counter {lo, hi, 0, 0} and key {lo, hi}.
std::array<uint32_t, 4> Philox4x32Block(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
float PhiloxUniform(uint64_t seed, uint64_t index);

}  // namespace tilefuse

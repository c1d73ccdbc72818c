#include "support/content_hash.h"

#include <fmt/format.h>

#include <cstring>

namespace tilefuse {

namespace {
constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
// Odd constants from splitmix64 / the golden ratio; any odd 64-bit constants with well
// spread bits would do, these are the well-studied ones.
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kMixMultiplier = 0xbf58476d1ce4e5b9ull;

uint64_t SplitMix64Finalise(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

uint64_t LoadLittleEndian(const char* bytes, size_t count) {
  uint64_t word = 0;
  for (size_t i = 0; i < count; ++i) word |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  return word;
}

void AppendLength(std::string& out, uint64_t length) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
}
}  // namespace

uint64_t Fnv1a64(std::string_view bytes) {
  uint64_t hash = kFnvOffsetBasis;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t WordMix64(std::string_view bytes) {
  uint64_t hash = kGolden;
  size_t offset = 0;
  for (; offset + 8 <= bytes.size(); offset += 8)
    hash = (hash ^ SplitMix64Finalise(LoadLittleEndian(bytes.data() + offset, 8))) * kMixMultiplier;
  if (offset < bytes.size())
    hash = (hash ^ SplitMix64Finalise(LoadLittleEndian(bytes.data() + offset, bytes.size() - offset))) *
           kMixMultiplier;
  // The length last: zero padding alone would make "a" and "a\0" collide.
  hash = (hash ^ SplitMix64Finalise(bytes.size() + kGolden)) * kMixMultiplier;
  return SplitMix64Finalise(hash);
}

std::string ContentHash128::ToHex() const { return fmt::format("{:016x}{:016x}", high, low); }

ContentHash128 HashBytes(std::string_view bytes) { return {Fnv1a64(bytes), WordMix64(bytes)}; }

ContentHash128 HashParts(std::span<const std::string_view> parts) {
  std::string canonical;
  size_t total = 0;
  for (std::string_view part : parts) total += 8 + part.size();
  canonical.reserve(total);
  for (std::string_view part : parts) {
    AppendLength(canonical, part.size());
    canonical.append(part);
  }
  return HashBytes(canonical);
}

}  // namespace tilefuse

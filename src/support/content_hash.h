// Content hashes for cache keys: the one definition every on-disk cache uses, so a key
// written by one build of tilefuse is found by the next.
//
// ContentHash128 is two structurally different 64-bit hashes of the same bytes, so a
// collision needs both to collide at once:
//   high = FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3), byte by byte,
//          exactly as published (http://www.isthe.com/chongo/tech/comp/fnv/);
//   low  = WordMix64: the bytes as little-endian 8-byte words (the tail zero-padded,
//          the length mixed in last), each folded in as h = (h ^ Mix(word)) * K, then the
//          splitmix64 finaliser (Steele et al. 2014) over h.
// Neither is cryptographic: keys guard against accidents, not an attacker who can write
// the cache directory (who could replace entries anyway).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace tilefuse {

uint64_t Fnv1a64(std::string_view bytes);
uint64_t WordMix64(std::string_view bytes);

struct ContentHash128 {
  uint64_t high = 0;  // FNV-1a 64
  uint64_t low = 0;   // WordMix64
  bool operator==(const ContentHash128&) const = default;
  // 32 lowercase hex digits, high word first.
  std::string ToHex() const;
};

ContentHash128 HashBytes(std::string_view bytes);
// Hashes a list of parts unambiguously: each part is preceded by its length as 8
// little-endian bytes, so {"ab", "c"} and {"a", "bc"} differ.
ContentHash128 HashParts(std::span<const std::string_view> parts);

}  // namespace tilefuse

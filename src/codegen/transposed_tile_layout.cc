#include "codegen/transposed_tile_layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace tilefuse {

namespace {

struct Access {
  int64_t address = 0;  // bytes
  int width = 4;        // bytes, a power of two, `address` a multiple of it
};

// One instruction's wavefronts: lanes are served in groups of 128 bytes (32 lanes of up to 4
// bytes, 16 of 8, 8 of 16); within a group, a bank holding several distinct words costs one
// wavefront per word (lanes reading the same word share it).
int64_t InstructionWavefronts(const std::vector<Access>& lanes) {
  if (lanes.empty()) return 0;
  const int width = lanes.front().width;
  const size_t per_group = width <= 4 ? 32 : 128 / width;
  int64_t total = 0;
  for (size_t first = 0; first < lanes.size(); first += per_group) {
    std::map<int64_t, std::set<int64_t>> words_of_bank;
    for (size_t l = first; l < std::min(lanes.size(), first + per_group); ++l)
      for (int64_t word = lanes[l].address / 4; word <= (lanes[l].address + width - 1) / 4; ++word) words_of_bank[word % 32].insert(word);
    size_t most = 0;
    for (const auto& [bank, words] : words_of_bank) most = std::max(most, words.size());
    total += static_cast<int64_t>(most);
  }
  return total;
}

int SharedVectorFor(const TileLayout& t) {
  int s = t.load_vector;
  while (s > 1 && (t.pitch % s != 0 || s * t.element_bytes > 16)) s /= 2;
  return s;
}

}  // namespace

int64_t SharedWavefronts(const TileLayout& t) {
  const int eb = t.element_bytes;
  int64_t total = 0;
  const int load_lanes = std::min(32, t.LoadVectors()), per_row = t.tile_d / t.load_vector;
  for (int h = 0; h < t.load_vector / t.shared_vector; ++h) {
    std::vector<Access> lanes;
    for (int q = 0; q < load_lanes; ++q) {
      const int64_t row = q / per_row, column = q % per_row * t.load_vector + h * t.shared_vector;
      lanes.push_back({(row * t.pitch + column) * eb, t.shared_vector * eb});
    }
    total += InstructionWavefronts(lanes);
  }
  const int store_lanes = std::min(32, t.StoreVectors());
  for (int j = 0; j < t.store_vector; ++j) {
    std::vector<Access> lanes;
    for (int q = 0; q < store_lanes; ++q) {
      const int64_t column = q / t.lanes_in % t.tile_d;
      const int64_t row = (q / (t.lanes_in * t.tile_d) * t.lanes_in + q % t.lanes_in) * t.store_vector + j;
      lanes.push_back({(row * t.pitch + column) * eb, eb});
    }
    total += InstructionWavefronts(lanes);
  }
  return total;
}

TileLayout WithBestPitch(TileLayout t) {
  // Fewest wavefronts, then fewest load-phase stores (wider ones), then the least padding.
  auto cost = [](const TileLayout& l) { return std::make_pair(SharedWavefronts(l), l.load_vector / l.shared_vector); };
  TileLayout best = t;
  bool first = true;
  for (int pad = 0; pad < 32; ++pad) {
    t.pitch = t.tile_d + pad;
    t.shared_vector = SharedVectorFor(t);
    if (first || cost(t) < cost(best)) best = t;
    first = false;
  }
  return best;
}

}  // namespace tilefuse

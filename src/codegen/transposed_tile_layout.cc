#include "codegen/transposed_tile_layout.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
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
  // The distinct words of a group, sorted, then counted per bank: no map of sets (the pitch
  // search runs this for 32 pitches per transposed operand, and a model's compile ran it for
  // every one of BERT's products: 0.5 s).
  std::vector<int64_t> words;
  for (size_t first = 0; first < lanes.size(); first += per_group) {
    words.clear();
    for (size_t l = first; l < std::min(lanes.size(), first + per_group); ++l)
      for (int64_t word = lanes[l].address / 4; word <= (lanes[l].address + width - 1) / 4; ++word) words.push_back(word);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    int per_bank[32] = {};
    int most = 0;
    for (int64_t word : words) most = std::max(most, ++per_bank[((word % 32) + 32) % 32]);
    total += most;
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
  // A model's products ask for the same few layouts again and again (each transposed operand
  // of each candidate configuration): answers are remembered by the fields the search reads.
  using Inputs = std::array<int, 6>;
  static std::map<Inputs, TileLayout> memo;
  static std::mutex mutex;
  const Inputs inputs{t.tile_in, t.tile_d, t.element_bytes, t.load_vector, t.store_vector, t.lanes_in};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = memo.find(inputs); it != memo.end()) return it->second;
  }
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
  std::lock_guard<std::mutex> lock(mutex);
  memo.emplace(inputs, best);
  return best;
}

}  // namespace tilefuse

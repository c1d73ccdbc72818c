#include "passes/transpose_tiles.h"

#include <algorithm>

namespace tilefuse {

namespace {

// In square tiles: a row-by-row copy reads a column of the input per output row, a cache miss
// an element on a large matrix (the transposed 50257×768 embedding of GPT-2's LM head: 388 ms
// that way, the whole of a warm compile's constant folding). Large ones are split over the
// threads.
template <typename Element>
void TransposeTiles(const Tensor& in, Tensor& out, int64_t batches, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  const auto* src = reinterpret_cast<const Element*>(in.data());
  auto* dst = reinterpret_cast<Element*>(out.data());
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t tiles = batches * row_tiles * col_tiles;
#pragma omp parallel for schedule(static) if (in.num_bytes() > (size_t{1} << 24))
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t b = t / (row_tiles * col_tiles), i0 = (t / col_tiles % row_tiles) * kTile, j0 = t % col_tiles * kTile;
    const Element* from = src + b * rows * cols;
    Element* to = dst + b * rows * cols;
    for (int64_t j = j0; j < std::min(j0 + kTile, cols); ++j)
      for (int64_t i = i0; i < std::min(i0 + kTile, rows); ++i) to[j * rows + i] = from[i * cols + j];
  }
}

}  // namespace

bool TransposeLastTwoDims(const Tensor& in, Tensor& out, int64_t batches, int64_t rows, int64_t cols) {
  const size_t element = in.num_elements() > 0 ? in.num_bytes() / static_cast<size_t>(in.num_elements()) : 0;
  switch (element) {
    case 1: TransposeTiles<uint8_t>(in, out, batches, rows, cols); return true;
    case 2: TransposeTiles<uint16_t>(in, out, batches, rows, cols); return true;
    case 4: TransposeTiles<uint32_t>(in, out, batches, rows, cols); return true;
    case 8: TransposeTiles<uint64_t>(in, out, batches, rows, cols); return true;
    default: return false;
  }
}

}  // namespace tilefuse

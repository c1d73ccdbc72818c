// Where the threads of the tiled-transpose template (codegen/cuda/cuda_transposed_emitter.h) read
// and write a staged tile, and the shared-memory row pitch that keeps those accesses free of
// bank conflicts. The emitter prints exactly these formulas; the pitch is chosen by counting
// the shared-memory wavefronts of one warp's accesses under each candidate padding.
//
// A tile holds `tile_in` rows (one per coordinate along the output's contiguous dim), each of
// `tile_d` elements along the load's contiguous dim, `pitch` elements apart:
//
//        load phase: a vector of load_vector            store phase: a thread reads
//        elements along a row (global: contiguous)      store_vector rows at one column
//        ┌──────────────────────────────┐               ┌──────────────────────────────┐
//  row 0 │ ▓▓▓▓ ▓▓▓▓ ▓▓▓▓ ...           │ pad           │ ▓                            │
//  row 1 │ ▓▓▓▓ ▓▓▓▓ ...                │               │ ▓  (one output vector:       │
//   ...  │                              │               │ ▓   contiguous in global)    │
//        └──────────────────────────────┘               └──────────────────────────────┘
//
// Store phase, vector q: lane_in = q % lanes_in, column = q / lanes_in % tile_d, first row =
// (q / (lanes_in · tile_d) · lanes_in + lane_in) · store_vector. A warp's lanes_in neighbours
// write one output row's consecutive vectors (lanes_in · store_vector elements: a 32-byte
// sector at least), the others the same rows of 32 / lanes_in consecutive columns.
#pragma once

#include <cstdint>

namespace tilefuse {

struct TileLayout {
  int tile_in = 64;       // rows: coordinates along the output's contiguous dim
  int tile_d = 64;        // columns: coordinates along the staged load's contiguous dim
  int element_bytes = 2;  // of the staged load
  int load_vector = 8;    // elements per global load along a row
  int store_vector = 8;   // elements per global store (rows per thread in the store phase)
  int lanes_in = 2;       // store phase: lanes side by side along the output's contiguous dim
  int pitch = 64;         // elements from one row to the next
  int shared_vector = 8;  // elements per shared-memory store in the load phase (divides load_vector)

  int LoadVectors() const { return tile_in * (tile_d / load_vector); }
  int StoreVectors() const { return tile_d * (tile_in / store_vector); }
  int64_t Bytes() const { return int64_t{tile_in} * pitch * element_bytes; }
};

// Shared-memory wavefronts of the first warp's accesses to the tile (the load phase's stores
// and the store phase's reads): other warps' accesses are the same pattern shifted.
int64_t SharedWavefronts(const TileLayout& layout);

// `layout` with `pitch` and `shared_vector` chosen: the fewest wavefronts over paddings of 0
// to 31 elements; among equals the widest load-phase stores, then the least padding.
TileLayout WithBestPitch(TileLayout layout);

}  // namespace tilefuse

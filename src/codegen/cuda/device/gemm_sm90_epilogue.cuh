// gemm_sm90's epilogue: the generated Epilogue functor applied to every accumulator (or to
// one chunk of the held tile's columns), the staged store's tile out by TMA, and the
// overlapped loop that runs a held tile's epilogue beside the next tile's main loop.
// Included by gemm_sm90_consumer.cuh.
#pragma once

namespace tf {

// The epilogue of tile `tile`: every accumulator, or (Chunked, in the overlapped epilogue's
// loop over `chunk`) the columns of one chunk, read from the held pairs. Accumulator
// d[mb][j*4 + h*2 + e] holds row mb*64 + warp*16 + lane/4 + 8h, column 8j + (lane%4)*2 + e of
// the consumer's kConsumerRows × kBN slice (the wgmma D fragment layout). The staged store
// goes as column pairs into the swizzled staging tile, then out by TMA (GemmEpilogueStore)
// while the next main loop runs; other stores the functor writes directly. `load_parity`:
// the phase in which the tile's staged load lands (none in the overlapped epilogue).
//
// A product grouped over N (kBParts > 1) calls part kPart's epilogue for the whole tile (a tile
// lies in one part): chosen pair by pair, each pair was a branch of its own, and a pair's loads
// (a rotary embedding's tables) waited behind the stores of the pair before (the LLaMA-style
// q, k and v product with its rotary embeddings at 128 rows took 20.8 µs, 12.6 without them;
// H200, 2026-12-02).
template <class S, int kPart, class Epilogue, class... Args>
__device__ __forceinline__ void GemmEpiloguePair(const Epilogue& epilogue, Args&&... args) {
  if constexpr (S::kBParts == 1) epilogue.Pair(static_cast<Args&&>(args)...);
  else if constexpr (kPart == 0) epilogue.Pair0(static_cast<Args&&>(args)...);
  else if constexpr (kPart == 1) epilogue.Pair1(static_cast<Args&&>(args)...);
  else if constexpr (kPart == 2) epilogue.Pair2(static_cast<Args&&>(args)...);
  else epilogue.Pair3(static_cast<Args&&>(args)...);
}

// This consumer's staging tile: [mb][kOutBN / kBoxCols boxes][64 rows][kBoxCols columns], a
// box's rows 128 bytes (64 16-bit values or 32 f32 ones, swizzled as the map's 128-byte swizzle
// moves them) or 64 bytes (8-bit floats, kStoreBytes 1: unswizzled). Every box is 8 KB.
template <class S>
__device__ __forceinline__ unsigned char* GemmStagingOf(const GemmSharedMemory<S>& sm, const GemmConsumerState<S>& c) {
  return sm.staging + c.consumer * S::kConsumerRows * S::kOutBN * S::kStoreBytes;
}
template <class S>
inline constexpr int kStagedBoxCols = S::kStoreBytes == 4 ? 32 : 64;
template <class S>
__device__ __forceinline__ unsigned char* GemmStagedPair(unsigned char* staging, int mb, int row, int col) {
  constexpr int kBoxCols = kStagedBoxCols<S>;
  unsigned char* box = staging + (mb * (S::kOutBN / kBoxCols) + col / kBoxCols) * 64 * kBoxCols * S::kStoreBytes;
  if constexpr (S::kStoreBytes == 1) return box + row * 64 + col % 64;
  else return box + Swizzle128(row, (col % kBoxCols) * S::kStoreBytes);
}
// The held tile's product at d's element j * 4 + h * 2 + e (GemmConsumerState::held).
template <class S>
__device__ __forceinline__ float GemmHeld(const GemmConsumerState<S>& c, int mb, int j, int h, int e) {
  if constexpr (S::kHeldF32) return c.held_f32[mb][j * 4 + h * 2 + e];
  else return S::HeldElement::ToFloat((unsigned short)(c.held[mb][j * 2 + h] >> (16 * e)));
}
template <class S>
__device__ __forceinline__ void GemmHold(GemmConsumerState<S>& c) {
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int i = 0; i < S::kBN / 4; ++i) {
      if constexpr (S::kHeldF32) c.held_f32[mb][2 * i] = c.d[mb][2 * i], c.held_f32[mb][2 * i + 1] = c.d[mb][2 * i + 1];
      else c.held[mb][i] = S::HeldElement::Pack2(c.d[mb][2 * i], c.d[mb][2 * i + 1]);
    }
}

template <class S, bool Chunked, int kPart, class Epilogue>
__device__ __forceinline__ void GemmEpilogueOfPart(const GemmSharedMemory<S>& sm, const Epilogue& epilogue, GemmConsumerState<S>& c,
                                                   const TileCoordinates& tile, int chunk, const unsigned char* residual_chunk,
                                                   unsigned load_parity) {
  using Index = typename S::Index;
  unsigned char* my_staging = GemmStagingOf(sm, c);  // [mb][boxes][64 rows][128 bytes] (GemmStagedPair)
  if constexpr (S::kStagedLoad) {
    sm.tile_in[c.consumer].Wait(load_parity);  // the staged load's tile is there (its store read the old one)
  } else if constexpr (S::kStagedStore && !S::kStoreByThreads) {
    if (!Chunked || chunk == 0) {
      if (c.local == 0) TmaStoreWaitRead();  // the previous tile's store has read the staging tile
      NamedBarrierSync(1 + c.consumer, 128);
    }
  }
  const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
  const int col_base = tile.n * S::kOutBN + (c.lane % 4) * 2;
  constexpr int kChunkGroups = S::kOutBN / 8 / S::kChunks;  // output column groups of 8 per chunk
  // A gated product's sums of column group j: the gate's in group j, this product's kGateGroups on.
  constexpr int kGateGroups = S::kGated ? S::kOutBN / 8 : 0;
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int j = Chunked ? chunk * kChunkGroups : 0; j < (Chunked ? (chunk + 1) * kChunkGroups : S::kOutBN / 8); ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_in_batch = row_origin + mb * 64 + c.warp * 16 + c.lane / 4 + 8 * h;
        // For an even N a column pair is wholly inside or wholly outside; an odd N (a vocabulary
        // of 50257) ends inside the last pair, checked per element below.
        const bool inside = S::kNoEdges || (row_in_batch < c.rows && col_base + 8 * j < S::kN);
        float staged[2] = {0.0f, 0.0f};
        // This thread's column pair in the staging tile: the staged load is read there and the
        // staged store written back in its place.
        const int col_in_tile = 8 * j + (c.lane % 4) * 2;
        unsigned char* staged_pair = GemmStagedPair<S>(my_staging, mb, c.warp * 16 + c.lane / 4 + 8 * h, col_in_tile);
        unsigned loaded_pair = 0;
        if constexpr (S::kStagedLoad) loaded_pair = *(const unsigned*)staged_pair;
        if constexpr (S::kRingedLoad)  // the same column pair in the residual's chunk: kBM rows of kChunkCols columns
          loaded_pair = *(const unsigned*)(residual_chunk + ((c.consumer * 64 + mb * 64 + c.warp * 16 + c.lane / 4 + 8 * h) * S::kChunkCols +
                                                             (j - chunk * kChunkGroups) * 8 + (c.lane % 4) * 2) * 2);
        const Index row = (Index)tile.batch * c.rows + row_in_batch;
        float acc[2], gate_acc[2], partner[2], loaded[2] = {0.0f, 0.0f};
        // The partner column's sums (c XOR kPartnerGroups * 8: a rotary embedding's rotated
        // half), in this thread's registers as the tile's columns are whole pairs of halves.
        const int partner_j = j ^ S::kPartnerGroups;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if constexpr (Chunked) acc[e] = GemmHeld<S>(c, mb, j + kGateGroups, h, e);
          else acc[e] = c.d[mb][(j + kGateGroups) * 4 + h * 2 + e];
          if constexpr (S::kPartnerGroups != 0 && Chunked) partner[e] = GemmHeld<S>(c, mb, partner_j, h, e);
          else if constexpr (S::kPartnerGroups != 0) partner[e] = c.d[mb][partner_j * 4 + h * 2 + e];
          if constexpr (S::kGated && Chunked) gate_acc[e] = GemmHeld<S>(c, mb, j, h, e);
          else if constexpr (S::kGated) gate_acc[e] = c.d[mb][j * 4 + h * 2 + e];
          if constexpr (S::kStagedLoad || S::kRingedLoad) loaded[e] = S::LoadElement::ToFloat((unsigned short)(loaded_pair >> (16 * e)));
        }
        if constexpr (S::kN % 2 == 0) {
          // The column pair at once: the functor moves its other values at the product's
          // position as one word per pair (Epilogue::Pair).
          // (A gated product has no partner column.)
          if constexpr (S::kEpilogueWrites && S::kGated) {
            if (inside) GemmEpiloguePair<S, kPart>(epilogue, row, col_base + 8 * j, gate_acc, acc, loaded, staged);
          } else if constexpr (S::kEpilogueWrites && S::kPartnerGroups != 0) {
            if (inside) GemmEpiloguePair<S, kPart>(epilogue, row, col_base + 8 * j, acc, loaded, partner, staged);
          } else if constexpr (S::kEpilogueWrites) {
            if (inside) GemmEpiloguePair<S, kPart>(epilogue, row, col_base + 8 * j, acc, loaded, staged);
          } else {
            // Where the functor writes nothing itself, a pair past the product's edge computes
            // the values of the last row's or column's pair instead, which the staged store
            // drops (TMA clips its box at the map's edge; the threads' store checks): no branch
            // around each pair, so the compiler interleaves the pairs' programs. Branched, each
            // pair's chain (its bias load, an erf's polynomial and exp) ran alone: ViT-B's fc1
            // with its erf GELU took 91.4 µs at 6304 x 768 -> 3072, 57.4 with the bias alone
            // (H200, 2026-12-01).
            const Index clamped = S::kNoEdges ? row : (Index)tile.batch * c.rows + min(row_in_batch, c.rows - 1);
            const int clamped_col = S::kNoEdges ? col_base + 8 * j : min(col_base + 8 * j, S::kN - 2);
            if constexpr (S::kGated) GemmEpiloguePair<S, kPart>(epilogue, clamped, clamped_col, gate_acc, acc, loaded, staged);
            else if constexpr (S::kPartnerGroups != 0) GemmEpiloguePair<S, kPart>(epilogue, clamped, clamped_col, acc, loaded, partner, staged);
            else GemmEpiloguePair<S, kPart>(epilogue, clamped, clamped_col, acc, loaded, staged);
          }
        } else {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = col_base + 8 * j + e;
            if (!inside || col >= S::kN) continue;
            staged[e] = epilogue(row, col, acc[e], loaded[e]);
          }
        }
        if constexpr (S::kStagedStore) {
          auto pair = S::StoreElement::Pack2(staged[0], staged[1]);  // two 16-bit values, two 8-bit floats or a float2
          *(decltype(pair)*)staged_pair = pair;
        }
      }
}

// The tile's part (its first column past the starts of parts 1 .. kPart), then its epilogue.
template <class S, bool Chunked, int kPart = 0, class Epilogue>
__device__ __forceinline__ void GemmEpilogue(const GemmSharedMemory<S>& sm, const Epilogue& epilogue, GemmConsumerState<S>& c,
                                             const TileCoordinates& tile, int chunk, const unsigned char* residual_chunk,
                                             unsigned load_parity) {
  if constexpr (kPart + 1 < S::kBParts) {
    constexpr int kNextStart = kPart == 0 ? S::kBPart1 : kPart == 1 ? S::kBPart2 : S::kBPart3;
    if (tile.n * S::kOutBN >= kNextStart) {
      GemmEpilogue<S, Chunked, kPart + 1>(sm, epilogue, c, tile, chunk, residual_chunk, load_parity);
      return;
    }
  }
  GemmEpilogueOfPart<S, Chunked, kPart>(sm, epilogue, c, tile, chunk, residual_chunk, load_parity);
}

// Eight half-precision elements starting `shift` (0..7) elements into `lo`, running on into
// `hi`: the 16-byte unit a row that starts off a 16-byte boundary needs from two aligned
// units of the staging tile. Selects, not an indexed array (which would go to local memory).
__device__ __forceinline__ uint4 ShiftedUnit(uint4 lo, uint4 hi, int shift) {
  const unsigned w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const int words = shift >> 1;
  unsigned r[5];
#pragma unroll
  for (int j = 0; j < 5; ++j) r[j] = words == 0 ? w[j] : words == 1 ? w[j + 1] : words == 2 ? w[j + 2] : w[j + 3];
  if (shift & 1) {  // odd: the high half of each word and the low half of the next
#pragma unroll
    for (int j = 0; j < 4; ++j) r[j] = __byte_perm(r[j], r[j + 1], 0x5432);
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

// A row's edge of a tile whose rows are not 16-byte aligned: the tile columns [col, col +
// count) before the row's first whole 16-byte unit (`tail` false: the `lead` columns to the
// row's next 16-byte boundary, at most `valid`, the tile's columns inside the product) or after
// its last (`tail` true). count <= 0: none.
__device__ __forceinline__ void GemmEdgeColumns(int lead, int valid, bool tail, int& col, int& count) {
  const int head = lead < valid ? lead : valid;
  const int units_end = valid - (valid - lead) % 8;  // the last whole unit's end (below head: none)
  col = tail ? (head > units_end ? head : units_end) : 0;
  count = tail ? valid - col : head;
}
// How many 2-byte elements the next store of an edge writes at byte address `address` with
// `left` elements to go: the most of 1, 2 or 4 that the address is aligned for and that are
// left. From any 2-byte alignment, at most four such stores cover a run of up to 7.
__device__ __forceinline__ int GemmEdgeStoreElements(unsigned address, int left) {
  return (address & 2) || left < 2 ? 1 : (address & 4) || left < 4 ? 2 : 4;
}
// Elements [col, col + count) of a row starting at `out` (count < 8), element x read by
// element(x), written as GemmEdgeStoreElements says.
template <class Element>
__device__ __forceinline__ void GemmStoreEdge(unsigned short* out, int col, int count, const Element& element) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (count <= 0) break;
    const int n = GemmEdgeStoreElements((unsigned)(unsigned long long)(out + col), count);
    unsigned short e[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) e[j] = j < n ? element(col + j) : 0;
    if (n == 1) out[col] = e[0];
    else if (n == 2) *(unsigned*)(out + col) = e[0] | (unsigned)e[1] << 16;
    else *(uint2*)(out + col) = make_uint2(e[0] | (unsigned)e[1] << 16, e[2] | (unsigned)e[3] << 16);
    col += n, count -= n;
  }
}

// The staged store where its rows are not 16-byte aligned (kStoreByThreads), which TMA
// cannot write (a TMA store's first column must be at a 16-byte multiple: an unaligned map
// faults, 2026-11-30): this warp's own rows of the staging tile (only this warp wrote them,
// so a __syncwarp orders them), for the range of columns [col_begin, col_begin + kCols),
// ranges called in order up to the tile's last column.
//
// Each row goes out as 16-byte units on the row's own 16-byte grid, each assembled from the
// two aligned staging units it straddles, consecutive units on consecutive lanes. A range
// writes the units that end inside it, the one reaching back into the range before included
// (still staged: a warp's rows are its own until the next tile's epilogue). Only the units
// straddling the tile's edges, shared with the neighbouring tiles, go in smaller stores, with
// the last range: at most 7 elements a row at each end of a tile, in at most four aligned
// stores of 2, 4 or 8 bytes, a lane an edge. (Element by element, 16 items a row over eight
// passes, the edges took ~11% of bf16's GPT-2 LM head's warp samples: H100, 2026-12-07.)
//
// Measured (4096x768x50257, overlapped epilogue in chunks of 64 columns, H200, 2026-11-30):
// 560 µs (565 TF/s) on two machines, where one element a lane took 764. On a third machine,
// one element a lane and units with every chunk's edges element by element both took 1484,
// units with the edges left unwritten (a probe) 764. The epilogue runs between the next
// tile's MMA steps, so what counts is its instructions, and element stores are many.
template <class S, int kCols>
__device__ __forceinline__ void GemmStoreWarpRows(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const GemmConsumerState<S>& c,
                                                  const TileCoordinates& tile, int col_begin) {
  static_assert(kCols % 8 == 0 && S::kBN % kCols == 0, "ranges of whole 16-byte staging units that tile the tile");
  using Index = typename S::Index;
  constexpr int kUnits = kCols / 8;  // units ending in a range
  __syncwarp();
  const unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;  // (never gated: kOutBN is kBN)
  const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
  const int tile_col = tile.n * S::kBN;
  const int valid = min(S::kBN, S::kN - tile_col);  // the tile's columns inside the product
  // Staging row r of block mb (this warp's rows are warp * 16 + 0..15), tile column `col`.
  auto staged = [&](int mb, int r, int col) {
    return my_staging + (mb * (S::kBN / 64) + col / 64) * 64 * 128 + Swizzle128(r, (col % 64) * 2);
  };
  // Row r's element at the tile's first column, and `lead`: how many of the tile's first
  // columns precede the row's next 16-byte boundary (0..7; the unit straddling the tile's
  // start holds them). The same for every range of the tile, as ranges are whole units.
  // nullptr for rows past the product's.
  auto row_start = [&](int mb, int r, int& lead) -> unsigned short* {
    const int row_in_batch = row_origin + mb * 64 + r;
    if (row_in_batch >= c.rows) return nullptr;
    unsigned short* p = (unsigned short*)maps.stored + ((Index)tile.batch * c.rows + row_in_batch) * S::kN + tile_col;
    lead = (int)((8 - (((unsigned long long)p >> 1) & 7)) & 7);
    return p;
  };
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb) {
#pragma unroll 4
    for (int pass = 0; pass < (16 * kUnits + 31) / 32; ++pass) {
      const int i = pass * 32 + c.lane, r = c.warp * 16 + i / kUnits;
      if (i >= 16 * kUnits) continue;
      int lead = 0;
      unsigned short* out = row_start(mb, r, lead);
      // The row's units start at tile columns lead + 8j: the range's unit u (ending inside
      // it) starts at col_begin + lead - 8 + 8u, or col_begin + 8u where lead is 0.
      const int col = col_begin + (lead == 0 ? 0 : lead - 8) + 8 * (i % kUnits);
      if (out == nullptr || col < 0 || col + 8 > valid) continue;  // a tile edge's unit, or past N
      // It starts `lead` columns into a staging unit (ranges start on staging units).
      const uint4 first = *(const uint4*)staged(mb, r, col - lead);
      *(uint4*)(out + col) = lead == 0 ? first : ShiftedUnit(first, *(const uint4*)staged(mb, r, col - lead + 8), lead);
    }
    if (col_begin + kCols != S::kBN) continue;
    // The tile's edges after its last range, a lane a row's edge (lanes 0-15 the heads of the
    // warp's 16 rows, 16-31 their tails): the columns before the row's first whole unit, and
    // those after its last (GemmEdgeColumns), each edge fewer than 8 elements written as at
    // most four stores of 2, 4 or 8 bytes on their own alignment (GemmEdgeStoreElements).
    {
      const int r = c.warp * 16 + c.lane % 16;
      int lead = 0;
      unsigned short* out = row_start(mb, r, lead);
      int col = 0, count = 0;
      GemmEdgeColumns(lead, valid, c.lane >= 16, col, count);
      // The edge's fewer than 8 columns lie in one staging unit or two: their addresses once.
      const int unit = col - col % 8;
      const auto* lo = (const unsigned short*)staged(mb, r, unit);
      const auto* hi = (const unsigned short*)staged(mb, r, unit + 8 < S::kBN ? unit + 8 : unit);
      if (out != nullptr) GemmStoreEdge(out, col, count, [&](int x) { return x < unit + 8 ? lo[x - unit] : hi[x - unit - 8]; });
    }
  }
}

// The staged store's tile, out by TMA once every thread of the consumer has written it (or
// by the threads, each warp its rows).
template <class S>
__device__ __forceinline__ void GemmEpilogueStore(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const GemmConsumerState<S>& c,
                                                  const TileCoordinates& tile) {
  if constexpr (S::kStoreByThreads) {
    GemmStoreWarpRows<S, S::kBN>(sm, maps, c, tile, 0);
    return;
  }
  FenceSharedForAsync();
  NamedBarrierSync(1 + c.consumer, 128);
  if (c.local == 0) {
    unsigned char* my_staging = GemmStagingOf(sm, c);
    const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb)
      for (int box = 0; box < S::kOutBN / kStagedBoxCols<S>; ++box)
        TmaStore3d(*maps.out, GemmStagedPair<S>(my_staging, mb, 0, box * kStagedBoxCols<S>), tile.n * S::kOutBN + box * kStagedBoxCols<S>,
                   row_origin + mb * 64, tile.batch);
    TmaStoreCommit();
  }
}

// The held tile's epilogue, a chunk of columns at a time, this tile's first main-loop steps
// issued beside the chunks, one a chunk. kIssue < 0: while steps remain (ks < k_end; 16-bit
// products); kIssue >= 0: promoted FP8 steps in the first kIssue chunks, said at compile time
// (a branch between a wgmma and the reading of its sums made ptxas serialize every wgmma, C7514).
template <class S, int kIssue, class Epilogue>
__device__ __forceinline__ void GemmHeldChunks(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Epilogue& epilogue,
                                               GemmConsumerState<S>& c, const TileCoordinates& t, const TileCoordinates& held_t, int& ks,
                                               int k_begin, int k_end, Pipeline<S::kResidualSlots>& residual) {
#pragma unroll
  for (int chunk = 0; chunk < S::kChunks; ++chunk) {
    // At most kSplitSteps steps are issued, one a chunk from the first: said outright, so
    // that a short K range keeps its issue code in the first chunks only.
    const bool issued = kIssue < 0 ? ks < k_end && chunk < S::kSplitSteps : chunk < kIssue;
    // The step's slot before this one goes back first: the producer's next load must not
    // wait for the chunk.
    if (issued) {
      if constexpr (S::kPromote) {
        GemmPromotedStepIssue(sm, maps, c, t, ks);
      } else {
        GemmIssueStep(sm, maps, c, t, ks, k_begin, -1);  // (no staged load beside an overlapped epilogue)
        GemmRetireStep(sm, c);
      }
    }
    const unsigned char* residual_chunk = nullptr;
    if constexpr (S::kRingedLoad) {
      sm.residual_full[residual.stage].Wait(residual.phase);  // the chunk's residual has landed
      residual_chunk = sm.residual_ring + residual.stage * S::kResidualSlotBytes;
    }
    GemmEpilogue<S, true>(sm, epilogue, c, held_t, chunk, residual_chunk, 0);
    if constexpr (S::kStoreByThreads) GemmStoreWarpRows<S, S::kChunkCols>(sm, maps, c, held_t, chunk * S::kChunkCols);
    if constexpr (S::kRingedLoad) {
      __syncwarp();
      if (c.lane == 0) sm.residual_empty[residual.stage].Arrive();  // this warp has read the slot
      residual.Advance();
    }
    if (issued) {
      if constexpr (S::kPromote) GemmPromotedStepRetire(sm, c);
      ++ks;
      c.ring.Advance();
    }
  }
  if constexpr (S::kStagedStore && !S::kStoreByThreads) GemmEpilogueStore(sm, maps, c, held_t);
}

// Overlapped epilogue (cooperative consumers, no split-K): the previous tile's products wait
// as packed pairs (an FP8 product's as f32 sums) while this tile's first kChunks steps run
// their epilogue, one chunk of columns per step. A last pass without a tile of its own
// finishes the last tile held.
template <class S, class Epilogue>
__device__ __forceinline__ void GemmConsumerOverlapped(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Epilogue& epilogue,
                                                       GemmConsumerState<S>& c, int cta_rank, int first_unit, int unit_step) {
  TileCoordinates held_t = {};
  bool holding = false;
  Pipeline<S::kResidualSlots> residual;  // the residual ring's slot for the next chunk
  const int units = GemmUnits<S>(maps);
  for (int unit = first_unit; unit < units || holding; unit += unit_step) {
    const bool has_tile = unit < units;
    const int tile = unit / S::kSplits, split = unit % S::kSplits;
    const TileCoordinates t = GemmTileAt<S>(tile, cta_rank, maps);
    const int k_begin = split * S::kSplitSteps, k_end = has_tile ? min(S::kKSteps, k_begin + S::kSplitSteps) : k_begin;
    int ks = k_begin;
    c.previous = -1;
    if constexpr (S::kPromote) GemmZeroAccumulators(c);  // (the last tile's sums are held: GemmHold)
    if (holding) {
      if constexpr (S::kPromote) {  // (one unit a tile: every tile has kKSteps steps)
        constexpr int kChunkSteps = S::kChunks < S::kKSteps ? S::kChunks : S::kKSteps;
        if (has_tile) GemmHeldChunks<S, kChunkSteps>(sm, maps, epilogue, c, t, held_t, ks, k_begin, k_end, residual);
        else GemmHeldChunks<S, 0>(sm, maps, epilogue, c, t, held_t, ks, k_begin, k_end, residual);
      } else {
        GemmHeldChunks<S, -1>(sm, maps, epilogue, c, t, held_t, ks, k_begin, k_end, residual);
      }
    }
    if constexpr (S::kPromote) {  // (every slot handed back by its step)
      for (; ks < k_end; ks += kOverlappedChain<S>) GemmPromotedSteps<S, kOverlappedChain<S>>(sm, maps, c, t, ks, -1);
      if (!has_tile) break;
    } else {
      for (; ks < k_end; ++ks, c.ring.Advance()) {
        GemmIssueStep(sm, maps, c, t, ks, k_begin, -1);  // (no staged load beside an overlapped epilogue)
        GemmRetireStep(sm, c);
      }
      Warpgroup::Wait<0>();
      if (!has_tile) break;
      GemmReleaseSlot(sm, c.previous, c.local);
    }
    GemmHold(c);
    held_t = t;
    holding = true;
  }
}

}  // namespace tf

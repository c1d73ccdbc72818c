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
template <class S, bool Chunked, class Epilogue>
__device__ __forceinline__ void GemmEpilogue(const GemmSharedMemory<S>& sm, const Epilogue& epilogue, GemmConsumerState<S>& c,
                                             const TileCoordinates& tile, int chunk, const unsigned char* residual_chunk,
                                             unsigned load_parity) {
  using Index = typename S::Index;
  unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;  // [mb][kBN / 64][64][64]
  if constexpr (S::kStagedLoad) {
    sm.tile_in[c.consumer].Wait(load_parity);  // the staged load's tile is there (its store read the old one)
  } else if constexpr (S::kStagedStore && !S::kStoreByThreads) {
    if (!Chunked || chunk == 0) {
      if (c.local == 0) TmaStoreWaitRead();  // the previous tile's store has read the staging tile
      NamedBarrierSync(1 + c.consumer, 128);
    }
  }
  const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
  const int col_base = tile.n * S::kBN + (c.lane % 4) * 2;
  constexpr int kChunkGroups = S::kBN / 8 / S::kChunks;  // column groups of 8 per chunk
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int j = Chunked ? chunk * kChunkGroups : 0; j < (Chunked ? (chunk + 1) * kChunkGroups : S::kBN / 8); ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_in_batch = row_origin + mb * 64 + c.warp * 16 + c.lane / 4 + 8 * h;
        // For an even N a column pair is wholly inside or wholly outside; an odd N (a vocabulary
        // of 50257) ends inside the last pair, checked per element below.
        const bool inside = S::kNoEdges || (row_in_batch < S::kRows && col_base + 8 * j < S::kN);
        float staged[2] = {0.0f, 0.0f};
        // This thread's column pair in the staging tile: the staged load is read there and the
        // staged store written back in its place.
        const int col_in_tile = 8 * j + (c.lane % 4) * 2;
        unsigned* staged_pair = (unsigned*)(my_staging + (mb * (S::kBN / 64) + col_in_tile / 64) * 64 * 128 +
                                            Swizzle128(c.warp * 16 + c.lane / 4 + 8 * h, (col_in_tile % 64) * 2));
        unsigned loaded_pair = 0;
        if constexpr (S::kStagedLoad) loaded_pair = *staged_pair;
        if constexpr (S::kRingedLoad)  // the same column pair in the residual's chunk: kBM rows of kChunkCols columns
          loaded_pair = *(const unsigned*)(residual_chunk + ((c.consumer * 64 + mb * 64 + c.warp * 16 + c.lane / 4 + 8 * h) * S::kChunkCols +
                                                             (j - chunk * kChunkGroups) * 8 + (c.lane % 4) * 2) * 2);
        const Index row = (Index)tile.batch * S::kRows + row_in_batch;
        float acc[2], loaded[2] = {0.0f, 0.0f};
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          acc[e] = Chunked ? S::Element::ToFloat((unsigned short)(c.held[mb][j * 2 + h] >> (16 * e))) : c.d[mb][j * 4 + h * 2 + e];
          if constexpr (S::kStagedLoad || S::kRingedLoad) loaded[e] = S::LoadElement::ToFloat((unsigned short)(loaded_pair >> (16 * e)));
        }
        if constexpr (S::kN % 2 == 0) {
          // The column pair at once: the functor moves its other values at the product's
          // position as one word per pair (Epilogue::Pair).
          if (inside) epilogue.Pair(row, col_base + 8 * j, acc, loaded, staged);
        } else {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = col_base + 8 * j + e;
            if (!inside || col >= S::kN) continue;
            staged[e] = epilogue(row, col, acc[e], loaded[e]);
          }
        }
        if constexpr (S::kStagedStore) *staged_pair = S::StoreElement::Pack2(staged[0], staged[1]);
      }
}

// The staged store where its rows are not 16-byte aligned (kStoreByThreads), which TMA
// cannot write: this warp's own rows of the staging tile (only this warp wrote them, so a
// __syncwarp orders them), columns [col_begin, col_begin + kCols), consecutive columns on
// consecutive lanes, so that each store instruction writes whole runs of a row. (Runs of 64
// columns as 4-byte words, written after every fourth chunk of the overlapped epilogue,
// took 801 against 665 µs: H200, 4096x768x50257, 2026-11-29.) Four passes unrolled: eight
// spilled 84 bytes beside the overlapped epilogue's held tile at 128x256.
template <class S, int kCols>
__device__ __forceinline__ void GemmStoreWarpRows(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const GemmConsumerState<S>& c,
                                                  const TileCoordinates& tile, int col_begin) {
  using Index = typename S::Index;
  __syncwarp();
  const unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;
  unsigned short* out = (unsigned short*)maps.stored;
  const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll 4
    for (int pass = 0; pass < 16 * kCols / 32; ++pass) {
      const int i = pass * 32 + c.lane, r = c.warp * 16 + i / kCols, col_in_tile = col_begin + i % kCols;
      const int row_in_batch = row_origin + mb * 64 + r, col = tile.n * S::kBN + col_in_tile;
      if (row_in_batch >= S::kRows || col >= S::kN) continue;
      out[((Index)tile.batch * S::kRows + row_in_batch) * S::kN + col] = *(const unsigned short*)(
          my_staging + (mb * (S::kBN / 64) + col_in_tile / 64) * 64 * 128 + Swizzle128(r, (col_in_tile % 64) * 2));
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
    unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;
    const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb)
      for (int box = 0; box < S::kBN / 64; ++box)
        TmaStore3d(*maps.out, my_staging + (mb * (S::kBN / 64) + box) * 64 * 128, tile.n * S::kBN + box * 64, row_origin + mb * 64,
                   tile.batch);
    TmaStoreCommit();
  }
}

// Overlapped epilogue (cooperative consumers, no split-K): the previous tile's products wait
// as packed pairs while this tile's first kChunks steps run their epilogue, one chunk of
// columns per step. A last pass without a tile of its own finishes the last tile held.
template <class S, class Epilogue>
__device__ __forceinline__ void GemmConsumerOverlapped(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Epilogue& epilogue,
                                                       GemmConsumerState<S>& c, int cta_rank, int first_unit, int unit_step) {
  TileCoordinates held_t = {};
  bool holding = false;
  Pipeline<S::kResidualSlots> residual;  // the residual ring's slot for the next chunk
  for (int unit = first_unit; unit < S::kUnits || holding; unit += unit_step) {
    const bool has_tile = unit < S::kUnits;
    const int tile = unit / S::kSplits, split = unit % S::kSplits;
    const TileCoordinates t = GemmTileAt<S>(tile, cta_rank);
    const int k_begin = split * S::kSplitSteps, k_end = has_tile ? min(S::kKSteps, k_begin + S::kSplitSteps) : k_begin;
    int ks = k_begin;
    c.previous = -1;
    if (holding) {
#pragma unroll
      for (int chunk = 0; chunk < S::kChunks; ++chunk) {
        // At most kSplitSteps steps are issued, one a chunk from the first: said outright, so
        // that a short K range keeps its issue code in the first chunks only.
        const bool issued = ks < k_end && chunk < S::kSplitSteps;
        // The step's slot before this one goes back first: the producer's next load must not
        // wait for the chunk.
        if (issued) {
          GemmIssueStep(sm, maps, c, t, ks, k_begin, k_end);
          GemmRetireStep(sm, c);
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
          ++ks;
          c.ring.Advance();
        }
      }
      if constexpr (S::kStagedStore && !S::kStoreByThreads) GemmEpilogueStore(sm, maps, c, held_t);
    }
    for (; ks < k_end; ++ks, c.ring.Advance()) {
      GemmIssueStep(sm, maps, c, t, ks, k_begin, k_end);
      GemmRetireStep(sm, c);
    }
    Warpgroup::Wait<0>();
    if (!has_tile) break;
    GemmReleaseSlot(sm, c.previous, c.local);
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
      for (int i = 0; i < S::kBN / 4; ++i) c.held[mb][i] = S::Element::Pack2(c.d[mb][2 * i], c.d[mb][2 * i + 1]);
    held_t = t;
    holding = true;
  }
}

}  // namespace tf

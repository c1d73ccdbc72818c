// gemm_sm90's epilogue: the generated Epilogue functor applied to every accumulator (or to
// one chunk of the held tile's columns), the staged store's tile out by TMA, and the
// overlapped loop that runs a held tile's epilogue beside the next tile's main loop.
// Included by gemm_sm90_consumer.cuh.
#pragma once

namespace tf {

// The epilogue of tile `tile`, in the main loop's tail: every accumulator. Accumulator
// d[mb][j*4 + h*2 + e] holds row mb*64 + warp*16 + lane/4 + 8h, column 8j + (lane%4)*2 + e of
// the consumer's kConsumerRows × kBN slice (the wgmma D fragment layout). The staged store
// goes as column pairs into the swizzled staging tile, then out by TMA (GemmEpilogueStore)
// while the next main loop runs; other stores the functor writes directly. `load_parity`:
// the phase in which the tile's staged load lands.
template <class S, class Epilogue>
__device__ __forceinline__ void GemmEpilogue(const GemmSharedMemory<S>& sm, const Epilogue& epilogue, GemmConsumerState<S>& c,
                                             const TileCoordinates& tile, unsigned load_parity) {
  using Index = typename S::Index;
  unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;  // [mb][kBN / 64][64][64]
  if constexpr (S::kStagedLoad) {
    sm.tile_in[c.consumer].Wait(load_parity);  // the staged load's tile is there (its store read the old one)
  } else if constexpr (S::kStagedStore) {
    if (c.local == 0) TmaStoreWaitRead();  // the previous tile's store has read the staging tile
    NamedBarrierSync(1 + c.consumer, 128);
  }
  const int row_origin = tile.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64);
  const int col_base = tile.n * S::kBN + (c.lane % 4) * 2;
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int j = 0; j < S::kBN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_in_batch = row_origin + mb * 64 + c.warp * 16 + c.lane / 4 + 8 * h;
        // N is a multiple of 8: a column pair is wholly inside or wholly outside.
        const bool inside = S::kNoEdges || (row_in_batch < S::kRows && col_base + 8 * j < S::kN);
        float staged[2] = {0.0f, 0.0f};
        // This thread's column pair in the staging tile: the staged load is read there and the
        // staged store written back in its place.
        unsigned* staged_pair = (unsigned*)(my_staging + (mb * (S::kBN / 64) + j / 8) * 64 * 128 +
                                            Swizzle128(c.warp * 16 + c.lane / 4 + 8 * h, (8 * j % 64 + (c.lane % 4) * 2) * 2));
        unsigned loaded_pair = 0;
        if constexpr (S::kStagedLoad) loaded_pair = *staged_pair;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (!inside) continue;
          const Index row = (Index)tile.batch * S::kRows + row_in_batch;
          float loaded = 0.0f;
          if constexpr (S::kStagedLoad) loaded = S::LoadElement::ToFloat((unsigned short)(loaded_pair >> (16 * e)));
          staged[e] = epilogue(row, col_base + 8 * j + e, c.d[mb][j * 4 + h * 2 + e], loaded);
        }
        if constexpr (S::kStagedStore) *staged_pair = S::StoreElement::Pack2(staged[0], staged[1]);
      }
}

// The staged store's tile, out by TMA once every thread of the consumer has written it.
template <class S>
__device__ __forceinline__ void GemmEpilogueStore(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const GemmConsumerState<S>& c,
                                                  const TileCoordinates& tile) {
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

// The overlapped epilogue (cooperative consumers, one unit a tile), in the producer
// warpgroup's three other warps: the consumers leave each tile's products in the staging
// tile, rounded to the product's type as the graph rounds them, and go straight on to the
// next tile's main loop. These warps run the epilogue over the held tile while that main
// loop keeps the tensor cores busy: chunk by chunk of columns (the order the residual's ring
// fills in), each warp a few rows of a chunk at a time, the staged store written back in
// place and sent out by TMA; then they hand the staging tile back. The consumers' main loop
// and this loop are each printed once, so NVRTC compiles one copy of the main-loop step (the
// form that ran a chunk beside each of the next tile's first steps, in the consumers,
// unrolled 16 copies of it: 3.4-4.8 s of NVRTC).
template <class S>
__device__ __forceinline__ void GemmConsumerHandingOver(const GemmSharedMemory<S>& sm, const GemmMaps& maps, GemmConsumerState<S>& c,
                                                        int cta_rank, int first_unit, int unit_step) {
  unsigned parity = 0;
  unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;  // [mb][kBN / 64][64][64]
  for (int unit = first_unit; unit < S::kUnits; unit += unit_step, parity ^= 1) {
    const TileCoordinates t = GemmTileAt<S>(unit, cta_rank);
    c.previous = -1;
    for (int ks = 0; ks < S::kKSteps; ++ks, c.ring.Advance()) {
      GemmIssueStep(sm, maps, c, t, ks, 0, S::kKSteps);
      GemmRetireStep(sm, c);
    }
    Warpgroup::Wait<0>();
    GemmReleaseSlot(sm, c.previous, c.local);
    sm.held_empty->Wait(parity ^ 1);  // the epilogue warps are done with the tile before
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
      for (int j = 0; j < S::kBN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *(unsigned*)(my_staging + (mb * (S::kBN / 64) + j / 8) * 64 * 128 +
                       Swizzle128(c.warp * 16 + c.lane / 4 + 8 * h, (8 * j % 64 + (c.lane % 4) * 2) * 2)) =
              S::Element::Pack2(c.d[mb][j * 4 + h * 2], c.d[mb][j * 4 + h * 2 + 1]);
    sm.held_full->Arrive();
  }
}

// The tile row that row `r` of pass `pass` covers. Four rows of 32 bytes a pass (16-column
// chunks) are every other row, so that their 16-byte units in the 128-byte swizzle fall in
// different banks (rows 2i and 2i+1 share their units' banks); eight rows of 16 bytes are
// consecutive, which the swizzle already spreads.
template <int kRowsPerPass>
__device__ __forceinline__ int GemmEpiloguePassRow(int pass, int r) {
  if constexpr (kRowsPerPass == 4) return pass / 2 * 8 + pass % 2 + 2 * r;
  return pass * kRowsPerPass + r;
}

template <class S, class Epilogue>
__device__ __forceinline__ void GemmEpilogueWarps(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Epilogue& epilogue,
                                                  int cta_rank) {
  using Index = typename S::Index;
  constexpr int kWarps = 3;
  constexpr int kPairsPerRow = S::kChunkCols / 2;  // a chunk's column pairs in one row
  constexpr int kRowsPerPass = 32 / kPairsPerRow;  // the rows a warp covers at once
  // kUnroll passes' reads in flight together; each warp a whole number of kUnroll passes
  // (rows past the tile skipped).
  constexpr int kUnroll = 4;
  constexpr int kPassesPerWarp = ((S::kBM / kRowsPerPass + kWarps - 1) / kWarps + kUnroll - 1) / kUnroll * kUnroll;
  const int warp = threadIdx.x / 32 - 1, lane = threadIdx.x % 32;
  const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
  Pipeline<S::kResidualSlots> residual;
  unsigned parity = 0;
  for (int unit = cluster_id; unit < S::kUnits; unit += clusters, parity ^= 1) {
    const TileCoordinates t = GemmTileAt<S>(unit, cta_rank);
    sm.held_full->Wait(parity);
#pragma unroll 1
    for (int chunk = 0; chunk < S::kChunks; ++chunk) {
      const unsigned char* residual_chunk = nullptr;
      if constexpr (S::kRingedLoad) {
        sm.residual_full[residual.stage].Wait(residual.phase);  // the chunk's residual has landed
        residual_chunk = sm.residual_ring + residual.stage * S::kResidualSlotBytes;
      }
      const int col_in_tile = chunk * S::kChunkCols + lane % kPairsPerRow * 2;
      const int col = t.n * S::kBN + col_in_tile;
#pragma unroll 1
      for (int pass0 = warp * kPassesPerWarp; pass0 < (warp + 1) * kPassesPerWarp; pass0 += kUnroll) {
        // kUnroll passes' pairs read first, so that their reads are in flight together.
        unsigned held[kUnroll], loaded[kUnroll];
        unsigned* pair[kUnroll];
        int row_in_tile[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          row_in_tile[u] = GemmEpiloguePassRow<kRowsPerPass>(pass0 + u, lane / kPairsPerRow);
          pair[u] = (unsigned*)(sm.staging + row_in_tile[u] / 64 * 64 * S::kBN * 2 + col_in_tile / 64 * 64 * 128 +
                                Swizzle128(row_in_tile[u] % 64, col_in_tile % 64 * 2));
          held[u] = row_in_tile[u] < S::kBM ? *pair[u] : 0u;
          loaded[u] = 0;
          if constexpr (S::kRingedLoad)
            if (row_in_tile[u] < S::kBM)
              loaded[u] = *(const unsigned*)(residual_chunk + (row_in_tile[u] * S::kChunkCols + lane % kPairsPerRow * 2) * 2);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int row_in_batch = t.m * S::kBM + row_in_tile[u];
          // N is a multiple of 8: a column pair is wholly inside or wholly outside.
          if (row_in_tile[u] >= S::kBM || !(S::kNoEdges || (row_in_batch < S::kRows && col < S::kN))) continue;
          const Index row = (Index)t.batch * S::kRows + row_in_batch;
          float staged[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float acc = S::Element::ToFloat((unsigned short)(held[u] >> (16 * e)));
            float from_ring = 0.0f;
            if constexpr (S::kRingedLoad) from_ring = S::LoadElement::ToFloat((unsigned short)(loaded[u] >> (16 * e)));
            staged[e] = epilogue(row, col + e, acc, from_ring);
          }
          if constexpr (S::kStagedStore) *pair[u] = S::StoreElement::Pack2(staged[0], staged[1]);
        }
      }
      if constexpr (S::kRingedLoad) {
        __syncwarp();
        if (lane == 0) sm.residual_empty[residual.stage].Arrive();  // this warp has read the slot
        residual.Advance();
      }
    }
    if constexpr (S::kStagedStore) FenceSharedForAsync();
    NamedBarrierSync(4, kWarps * 32);
    if (threadIdx.x == 32) {
      if constexpr (S::kStagedStore) {
        for (int consumer = 0; consumer < S::kConsumers; ++consumer)
          for (int box = 0; box < S::kBN / 64; ++box)
            TmaStore3d(*maps.out, sm.staging + (consumer * (S::kBN / 64) + box) * 64 * 128, t.n * S::kBN + box * 64,
                       t.m * S::kBM + consumer * 64, t.batch);
        TmaStoreCommit();
        TmaStoreWaitRead();
      }
      sm.held_empty->Arrive();
    }
  }
  if constexpr (S::kStagedStore)
    if (threadIdx.x == 32) TmaStoreWait();  // shared memory must outlive the stores reading it
}

}  // namespace tf

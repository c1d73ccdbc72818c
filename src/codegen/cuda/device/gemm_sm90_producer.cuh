// gemm_sm90's producer warpgroup: one thread keeps the ring of A and B tiles full (and, for
// an overlapped epilogue with a ringed residual, the residual's ring). Included by
// gemm_sm90.cuh.
#pragma once

namespace tf {

// K step ks's B tile into ring slot `stage`.
template <class S>
__device__ __forceinline__ void GemmLoadB(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int stage, const TileCoordinates& t, int ks,
                                          int cta_rank) {
  // B in boxes of kBBoxColumns columns × kBK rows of K (MN-major: one 128-byte swizzle row of
  // N), or of 64 rows of N × kBK columns of K (K-major): the box's map coordinates are (n, k)
  // or (k, n).
  constexpr int kBox = S::kBBoxColumns;
  // A product grouped over N: the tile's part, its weight's map and its columns within it.
  const TensorMap* map = maps.b;
  int column = t.n * S::kBN;
  if constexpr (S::kBParts > 1) {
    const int starts[3] = {S::kBPart1, S::kBPart2, S::kBPart3};
    int start = 0;
#pragma unroll
    for (int p = 1; p < S::kBParts; ++p)
      if (column >= starts[p - 1]) map = maps.more_b[p - 1], start = starts[p - 1];
    column -= start;
  }
  // A gated product: the tile's kOutBN columns of N, its first boxes from the gate's weight
  // (maps.b), the rest from this product's.
  if constexpr (S::kGated) column = t.n * S::kOutBN;
  constexpr int kHalfBoxes = S::kGated ? S::kBN / kBox / 2 : S::kBN / kBox;
  auto box_map = [&](int box) -> const TensorMap& { return S::kGated && box >= kHalfBoxes ? *maps.more_b[0] : *map; };
  auto box_column = [&](int box) { return column + (S::kGated ? box % kHalfBoxes : box) * kBox; };
  auto box_c0 = [&](int box) { return S::kBKMajor ? ks * S::kBK : box_column(box); };
  auto box_c1 = [&](int box) { return S::kBKMajor ? box_column(box) : ks * S::kBK; };
  if (S::kClusterM > 1) {  // this CTA's share of B's boxes, to every CTA of the cluster
    constexpr int kShare = S::kBN / kBox / S::kClusterM;
#pragma unroll
    for (int box = cta_rank * kShare; box < (cta_rank + 1) * kShare; ++box)
      TmaLoad3dMulticast(sm.tile_b + stage * S::kBN * S::kBK + box * S::kBK * kBox, box_map(box), box_c0(box), box_c1(box), t.batch,
                         sm.full[stage], (unsigned short)((1 << S::kClusterM) - 1));
  } else {
#pragma unroll
    for (int box = 0; box < S::kBN / kBox; ++box)
      TmaLoad3d(sm.tile_b + stage * S::kBN * S::kBK + box * S::kBK * kBox, box_map(box), box_c0(box), box_c1(box), t.batch, sm.full[stage]);
  }
}

// One K step's operands into the ring's next slot, once every consumer has handed it back;
// only A where the slot already holds B and waits for A (b_loaded: GemmLoadBAhead).
template <class S, class ALoader>
__device__ __forceinline__ void GemmProducerStep(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Pipeline<S::kStages>& ring,
                                                 const TileCoordinates& t, int ks, int cta_rank, bool b_loaded = false) {
  if (!b_loaded) {
    sm.empty[ring.stage].Wait(ring.phase ^ 1);
    sm.full[ring.stage].ArriveExpectingBytes(S::kStageBytes);
  }
  ALoader::template Load<S>(sm.tile_a + ring.stage * S::kBM * S::kBK, *maps.a, ks, t, sm.full[ring.stage]);
  if (!b_loaded) GemmLoadB<S>(sm, maps, ring.stage, t, ks, cta_rank);
}

// Before the grid ahead has finished (kBBeforeWait: B is a weight no kernel of the model
// writes), B's tiles for the first steps of this CTA's first unit, into the ring's first
// slots (fresh: nothing to wait for), each slot then expecting A too. Returns how many steps:
// the producer loads only their A after its wait. The weight's bytes, most of a product of
// few rows, then cross while the kernel ahead still runs.
template <class S>
__device__ __forceinline__ int GemmLoadBAhead(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int cta_rank) {
  static_assert(S::kClusterM == 1, "a cluster's CTAs load B for each other");
  GemmWorkList<S> works(blockIdx.x, gridDim.x, maps);
  GemmWork w;
  if (!works.Next(w)) return 0;
  const TileCoordinates t = GemmTileAt<S>(w.tile, cta_rank, maps);
  const int ahead = min(S::kStages, w.end - w.begin);
  for (int i = 0; i < ahead; ++i) {
    sm.full[i].ArriveExpectingBytes(S::kStageBytes);
    GemmLoadB<S>(sm, maps, i, t, w.begin + i, cta_rank);
  }
  return ahead;
}

// The consumers run the held tile's epilogue chunk c beside the next tile's main-loop step
// c: the chunk's residual goes into its slot just before that step's operands.
template <class S, class ALoader>
__device__ __forceinline__ void GemmProducerWithResidualRing(const GemmSharedMemory<S>& sm, const GemmMaps& maps,
                                                             Pipeline<S::kStages>& ring, int cta_rank, int ahead) {
  const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
  Pipeline<S::kResidualSlots> residual;
  // Chunk `chunk` of tile h's residual into the next slot, once the consumers have read it.
  auto load_residual = [&](const TileCoordinates& h, int chunk) {
    sm.residual_empty[residual.stage].Wait(residual.phase ^ 1);
    sm.residual_full[residual.stage].ArriveExpectingBytes(S::kResidualSlotBytes);
    TmaLoad3d(sm.residual_ring + residual.stage * S::kResidualSlotBytes, *maps.residual, h.n * S::kBN + chunk * S::kChunkCols,
              h.m * S::kBM, h.batch, sm.residual_full[residual.stage]);
    residual.Advance();
  };
  TileCoordinates held = {};
  bool holding = false;  // the consumers hold a tile whose epilogue runs during this one's main loop
  GemmWork w;
  for (GemmWorkList<S> works(cluster_id, clusters, maps); works.Next(w); ahead = 0) {
    const TileCoordinates t = GemmTileAt<S>(w.tile, cta_rank, maps);
    for (int ks = w.begin, chunk = 0; ks < w.end || (holding && chunk < S::kChunks); ++chunk) {
      if (holding && chunk < S::kChunks) load_residual(held, chunk);
      if (ks >= w.end) continue;
      GemmProducerStep<S, ALoader>(sm, maps, ring, t, ks, cta_rank, ks - w.begin < ahead);
      ++ks;
      ring.Advance();
    }
    held = t;
    holding = true;
  }
  // The last tile's epilogue runs in a pass of its own.
  if (holding)
    for (int chunk = 0; chunk < S::kChunks; ++chunk) load_residual(held, chunk);
}

// 3xTF32: the small parts (Tf32::Small) of kUnits 16-byte units of f32 values, at the same
// offsets of `small`; the big parts are the values themselves, as the tensor cores read them.
// The splitter's threads take consecutive units (no bank conflicts), four loads in flight
// before their stores: one warp an SM sub-partition has nothing else to hide its latency
// behind (a unit at a time, loads waiting for the stores before them, the split took 2.0 ms
// of a 4096^3 product's 2.5; H200, 2026-12-01). The 128-byte swizzle moves whole 16-byte
// units, and the small buffers start at 1024-byte boundaries as the slots do, so a part lands
// where the slot has its value and the slot's descriptors address both.
template <int kThreads, int kUnits>
__device__ __forceinline__ void GemmSmallParts(const float* slot, float* small, int thread) {
  constexpr int kRounds = (kUnits + kThreads - 1) / kThreads, kBatch = 4;
  const float4* value4 = reinterpret_cast<const float4*>(slot);
  float4* small4 = reinterpret_cast<float4*>(small);
#pragma unroll
  for (int first = 0; first < kRounds; first += kBatch) {
    float4 x[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = (first + j) * kThreads + thread;
      if (first + j < kRounds && i < kUnits) x[j] = value4[i];
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = (first + j) * kThreads + thread;
      if (first + j < kRounds && i < kUnits)
        small4[i] = make_float4(Tf32::Small(x[j].x), Tf32::Small(x[j].y), Tf32::Small(x[j].z), Tf32::Small(x[j].w));
    }
  }
}

// 3xTF32 with B MN-major: a slot's B, kBN / 32 boxes of [32 rows of K][32 columns of N] (one
// 128-byte swizzle row a row), written K-major as [kBN rows of N][32 of K] twice, its big parts
// (the values: the tensor cores cut them) and its small ones. A thread moves 4 x 4 blocks: four
// 16-byte units of one box row each (four columns of N) in, transposed in registers, four units
// of one K-major row each out. Within 8 consecutive threads (one shared-memory wavefront of
// 16-byte accesses) the blocks differ in the low bit of their K block and the low two bits of
// their N block: the reads fall in 8 distinct bank groups of the swizzle, the writes in 4.
template <class S>
__device__ __forceinline__ void GemmSplitTransposedB(const float* slot, float* big, float* small, int thread) {
  static_assert(S::kBK == 32, "f32 B: 32 of K a step");
  constexpr int kBlocks = (S::kBK / 4) * (S::kBN / 4);  // 8 K blocks x kBN / 4 N blocks
  // Byte offset of 16-byte unit `unit` of row `row` in a 128-byte-swizzled [rows][128 bytes]
  // region starting at a 1024-byte boundary.
  auto at = [](int row, int unit) { return row * 128 + ((unit ^ (row & 7)) << 4); };
  const unsigned char* in = reinterpret_cast<const unsigned char*>(slot);
  unsigned char* out_big = reinterpret_cast<unsigned char*>(big);
  unsigned char* out_small = reinterpret_cast<unsigned char*>(small);
#pragma unroll 1
  for (int block = thread; block < kBlocks; block += S::kSplitterThreads) {
    // block = (high N bits, K block's high bits, K block's low bit, N block's low two bits)
    const int n_low = block & 3, k_low = (block >> 2) & 1, rest = block >> 3;
    const int kb = (rest & 3) * 2 + k_low, nb = (rest >> 2) * 4 + n_low;  // K block 0..7, N block 0..kBN/4-1
    const int box = nb / 8, unit = nb % 8;
    float v[4][4];  // v[i][j]: K = 4 kb + i, N = 4 nb + j
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = *reinterpret_cast<const float4*>(in + box * S::kBK * 128 + at(kb * 4 + i, unit));
      v[i][0] = x.x, v[i][1] = x.y, v[i][2] = x.z, v[i][3] = x.w;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int offset = at(nb * 4 + j, kb);
      *reinterpret_cast<float4*>(out_big + offset) = make_float4(v[0][j], v[1][j], v[2][j], v[3][j]);
      *reinterpret_cast<float4*>(out_small + offset) =
          make_float4(Tf32::Small(v[0][j]), Tf32::Small(v[1][j]), Tf32::Small(v[2][j]), Tf32::Small(v[3][j]));
    }
  }
}

// 3xTF32: the producer warpgroup's warps 1 to 3 follow the ring as the consumers do and
// write the small parts of each slot's B once its copies have landed, then mark it split
// (each consumer splits its own rows of A in registers: GemmLoadA). Off the consumers' path: written by
// them between their steps (two named barriers a step, the small parts in two buffers),
// 128x128 f32 tiles ran at 56-73 TF/s; by these warps alone, A's parts too, at 71 (H200,
// 2026-12-01). A slot's small parts are reused when the slot is, after the consumers have
// handed it back.
template <class S>
__device__ __forceinline__ void GemmSplitter(const GemmSharedMemory<S>& sm, const GemmMaps& maps) {
  const int thread = threadIdx.x - 32;
  const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
  Pipeline<S::kStages> ring;
  GemmWork w;
  for (GemmWorkList<S> works(cluster_id, clusters, maps); works.Next(w);) {
    for (int ks = w.begin; ks < w.end; ++ks, ring.Advance()) {
      sm.full[ring.stage].Wait(ring.phase);
      const int offset = ring.stage * S::kBN * S::kBK;
      if constexpr (S::kSplitTransposesB) GemmSplitTransposedB<S>(sm.tile_b + offset, sm.big_b + offset, sm.small_b + offset, thread);
      else GemmSmallParts<S::kSplitterThreads, S::kBN * S::kBK / 4>(sm.tile_b + offset, sm.small_b + offset, thread);
      FenceSharedForAsync();  // for the tensor cores' (async) proxy
      sm.split_full[ring.stage].Arrive();
    }
  }
}

// Block scales (kScaleBlocks): the producer warpgroup's warp 1 follows the ring as the
// producer does and copies each K step's scales into its slot, the tile's rows of A and
// columns of B of the step's block (rows and columns past the product: the last one's), four-
// byte copies whose completion each lane's arrival on the slot's full barrier tracks. Read
// from L2 by the consumers themselves, even a step ahead, the loads' latency stood between a
// step's wgmma and the next (8192^3 at 425-556 TF/s against 1125 with the scales' loads left
// out; H200, 2026-12-04); the A scales' layout ([rows][blocks]) has no rows-contiguous box for
// TMA.
template <class S>
__device__ __forceinline__ void GemmScaleLoader(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int cta_rank) {
  const int lane = threadIdx.x % 32;
  const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
  tf_await_prior_grid();  // the scales may come from the grid ahead
  Pipeline<S::kStages> ring;
  GemmWork w;
  for (GemmWorkList<S> works(cluster_id, clusters, maps); works.Next(w);) {
    const TileCoordinates t = GemmTileAt<S>(w.tile, cta_rank, maps);
    for (int ks = w.begin; ks < w.end; ++ks, ring.Advance()) {
      const int block = ks / S::kStepsPerScaleBlock;
      float* slot = sm.block_scales + ring.stage * (S::kBM + S::kBN);
      sm.empty[ring.stage].Wait(ring.phase ^ 1);
#pragma unroll
      for (int r = lane; r < S::kBM; r += 32)
        CopyAsync4(slot + r, maps.block_scale_a + (long long)min(t.m * S::kBM + r, GemmRows<S>(maps) - 1) * S::kScaleBlocks + block);
      if constexpr (S::kBScaleColumns > 0) {  // shared: the scales of the runs the tile starts in and reaches
        const int first = t.n * S::kOutBN, second = (first / S::kBScaleColumns + 1) * S::kBScaleColumns;
        if (lane < S::kBScaleRuns)
          CopyAsync4(slot + S::kBM + lane, maps.block_scale_b + (long long)block * S::kN + min(lane == 0 ? first : second, S::kN - 1));
      } else {
#pragma unroll
        for (int n = lane; n < S::kBN; n += 32)
          CopyAsync4(slot + S::kBM + n, maps.block_scale_b + (long long)block * S::kN + min(t.n * S::kOutBN + n, S::kN - 1));
      }
      sm.full[ring.stage].ArriveOnCopiesAsync();
    }
  }
}

template <class S, class ALoader>
__device__ __forceinline__ void GemmProducer(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int cta_rank) {
  Warpgroup::ShrinkRegisters<S::kProducerRegisters>();
  if constexpr (S::kSplitTf32)
    if (threadIdx.x >= 32) {
      GemmSplitter<S>(sm, maps);
      return;
    }
  if constexpr (S::kScaleBlocks > 0)
    if (threadIdx.x / 32 == 1) {
      GemmScaleLoader<S>(sm, maps, cta_rank);
      return;
    }
  if (threadIdx.x != 0) return;
  Pipeline<S::kStages> ring;
  int ahead = 0;
  if constexpr (S::kBBeforeWait) ahead = GemmLoadBAhead<S>(sm, maps, cta_rank);
  tf_await_prior_grid();  // A, the residual and the epilogue's values may come from the grid ahead
  if constexpr (S::kRingedLoad) {
    GemmProducerWithResidualRing<S, ALoader>(sm, maps, ring, cta_rank, ahead);
  } else {
    const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
    GemmWork w;
    for (GemmWorkList<S> works(cluster_id, clusters, maps); works.Next(w); ahead = 0) {  // B loaded ahead for the first only
      const TileCoordinates t = GemmTileAt<S>(w.tile, cta_rank, maps);
      for (int ks = w.begin; ks < w.end; ++ks, ring.Advance())
        GemmProducerStep<S, ALoader>(sm, maps, ring, t, ks, cta_rank, ks - w.begin < ahead);
    }
  }
  // The other CTAs' consumers hand this CTA's slots back, and its copies land in theirs:
  // it stays until every slot it filled is handed back by every consumer of the cluster.
  if (S::kClusterM > 1)
    for (int s = 0; s < S::kStages; ++s, ring.Advance()) sm.empty[ring.stage].Wait(ring.phase ^ 1);
}

}  // namespace tf

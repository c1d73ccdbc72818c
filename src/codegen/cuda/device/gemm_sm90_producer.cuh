// gemm_sm90's producer warpgroup: one thread keeps the ring of A and B tiles full (and, for
// an overlapped epilogue with a ringed residual, the residual's ring). Included by
// gemm_sm90.cuh.
#pragma once

namespace tf {

// K step ks's B tile into ring slot `stage`.
template <class S>
__device__ __forceinline__ void GemmLoadB(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int stage, const TileCoordinates& t, int ks,
                                          int cta_rank) {
  // B in boxes of 64 columns × kBK rows of K (MN-major), or of 64 rows of N × kBK columns of K
  // (K-major): the box's map coordinates are (n, k) or (k, n).
  auto box_c0 = [&](int box) { return S::kBKMajor ? ks * S::kBK : t.n * S::kBN + box * 64; };
  auto box_c1 = [&](int box) { return S::kBKMajor ? t.n * S::kBN + box * 64 : ks * S::kBK; };
  if (S::kClusterM > 1) {  // this CTA's share of B's boxes, to every CTA of the cluster
    constexpr int kShare = S::kBN / 64 / S::kClusterM;
#pragma unroll
    for (int box = cta_rank * kShare; box < (cta_rank + 1) * kShare; ++box)
      TmaLoad3dMulticast(sm.tile_b + stage * S::kBN * S::kBK + box * S::kBK * 64, *maps.b, box_c0(box), box_c1(box), t.batch,
                         sm.full[stage], (unsigned short)((1 << S::kClusterM) - 1));
  } else {
#pragma unroll
    for (int box = 0; box < S::kBN / 64; ++box)
      TmaLoad3d(sm.tile_b + stage * S::kBN * S::kBK + box * S::kBK * 64, *maps.b, box_c0(box), box_c1(box), t.batch, sm.full[stage]);
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
  const int unit = blockIdx.x;
  if (unit >= S::kUnits) return 0;
  const TileCoordinates t = GemmTileAt<S>(unit / S::kSplits, cta_rank);
  const int k_begin = unit % S::kSplits * S::kSplitSteps, k_end = min(S::kKSteps, k_begin + S::kSplitSteps);
  const int ahead = min(S::kStages, k_end - k_begin);
  for (int i = 0; i < ahead; ++i) {
    sm.full[i].ArriveExpectingBytes(S::kStageBytes);
    GemmLoadB<S>(sm, maps, i, t, k_begin + i, cta_rank);
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
  for (int unit = cluster_id; unit < S::kUnits; unit += clusters) {
    const TileCoordinates t = GemmTileAt<S>(unit / S::kSplits, cta_rank);
    const int k_begin = unit % S::kSplits * S::kSplitSteps, k_end = min(S::kKSteps, k_begin + S::kSplitSteps);
    for (int ks = k_begin, chunk = 0; ks < k_end || (holding && chunk < S::kChunks); ++chunk) {
      if (holding && chunk < S::kChunks) load_residual(held, chunk);
      if (ks >= k_end) continue;
      GemmProducerStep<S, ALoader>(sm, maps, ring, t, ks, cta_rank, unit == cluster_id && ks - k_begin < ahead);
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

template <class S, class ALoader>
__device__ __forceinline__ void GemmProducer(const GemmSharedMemory<S>& sm, const GemmMaps& maps, int cta_rank) {
  Warpgroup::ShrinkRegisters<S::kProducerRegisters>();
  if (threadIdx.x != 0) return;
  Pipeline<S::kStages> ring;
  int ahead = 0;
  if constexpr (S::kBBeforeWait) ahead = GemmLoadBAhead<S>(sm, maps, cta_rank);
  tf_await_prior_grid();  // A, the residual and the epilogue's values may come from the grid ahead
  if constexpr (S::kRingedLoad) {
    GemmProducerWithResidualRing<S, ALoader>(sm, maps, ring, cta_rank, ahead);
  } else {
    const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
    for (int unit = cluster_id; unit < S::kUnits; unit += clusters) {
      const TileCoordinates t = GemmTileAt<S>(unit / S::kSplits, cta_rank);
      const int k_begin = unit % S::kSplits * S::kSplitSteps, k_end = min(S::kKSteps, k_begin + S::kSplitSteps);
      for (int ks = k_begin; ks < k_end; ++ks, ring.Advance())
        GemmProducerStep<S, ALoader>(sm, maps, ring, t, ks, cta_rank, unit == cluster_id && ks - k_begin < ahead);
    }
  }
  // The other CTAs' consumers hand this CTA's slots back, and its copies land in theirs:
  // it stays until every slot it filled is handed back by every consumer of the cluster.
  if (S::kClusterM > 1)
    for (int s = 0; s < S::kStages; ++s, ring.Advance()) sm.empty[ring.stage].Wait(ring.phase ^ 1);
}

}  // namespace tf

// attention_fwd_sm90's producer warpgroup: one thread loads each query block's Q tile, then
// keeps the K/V ring full. Included by attention_fwd_sm90.cuh.
#pragma once

namespace tf {

// One stage of a B operand ([R][N]: Kᵀ with R = kD, V with R = kBN) by TMA, in boxes of one
// swizzle row: K-major [R/64][N][64] or MN-major [N/64][R][64]. (r0, n0): the stage's first
// element; `batch`: the map's batch coordinates.
template <class S, int R, int N, bool MnMajor>
__device__ __forceinline__ void AttentionLoadStage(typename S::Element::Storage* tile, const TensorMap& map, int r0, int n0,
                                                   const int (&batch)[3], Barrier& full) {
  constexpr int kBox = S::kSwizzleElements;
  if constexpr (!MnMajor) {
#pragma unroll
    for (int box = 0; box < R / kBox; ++box)
      TmaLoad5d(tile + box * N * kBox, map, r0 + box * kBox, n0, batch[0], batch[1], batch[2], full);
  } else {
#pragma unroll
    for (int box = 0; box < N / kBox; ++box)
      TmaLoad5d(tile + box * R * kBox, map, n0 + box * kBox, r0, batch[0], batch[1], batch[2], full);
  }
}

template <class S>
__device__ __forceinline__ void AttentionProducer(const AttentionSharedMemory<S>& sm, const AttentionMaps& maps,
                                                  const AttentionSchedule<S>& schedule, const AttentionBatch& coordinates) {
  if (threadIdx.x != 0) return;
  Pipeline<S::kStages> ring;  // one ring over every tile's key blocks
  int m_block, kb_first, kb_last;
  for (int t = 0; t < S::kTiles && schedule.Tile(t, m_block, kb_first, kb_last); ++t) {
    const int q_slot = t % S::kQSlots;
    if (t >= S::kQSlots) sm.q_empty[q_slot].Wait((t / S::kQSlots - 1) & 1);
    sm.q_full[q_slot].ArriveExpectingBytes(S::kQBytes);
#pragma unroll
    for (int box = 0; box < S::kD / S::kSwizzleElements; ++box)
      TmaLoad5d(sm.tile_q + q_slot * S::kBM * S::kD + box * S::kBM * S::kSwizzleElements, *maps.q, box * S::kSwizzleElements,
                m_block * S::kBM, coordinates.q[0], coordinates.q[1], coordinates.q[2], sm.q_full[q_slot]);
    for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {
      const int key0 = kb * S::kBN;
      sm.k_empty[ring.stage].Wait(ring.phase ^ 1);
      sm.k_full[ring.stage].ArriveExpectingBytes(S::kKBytes);
      AttentionLoadStage<S, S::kD, S::kBN, S::kKMnMajor>(sm.tile_k + ring.stage * S::kD * S::kBN, *maps.k, 0, key0, coordinates.k,
                                                          sm.k_full[ring.stage]);
      sm.v_empty[ring.stage].Wait(ring.phase ^ 1);
      sm.v_full[ring.stage].ArriveExpectingBytes(S::kVBytes);
      AttentionLoadStage<S, S::kBN, S::kDV, S::kVMnMajor>(sm.tile_v + ring.stage * S::kBN * S::kDV, *maps.v, key0, 0, coordinates.v,
                                                           sm.v_full[ring.stage]);
    }
  }
}

}  // namespace tf

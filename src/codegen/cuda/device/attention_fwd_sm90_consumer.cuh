// attention_fwd_sm90's consumer warpgroups: S = Q·Kᵀ, the logits and the online softmax,
// O += P·V, and O's store, for 64 query rows each. Included by attention_fwd_sm90.cuh.
#pragma once

namespace tf {

template <class S, class Logits, class InteriorLogits>
struct AttentionConsumer {
  using Index = typename S::Index;
  using Element = typename S::Element;
  using Mma = typename S::Mma;
  using Storage = typename Element::Storage;

  const AttentionSharedMemory<S>& sm;
  const AttentionSchedule<S>& schedule;
  const Logits& logits;
  const InteriorLogits& interior_logits;
  const int consumer, local, warp, lane;
  const Index score_batch;  // the first logits row of the CTA's batch entry
  // The registers (AttentionConsume declares them). Accumulator o[j * 4 + h * 2 + e] (and
  // s[...]) holds row warp * 16 + lane / 4 + 8h of this consumer's 64, column 8j + (lane % 4)
  // * 2 + e: the wgmma D fragment layout.
  float (&o)[S::kDV / 2];
  float (&s)[S::kBN / 2];
  unsigned (&p)[S::kBN / 16][4];  // P as A fragments (bf16/f16 pairs)
  OnlineSoftmax<AccumulatorRows<S::kBN>>& softmax;
  int m_block, kb_first, kb_last, row0;  // the tile's
  int inner_first, inner_last;           // the tile's interior key blocks (kSameInterior, kInteriorTables)
  const Storage* q;                      // this consumer's rows of the tile's Q
  Pipeline<S::kStages> ring;             // one ring over every tile's key blocks, as the producer's

  __device__ __forceinline__ AttentionConsumer(const AttentionSharedMemory<S>& shared, const AttentionSchedule<S>& sched,
                                               const Logits& masked, const InteriorLogits& unmasked, int index, Index logits_entry,
                                               float (&o_registers)[S::kDV / 2], float (&s_registers)[S::kBN / 2],
                                               unsigned (&p_registers)[S::kBN / 16][4], OnlineSoftmax<AccumulatorRows<S::kBN>>& rows)
      : sm(shared), schedule(sched), logits(masked), interior_logits(unmasked), consumer(index), local(threadIdx.x % 128),
        warp(local / 32), lane(local % 32), score_batch(logits_entry * S::kNQ), o(o_registers), s(s_registers), p(p_registers),
        softmax(rows) {}

  // The wgmma descriptor of k step `kk` of a B operand's stage ([R][N], as the producer
  // stored it).
  template <int R, int N, bool MnMajor>
  static __device__ __forceinline__ unsigned long long OperandDescriptor(const Storage* tile, int kk) {
    constexpr int kBox = S::kSwizzleElements, kStepsPerRow = kBox / Mma::kK;
    if constexpr (MnMajor) return SharedMatrix::MnMajor(tile + kk * Mma::kK * kBox, R * 128);
    else return SharedMatrix::KMajor(tile + (kk / kStepsPerRow) * N * kBox + (kk % kStepsPerRow) * Mma::kK);
  }

  // S = Q·Kᵀ of the K tile in `stage`, issued (not waited for).
  __device__ __forceinline__ void IssueQk(int stage) {
    const Storage* k = sm.tile_k + stage * S::kBN * S::kD;
    constexpr int kBox = S::kSwizzleElements, kStepsPerRow = kBox / Mma::kK;
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kD / Mma::kK; ++kk)
      Mma::template Shared<S::kBN, S::kKMnMajor>(
          s, SharedMatrix::KMajor(q + (kk / kStepsPerRow) * S::kBM * kBox + (kk % kStepsPerRow) * Mma::kK),
          OperandDescriptor<S::kD, S::kBN, S::kKMnMajor>(k, kk), kk > 0);
    Warpgroup::Commit();
  }
  // O += P·V of the V tile in `stage`, issued.
  __device__ __forceinline__ void IssuePv(int stage) {
    const Storage* v = sm.tile_v + stage * S::kBN * S::kDV;
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kBN / Mma::kK; ++kk)
      Mma::template Registers<S::kDV, S::kVMnMajor>(o, p[kk], OperandDescriptor<S::kBN, S::kDV, S::kVMnMajor>(v, kk), 1);
    Warpgroup::Commit();
  }

  // The logits of the key block from key0 (its base-2 logits then s * Multiplier()) and the
  // online softmax over them. A logit that is the score times c leaves s as it is (c goes
  // into the multiplier); `Edge` blocks also mask keys past the end.
  template <bool Edge, class Hook>
  __device__ __forceinline__ void LogitsAndSoftmax(const Hook& hook, int key0) {
    constexpr bool kRagged = Edge && S::kNK % S::kBN != 0;
    if constexpr (kRagged || !Hook::kScoreTimesMultiplier) {
#pragma unroll
      for (int j = 0; j < S::kBN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + 8 * j + (lane % 4) * 2 + e;
            if constexpr (kRagged) {
              if (key >= S::kNK) {  // past the last key (TMA read zeros): masked
                s[j * 4 + h * 2 + e] = -INFINITY;
                continue;
              }
            }
            if constexpr (!Hook::kScoreTimesMultiplier) {
              // Rows past the end compute (and never store) the last row's logits: no load strays.
              const Index row = score_batch + min(row0 + 8 * h, S::kNQ - 1);
              s[j * 4 + h * 2 + e] = hook(row, key, s[j * 4 + h * 2 + e]) * 1.4426950408889634f;
            }
          }
    }
    softmax.template Update<S::kPolyExpEvery>(s, Hook::Multiplier(), S::LazyMargin());
  }
  // Key block kb's logits (without the mask where it is interior) and softmax.
  __device__ __forceinline__ void Softmax(int kb) {
    if constexpr (S::kInterior == kAllInterior) LogitsAndSoftmax<false>(interior_logits, kb * S::kBN);
    else if constexpr (S::kInterior == kNoInterior) LogitsAndSoftmax<true>(logits, kb * S::kBN);
    else if (kb >= inner_first && kb <= inner_last) LogitsAndSoftmax<false>(interior_logits, kb * S::kBN);
    else LogitsAndSoftmax<true>(logits, kb * S::kBN);
  }

  // O rescaled, and P (exp S) converted to A fragments: keys 16c .. 16c + 15 are the
  // accumulator columns of blocks 2c and 2c + 1.
  __device__ __forceinline__ void RescaleAndPack() {
    softmax.template Rescale<AccumulatorRows<S::kDV>>(o);
#pragma unroll
    for (int c = 0; c < S::kBN / 16; ++c) {
      p[c][0] = Element::Pack2(s[8 * c], s[8 * c + 1]);
      p[c][1] = Element::Pack2(s[8 * c + 2], s[8 * c + 3]);
      p[c][2] = Element::Pack2(s[8 * c + 4], s[8 * c + 5]);
      p[c][3] = Element::Pack2(s[8 * c + 6], s[8 * c + 7]);
    }
  }

  // O / row sum, written as column pairs; rows past the end are not written.
  __device__ __forceinline__ void Store(Storage* __restrict__ out) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float inverse = S::OutputScale() / softmax.Total(h);
      const int row = row0 + 8 * h;
      if (row >= S::kNQ) continue;
      unsigned* pairs = (unsigned*)(out + ((Index)schedule.batch * S::kNQ + row) * S::kDV + (lane % 4) * 2);
#pragma unroll
      for (int j = 0; j < S::kDV / 8; ++j) pairs[4 * j] = Element::Pack2(o[j * 4 + h * 2] * inverse, o[j * 4 + h * 2 + 1] * inverse);
    }
  }

  // The tile's key blocks, S, softmax and P·V one after another.
  __device__ __forceinline__ void SerialLoop(int q_slot) {
    for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {
      sm.k_full[ring.stage].Wait(ring.phase);
      IssueQk(ring.stage);
      Warpgroup::Wait<0>();
      if (local == 0) sm.k_empty[ring.stage].Arrive();
      Softmax(kb);
      RescaleAndPack();
      sm.v_full[ring.stage].Wait(ring.phase);
      IssuePv(ring.stage);
      Warpgroup::Wait<0>();
      if (local == 0) sm.v_empty[ring.stage].Arrive();
    }
    if (local == 0) sm.q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there
  }

  // FlashAttention-3's intra-warpgroup pipelining: while P·V of block j runs on the tensor
  // cores, S of block j + 1 is already computed and its softmax runs beside it. With
  // kPingPong, also its inter-warpgroup schedule: the consumers take turns issuing their
  // matmuls (named barrier 1 + c is consumer c's turn), so one's softmax runs while the
  // other's matmuls have the tensor cores. Consumer 0 goes first (Run); consumer 1 passes
  // the turn back after every issue but the CTA's last (the arrivals then match the waits).
  // The turns run on across a CTA's query blocks: consumer 0 issues the next block's first S
  // while consumer 1 finishes this one (measured on an H200, 2026-11-27, causal d64 B4 H16
  // N4096: with the turns restarting at every query block, ping-pong took 349 us and the
  // overlap without turns 336).
  __device__ __forceinline__ void OverlappedLoop(int q_slot, bool last_tile) {
    sm.k_full[ring.stage].Wait(ring.phase);
    if (S::kPingPong) NamedBarrierSync(1 + consumer, 256);
    IssueQk(ring.stage);
    if (S::kPingPong && (consumer == 0 || !(last_tile && kb_first == kb_last))) NamedBarrierArrive(2 - consumer, 256);
    Warpgroup::Wait<0>();
    if (local == 0) sm.k_empty[ring.stage].Arrive();
    Softmax(kb_first);
    RescaleAndPack();
    Pipeline<S::kStages> pending = ring;  // the V tile of the P held in p
    ring.Advance();
    for (int kb = kb_first + 1; kb <= kb_last; ++kb, ring.Advance()) {
      sm.k_full[ring.stage].Wait(ring.phase);
      if (S::kPingPong) NamedBarrierSync(1 + consumer, 256);
      IssueQk(ring.stage);
      sm.v_full[pending.stage].Wait(pending.phase);
      IssuePv(pending.stage);
      if (S::kPingPong && (consumer == 0 || !(last_tile && kb == kb_last))) NamedBarrierArrive(2 - consumer, 256);
      Warpgroup::Wait<1>();  // S is done (P·V may still run)
      if (local == 0) sm.k_empty[ring.stage].Arrive();
      Softmax(kb);
      Warpgroup::Wait<0>();  // P·V is done: O and p may change
      if (local == 0) sm.v_empty[pending.stage].Arrive();
      RescaleAndPack();
      pending = ring;
    }
    if (local == 0) sm.q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there
    sm.v_full[pending.stage].Wait(pending.phase);
    IssuePv(pending.stage);
    Warpgroup::Wait<0>();
    if (local == 0) sm.v_empty[pending.stage].Arrive();
  }

  __device__ __forceinline__ void Run(Storage* __restrict__ out) {
    if (S::kPingPong && consumer == 1) NamedBarrierArrive(1, 256);  // consumer 0 has the first turn
    for (int t = 0; t < S::kTiles && schedule.Tile(t, m_block, kb_first, kb_last); ++t) {
      row0 = m_block * S::kBM + consumer * 64 + warp * 16 + lane / 4;
      if constexpr (S::kInterior == kInteriorTables) {
        inner_first = schedule.tables.first_inner_block[m_block];
        inner_last = schedule.tables.last_inner_block[m_block];
      } else if constexpr (S::kInterior == kSameInterior) {
        inner_first = S::kInnerFirst;
        inner_last = S::kInnerLast;
      }
      int next_m_block, next_kb_first, next_kb_last;  // ping-pong: the CTA's last query block keeps the last turn
      const bool last_tile = S::kPingPong && !(t + 1 < S::kTiles && schedule.Tile(t + 1, next_m_block, next_kb_first, next_kb_last));
#pragma unroll
      for (int i = 0; i < S::kDV / 2; ++i) o[i] = 0.0f;
      softmax.Start();
      const int q_slot = t % S::kQSlots;
      q = sm.tile_q + q_slot * S::kBM * S::kD + consumer * 64 * S::kSwizzleElements;
      sm.q_full[q_slot].Wait(t / S::kQSlots & 1);
      if constexpr (S::kOverlap) OverlappedLoop(q_slot, last_tile);
      else SerialLoop(q_slot);
      Store(out);
    }
  }
};

// A consumer warpgroup's whole work. Its registers are objects of their own, not members of
// the AttentionConsumer: as members, a store into s (indexed by loop counters until the loops
// are unrolled) may alias the consumer's scalars, so row0 and the other scalars were reloaded
// and each score's row recomputed (a mask read from memory: 4097 instructions against 3505,
// tests/attention/attention_causal_d128_bf16, nvcc 13).
template <class S, class Logits, class InteriorLogits>
__device__ __forceinline__ void AttentionConsume(const AttentionSharedMemory<S>& sm, const AttentionSchedule<S>& schedule,
                                                 const Logits& logits, const InteriorLogits& interior_logits, int consumer,
                                                 typename S::Index logits_entry, typename S::Element::Storage* __restrict__ out) {
  float o[S::kDV / 2], s[S::kBN / 2];
  unsigned p[S::kBN / 16][4];
  OnlineSoftmax<AccumulatorRows<S::kBN>> softmax;
  AttentionConsumer<S, Logits, InteriorLogits>(sm, schedule, logits, interior_logits, consumer, logits_entry, o, s, p, softmax).Run(out);
}

}  // namespace tf

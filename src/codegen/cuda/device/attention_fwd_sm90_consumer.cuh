// attention_fwd_sm90's consumer warpgroups: S = Q·Kᵀ, the logits and the online softmax,
// O += P·V, and O's store, for 64 query rows each. Included by attention_fwd_sm90.cuh.
//
// One function whose steps are lambdas over its local variables, each variable an object of
// its own. Written as a class whose members held the same state (the registers, the softmax's
// rows, the tile's scalars), the machine code differed: a store into s (indexed by loop
// counters until the loops are unrolled) may alias the other members, so the compiler
// reloaded them and recomputed each score's row (4097 instructions against 3505 with a mask
// read from memory, tests/attention/attention_causal_d128_bf16), and where the row sums were
// rescaled lazily it scheduled the softmax differently (nvcc 13). As lambdas over locals the
// code is the same as the printed kernel's it replaced.
#pragma once

namespace tf {

// The wgmma descriptor of k step `kk` of a B operand's stage ([R][N], as the producer stored
// it: AttentionLoadStage).
template <class S, int R, int N, bool MnMajor>
__device__ __forceinline__ unsigned long long AttentionOperandDescriptor(const typename S::Element::Storage* tile, int kk) {
  using Mma = typename S::Mma;
  constexpr int kBox = S::kSwizzleElements, kStepsPerRow = kBox / Mma::kK;
  if constexpr (MnMajor) return SharedMatrix::MnMajor(tile + kk * Mma::kK * kBox, R * 128);
  else return SharedMatrix::KMajor(tile + (kk / kStepsPerRow) * N * kBox + (kk % kStepsPerRow) * Mma::kK);
}

// A compile-time flag as an argument (an edge key block or not), and a hook's type from its
// reference (NVRTC compiles without the standard headers).
template <bool Value>
struct Constant {
  static constexpr bool kValue = Value;
};
template <class T>
struct WithoutReference {
  using Type = T;
};
template <class T>
struct WithoutReference<T&> {
  using Type = T;
};

// The tile's key blocks, S, softmax and P·V one after another.
template <class S, class IssueQk, class IssuePv, class Softmax, class RescaleAndPack>
__device__ __forceinline__ void AttentionSerialLoop(const AttentionSharedMemory<S>& sm, Pipeline<S::kStages>& ring, int q_slot, int local,
                                                    int kb_first, int kb_last, const IssueQk& issue_qk, const IssuePv& issue_pv,
                                                    const Softmax& softmax, const RescaleAndPack& rescale_and_pack) {
  for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {
    sm.k_full[ring.stage].Wait(ring.phase);
    issue_qk(ring.stage);
    Warpgroup::Wait<0>();
    if (local == 0) sm.k_empty[ring.stage].Arrive();
    softmax(kb);
    rescale_and_pack();
    sm.v_full[ring.stage].Wait(ring.phase);
    issue_pv(ring.stage);
    Warpgroup::Wait<0>();
    if (local == 0) sm.v_empty[ring.stage].Arrive();
  }
  if (local == 0) sm.q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there
}

// FlashAttention-3's intra-warpgroup pipelining: while P·V of block j runs on the tensor
// cores, S of block j + 1 is already computed and its softmax runs beside it. With
// kPingPong, also its inter-warpgroup schedule: the consumers take turns issuing their
// matmuls (named barrier 1 + c is consumer c's turn), so one's softmax runs while the
// other's matmuls have the tensor cores. Consumer 0 goes first (AttentionConsume); consumer
// 1 passes the turn back after every issue but the CTA's last (the arrivals then match the
// waits). The turns run on across a CTA's query blocks: consumer 0 issues the next block's
// first S while consumer 1 finishes this one (measured on an H200, 2026-11-27, causal d64 B4
// H16 N4096: with the turns restarting at every query block, ping-pong took 349 us and the
// overlap without turns 336).
template <class S, class IssueQk, class IssuePv, class Softmax, class RescaleAndPack>
__device__ __forceinline__ void AttentionOverlappedLoop(const AttentionSharedMemory<S>& sm, Pipeline<S::kStages>& ring, int q_slot,
                                                        int consumer, int local, int kb_first, int kb_last, bool last_tile,
                                                        const IssueQk& issue_qk, const IssuePv& issue_pv, const Softmax& softmax,
                                                        const RescaleAndPack& rescale_and_pack) {
  sm.k_full[ring.stage].Wait(ring.phase);
  if (S::kPingPong) NamedBarrierSync(1 + consumer, 256);
  issue_qk(ring.stage);
  if (S::kPingPong && (consumer == 0 || !(last_tile && kb_first == kb_last))) NamedBarrierArrive(2 - consumer, 256);
  Warpgroup::Wait<0>();
  if (local == 0) sm.k_empty[ring.stage].Arrive();
  softmax(kb_first);
  rescale_and_pack();
  Pipeline<S::kStages> pending = ring;  // the V tile of the P held in p
  ring.Advance();
  for (int kb = kb_first + 1; kb <= kb_last; ++kb, ring.Advance()) {
    sm.k_full[ring.stage].Wait(ring.phase);
    if (S::kPingPong) NamedBarrierSync(1 + consumer, 256);
    issue_qk(ring.stage);
    sm.v_full[pending.stage].Wait(pending.phase);
    issue_pv(pending.stage);
    if (S::kPingPong && (consumer == 0 || !(last_tile && kb == kb_last))) NamedBarrierArrive(2 - consumer, 256);
    Warpgroup::Wait<1>();  // S is done (P·V may still run)
    if (local == 0) sm.k_empty[ring.stage].Arrive();
    softmax(kb);
    Warpgroup::Wait<0>();  // P·V is done: O and p may change
    if (local == 0) sm.v_empty[pending.stage].Arrive();
    rescale_and_pack();
    pending = ring;
  }
  if (local == 0) sm.q_empty[q_slot].Arrive();  // the tile's last S is done: another tile's Q may load there
  sm.v_full[pending.stage].Wait(pending.phase);
  issue_pv(pending.stage);
  Warpgroup::Wait<0>();
  if (local == 0) sm.v_empty[pending.stage].Arrive();
}

// A consumer warpgroup's whole work.
template <class S, class Logits, class InteriorLogits>
__device__ __forceinline__ void AttentionConsume(const AttentionSharedMemory<S>& sm, const AttentionSchedule<S>& schedule,
                                                 const Logits& logits, const InteriorLogits& interior_logits, const int consumer,
                                                 typename S::Index logits_entry, typename S::Element::Storage* __restrict__ out,
                                                 float* __restrict__ logsumexp) {
  using Index = typename S::Index;
  using Element = typename S::Element;
  using Mma = typename S::Mma;
  using Storage = typename Element::Storage;
  using Rows = AccumulatorRows<S::kBN>;
  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;
  // Accumulator o[j * 4 + h * 2 + e] (and s[...]) holds row warp * 16 + lane / 4 + 8h of this
  // consumer's 64, column 8j + (lane % 4) * 2 + e: the wgmma D fragment layout.
  float o[S::kDV / 2];
  float s[S::kBN / 2];
  unsigned p[S::kBN / 16][4];  // P as A fragments (bf16/f16 pairs)
  float row_max[Rows::kRows], row_sum[Rows::kRows], rescale[Rows::kRows];
  bool rescaled;
  OnlineSoftmax<Rows> softmax(row_max, row_sum, rescale, rescaled);
  int m_block, kb_first, kb_last, row0;  // the tile's
  int inner_first, inner_last;           // the tile's interior key blocks (kSameInterior, kInteriorTables)
  const int nq = schedule.lengths.nq, nk = schedule.lengths.nk;
  const Index score_batch = logits_entry * nq;  // the first logits row of the CTA's batch entry
  const Storage* q;                                 // this consumer's rows of the tile's Q
  // S = Q·Kᵀ of the K tile in `stage`, issued (not waited for).
  auto issue_qk = [&](int stage) {
    const Storage* k = sm.tile_k + stage * S::kBN * S::kD;
    constexpr int kBox = S::kSwizzleElements, kStepsPerRow = kBox / Mma::kK;
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kD / Mma::kK; ++kk)
      Mma::template Shared<S::kBN, S::kKMnMajor>(
          s, SharedMatrix::KMajor(q + (kk / kStepsPerRow) * S::kBM * kBox + (kk % kStepsPerRow) * Mma::kK),
          AttentionOperandDescriptor<S, S::kD, S::kBN, S::kKMnMajor>(k, kk), kk > 0);
    Warpgroup::Commit();
  };
  // O += P·V of the V tile in `stage`, issued.
  auto issue_pv = [&](int stage) {
    const Storage* v = sm.tile_v + stage * S::kBN * S::kDV;
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kBN / Mma::kK; ++kk)
      Mma::template Registers<S::kDV, S::kVMnMajor>(o, p[kk], AttentionOperandDescriptor<S, S::kBN, S::kDV, S::kVMnMajor>(v, kk), 1);
    Warpgroup::Commit();
  };
  // The logits of the key block from key0 (its base-2 logits then s * Multiplier()) and the
  // online softmax over them. A logit that is the score times c leaves s as it is (c goes
  // into the multiplier); `edge` blocks also mask keys past the end.
  auto logits_and_softmax = [&](auto edge, const auto& hook, int key0) {
    using Hook = typename WithoutReference<decltype(hook)>::Type;
    constexpr bool kRagged = decltype(edge)::kValue && !S::kWholeKeyBlocks;
    if constexpr (kRagged || !Hook::kScoreTimesMultiplier) {
#pragma unroll
      for (int j = 0; j < S::kBN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = key0 + 8 * j + (lane % 4) * 2 + e;
            if constexpr (!Hook::kScoreTimesMultiplier) {
              // Rows past the end compute (and never store) the last row's logits, keys past
              // the end the last key's (masked below): no load strays, and every element runs
              // the same program, whose row-only part the compiler then computes once a row
              // (a division by the launch's length, where it is one).
              const Index row = score_batch + min(row0 + 8 * h, nq - 1);
              const int clamped = kRagged ? min(key, nk - 1) : key;
              s[j * 4 + h * 2 + e] = hook(row, clamped, s[j * 4 + h * 2 + e]) * 1.4426950408889634f;
            }
            if constexpr (kRagged) {
              if (key >= nk) s[j * 4 + h * 2 + e] = -INFINITY;  // past the last key (TMA read zeros): masked
            }
          }
    }
    softmax.template Update<S>(s, Hook::Multiplier());
  };
  // Key block kb's logits (without the mask where it is interior) and softmax.
  auto softmax_block = [&](int kb) {
    if constexpr (S::kInterior == kAllInterior) logits_and_softmax(Constant<false>(), interior_logits, kb * S::kBN);
    else if constexpr (S::kInterior == kNoInterior) logits_and_softmax(Constant<true>(), logits, kb * S::kBN);
    else if (kb >= inner_first && kb <= inner_last) logits_and_softmax(Constant<false>(), interior_logits, kb * S::kBN);
    else logits_and_softmax(Constant<true>(), logits, kb * S::kBN);
  };
  // O rescaled, and P (exp S) converted to A fragments: keys 16c .. 16c + 15 are the
  // accumulator columns of blocks 2c and 2c + 1.
  auto rescale_and_pack = [&]() {
    softmax.template Rescale<AccumulatorRows<S::kDV>>(o);
#pragma unroll
    for (int c = 0; c < S::kBN / 16; ++c) {
      p[c][0] = Element::Pack2(s[8 * c], s[8 * c + 1]);
      p[c][1] = Element::Pack2(s[8 * c + 2], s[8 * c + 3]);
      p[c][2] = Element::Pack2(s[8 * c + 4], s[8 * c + 5]);
      p[c][3] = Element::Pack2(s[8 * c + 6], s[8 * c + 7]);
    }
  };
  Pipeline<S::kStages> ring;  // one ring over every tile's key blocks, as the producer's
  if (S::kPingPong && consumer == 1) NamedBarrierArrive(1, 256);  // consumer 0 has the first turn
  for (int t = 0; t < S::kTiles && schedule.Tile(t, m_block, kb_first, kb_last); ++t) {
    row0 = m_block * S::kBM + consumer * 64 + warp * 16 + lane / 4;
    if constexpr (S::kInterior == kInteriorTables) {
      inner_first = schedule.tables.first_inner_block[m_block];
      inner_last = schedule.tables.last_inner_block[m_block];
    } else if constexpr (S::kInterior == kSameInterior) {
      inner_first = schedule.lengths.inner_first;
      inner_last = schedule.lengths.inner_last;
    }
    int next_m_block, next_kb_first, next_kb_last;  // ping-pong: the CTA's last query block keeps the last turn
    const bool last_tile = S::kPingPong && !(t + 1 < S::kTiles && schedule.Tile(t + 1, next_m_block, next_kb_first, next_kb_last));
#pragma unroll
    for (int i = 0; i < S::kDV / 2; ++i) o[i] = 0.0f;
    softmax.Start();
    const int q_slot = t % S::kQSlots;
    q = sm.tile_q + q_slot * S::kBM * S::kD + consumer * 64 * S::kSwizzleElements;
    sm.q_full[q_slot].Wait(t / S::kQSlots & 1);
    if constexpr (S::kOverlap)
      AttentionOverlappedLoop<S>(sm, ring, q_slot, consumer, local, kb_first, kb_last, last_tile, issue_qk, issue_pv, softmax_block,
                                 rescale_and_pack);
    else
      AttentionSerialLoop<S>(sm, ring, q_slot, local, kb_first, kb_last, issue_qk, issue_pv, softmax_block, rescale_and_pack);
    // O / row sum, written as column pairs; rows past the end are not written. Under the safe
    // softmax's guard (kZeroNanRows), a row whose sum is not positive is zeros: its
    // probabilities are NaN in the graph (every key masked, or a NaN or +inf logit), and so
    // may its O be here.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float total = softmax.Total(h);
      const float inverse = S::OutputScale() / total;
      const bool zeroed = S::kZeroNanRows && !(total > 0.0f);
      const int row = row0 + 8 * h;
      if (row >= nq) continue;
      unsigned* pairs = (unsigned*)(out + ((Index)schedule.batch * nq + row) * S::kDV + (lane % 4) * 2);
#pragma unroll
      for (int j = 0; j < S::kDV / 8; ++j)
        pairs[4 * j] = zeroed ? 0u : Element::Pack2(o[j * 4 + h * 2] * inverse, o[j * 4 + h * 2 + 1] * inverse);
      // The row's logsumexp (natural log): the running max is a base-2 logit and the sum is
      // relative to it. A row whose logits are all -inf has no max: NaN, as the graph's
      // max + log(sum(exp(x - max))) gives.
      if (logsumexp && lane % 4 == 0)
        logsumexp[score_batch + row] = row_max[h] == -INFINITY ? NAN : (row_max[h] + log2f(total)) * 0.6931471805599453f;
    }
  }
}

}  // namespace tf

// The Hopper flash-attention backward: FlashAttention-2/3's algorithm in three kernels, with
// FlashAttention-3's Hopper layout of the main one (its hopper/ backward, read 2026-11-30).
//
//   AttentionBwdPrepare   per query block of a head: D = rowsum(dO ⊙ O) in f32 and the
//                         forward's logsumexp in base 2, both padded to whole query blocks
//                         (rows past the end: logsumexp +inf, so P = 0 there; D = 0); the
//                         block's dQ accumulator zeroed
//   AttentionBwdSm90      per key block of kBN = 128 keys of a key/value head (a CTA): K and V
//                         loaded once, then every query block (kBM = 64 queries) the mask
//                         leaves, of each query head that reads them (grouped-query attention):
//     warpgroup 0          one thread loads Q with its block's logsumexp, and dO with its D,
//                          by TMA into kStages-deep rings (the statistics by 1-D bulk copies
//                          on the same barriers)
//     warpgroups 1 and 2   each owns 64 of the keys (FlashAttention-3's SdP_swapAB):
//                          Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ by wgmma from shared memory; in f32
//                          registers Pᵀ = 2^(Sᵀ·scale·log2 e − lse₂) and dSᵀ = Pᵀ ⊙ (dPᵀ − D);
//                          dV += Pᵀ·dO and dK += dSᵀ·Q with A from registers (the accumulator
//                          fragments converted in place are the A fragments) and B read
//                          MN-major from the same K-major Q and dO tiles (no transposed
//                          copies); dSᵀ to shared memory; then dQᵀ = Kᵀ·dSᵀ over all 128 keys,
//                          both operands MN-major from shared memory (d = 128: a consumer per
//                          64 rows of d; d = 64: the consumers take turns), added to the
//                          query block's f32 accumulator in global memory by one bulk
//                          reduce-add (cp.reduce.async.bulk), in fragment order
//   AttentionBwdFinish    dQ = accumulator · scale, in the output's element type and layout
//
// dK · scale and dV are written by the consumers after their last query block. Causal
// (PyTorch's is_causal, top-left: key j is seen by query i when j <= i): a key block reads the
// query blocks from its diagonal on, P masked in the two that straddle it.
//
// The generated part is the Config (below) and the three __global__ functions calling these.
#pragma once

#include "tile_mma.cuh"
#include "tilefuse_tiles.cuh"

namespace tf {

// Config gives Element (bf16 or f16), kD (64 or 128, Q's, K's and V's head dim), kBM = 64,
// kBN = 128, kStages (the Q/dO rings), kNQ, kNK, kHeads (query heads of all batch entries),
// kGroup (query heads per key/value head: grouped-query attention; 1 without), kCausal,
// kHeadsTogether (AttentionBwdBlockAt),
// kProducerRegisters, kConsumerRegisters, and Scale() (the softmax scale the scores were
// multiplied by). Q, O, dO, dQ are dense [kHeads][kNQ][kD], K, V, dK, dV [kHeads / kGroup][kNK][kD]
// (query head h reads key/value head h / kGroup, as PyTorch's enable_gqa); the logsumexp
// [kHeads][kNQ] (natural log, of the scaled scores: what PyTorch's and tilefuse's forwards save).
// A CTA runs every query head of its key/value head, so dK and dV are summed over the group in
// its registers.
template <class Config>
struct AttentionBwdShape : Config {
  using Element = typename Config::Element;
  using Storage = typename Element::Storage;
  using Mma = tf::Mma<Element>;
  static_assert(Mma::kSixteenBit, "attention_bwd_sm90: bf16 or f16 operands");
  static_assert(Config::kD == 64 || Config::kD == 128, "attention_bwd_sm90: head dim 64 or 128");
  static_assert(Config::kBM == 64 && Config::kBN == 128, "attention_bwd_sm90: 64 queries by 128 keys (two consumers of 64 keys)");
  static_assert(Config::kGroup >= 1 && Config::kHeads % Config::kGroup == 0, "attention_bwd_sm90: whole groups of query heads");
  static constexpr int kKvHeads = Config::kHeads / Config::kGroup;
  static constexpr int kBox = 128 / Element::kBytes;  // one 128-byte swizzle row
  static constexpr int kDBoxes = Config::kD / kBox;
  static constexpr int kMBlocks = (Config::kNQ + Config::kBM - 1) / Config::kBM;
  static constexpr int kKeyBlocks = (Config::kNK + Config::kBN - 1) / Config::kBN;
  static constexpr int kQueryPad = kMBlocks * Config::kBM;  // the statistics' row length
  static constexpr unsigned kQBytes = Config::kBM * Config::kD * Element::kBytes;
  static constexpr unsigned kKBytes = Config::kBN * Config::kD * Element::kBytes;
  static constexpr unsigned kStatBytes = Config::kBM * 4;
  static constexpr int kAccumulatorFloats = Config::kBM * Config::kD;  // a query block's dQ accumulator
  static constexpr float kScaleLog2 = Config::Scale() * 1.4426950408889634f;
};

// Shared memory (the host counts its bytes alike), 1024-byte aligned tiles first.
template <class S>
struct AttentionBwdSharedMemory {
  using Storage = typename S::Storage;
  Storage* tile_k;   // [kD / 64][kBN][64], 128-byte swizzle
  Storage* tile_v;   // the same
  Storage* tile_q;   // [stage][kD / 64][kBM][64]
  Storage* tile_do;  // the same
  Storage* tile_ds;  // [2][kBN][64]: dSᵀ, keys by the block's 64 queries, alternate blocks
  float* dq;         // [consumer][kBM · 64]: a consumer's dQᵀ fragments on their way out
  float* lse;        // [stage][kBM]: logsumexp · log2 e
  float* delta;      // [stage][kBM]: D
  Barrier* kv_full;
  Barrier* q_full;
  Barrier* q_empty;
  Barrier* do_full;
  Barrier* do_empty;

  __device__ __forceinline__ AttentionBwdSharedMemory() {
    unsigned char* shared = AlignedDynamicShared();
    tile_k = (Storage*)shared;
    tile_v = tile_k + S::kBN * S::kD;
    tile_q = tile_v + S::kBN * S::kD;
    tile_do = tile_q + S::kStages * S::kBM * S::kD;
    tile_ds = tile_do + S::kStages * S::kBM * S::kD;
    dq = (float*)(tile_ds + 2 * S::kBN * S::kBox);
    lse = dq + 2 * S::kBM * 64;
    delta = lse + S::kStages * S::kBM;
    kv_full = (Barrier*)(delta + S::kStages * S::kBM);
    q_full = kv_full + 1;
    q_empty = q_full + S::kStages;
    do_full = q_empty + S::kStages;
    do_empty = do_full + S::kStages;
  }
};

// The first query block key block `kb` reads (causal: the one holding its first key's query).
template <class S>
__device__ __forceinline__ int AttentionBwdFirstQueryBlock(int kb) {
  return S::kCausal ? kb * S::kBN / S::kBM : 0;
}

template <class S>
__device__ __forceinline__ void AttentionBwdProducer(const AttentionBwdSharedMemory<S>& sm, const TensorMap& map_q,
                                                     const TensorMap& map_k, const TensorMap& map_v, const TensorMap& map_do,
                                                     const float* __restrict__ lse2, const float* __restrict__ delta,
                                                     int kv_head, int kb) {
  if (threadIdx.x != 0) return;
  sm.kv_full->ArriveExpectingBytes(2 * S::kKBytes);
#pragma unroll
  for (int box = 0; box < S::kDBoxes; ++box) {
    TmaLoad3d(sm.tile_k + box * S::kBN * S::kBox, map_k, box * S::kBox, kb * S::kBN, kv_head, *sm.kv_full);
    TmaLoad3d(sm.tile_v + box * S::kBN * S::kBox, map_v, box * S::kBox, kb * S::kBN, kv_head, *sm.kv_full);
  }
  Pipeline<S::kStages> ring;
  // A query block's rows of Q (or dO) into the ring's stage, with their statistic riding on
  // the same barrier.
  auto load_rows = [&](Barrier* empty, Barrier* full, typename S::Storage* tiles, const TensorMap& map, float* stat_tiles,
                       const float* stat, int head, int m) {
    const int stage = ring.stage;
    empty[stage].Wait(ring.phase ^ 1);
    full[stage].ArriveExpectingBytes(S::kQBytes + S::kStatBytes);
#pragma unroll
    for (int box = 0; box < S::kDBoxes; ++box)
      TmaLoad3d(tiles + stage * S::kBM * S::kD + box * S::kBM * S::kBox, map, box * S::kBox, m * S::kBM, head, full[stage]);
    BulkLoad(stat_tiles + stage * S::kBM, stat + (int64_t)head * S::kQueryPad + m * S::kBM, S::kStatBytes, full[stage]);
  };
  // Every (query head of the group, query block) in turn, as the consumers take them.
  for (int head = kv_head * S::kGroup; head < (kv_head + 1) * S::kGroup; ++head)
    for (int m = AttentionBwdFirstQueryBlock<S>(kb); m < S::kMBlocks; ++m, ring.Advance()) {
      load_rows(sm.q_empty, sm.q_full, sm.tile_q, map_q, sm.lse, lse2, head, m);
      load_rows(sm.do_empty, sm.do_full, sm.tile_do, map_do, sm.delta, delta, head, m);
    }
}

// A consumer warpgroup's whole work: its 64 keys' dK and dV, and its share of each query
// block's dQ. Accumulator x[j * 4 + h * 2 + e] holds row warp * 16 + lane / 4 + 8h of the
// product's 64, column 8j + (lane % 4) * 2 + e (the wgmma D fragment).
template <class S>
__device__ __forceinline__ void AttentionBwdConsume(const AttentionBwdSharedMemory<S>& sm, float* __restrict__ dq_accumulator,
                                                    typename S::Storage* __restrict__ dk_out,
                                                    typename S::Storage* __restrict__ dv_out, int kv_head, int kb, int consumer) {
  using Element = typename S::Element;
  using Mma = typename S::Mma;
  using Storage = typename S::Storage;
  constexpr int kBox = S::kBox, kStepsPerRow = kBox / Mma::kK;
  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;
  const int key_row0 = consumer * 64 + warp * 16 + lane / 4;  // this thread's first key in the block (+8: its second)
  float dv[S::kD / 2], dk[S::kD / 2];
#pragma unroll
  for (int i = 0; i < S::kD / 2; ++i) dv[i] = dk[i] = 0.0f;
  const Storage* k_rows = sm.tile_k + consumer * 64 * kBox;  // this consumer's keys, in each 64-column box
  const Storage* v_rows = sm.tile_v + consumer * 64 * kBox;
  sm.kv_full->Wait(0);
  Pipeline<S::kStages> ring;
  int turn = 0;  // the query blocks this CTA has done: which dSᵀ buffer, and (d = 64) whose dQ
  // Every (query head of the group, query block) in turn, as the producer loads them.
  for (int head = kv_head * S::kGroup; head < (kv_head + 1) * S::kGroup; ++head)
  for (int m = AttentionBwdFirstQueryBlock<S>(kb); m < S::kMBlocks; ++m, ++turn, ring.Advance()) {
    const int stage = ring.stage;
    const Storage* q = sm.tile_q + stage * S::kBM * S::kD;
    const Storage* dout = sm.tile_do + stage * S::kBM * S::kD;
    float s[S::kBM / 2], dp[S::kBM / 2];
    // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: M = this consumer's 64 keys, N = the block's 64 queries, both
    // operands K-major over d.
    auto issue_transposed_scores = [&](float (&acc)[S::kBM / 2], const Storage* key_rows, const Storage* query_tile) {
      Warpgroup::Fence();
#pragma unroll
      for (int kk = 0; kk < S::kD / Mma::kK; ++kk)
        Mma::template Shared<S::kBM, false>(
            acc, SharedMatrix::KMajor(key_rows + (kk / kStepsPerRow) * S::kBN * kBox + (kk % kStepsPerRow) * Mma::kK),
            SharedMatrix::KMajor(query_tile + (kk / kStepsPerRow) * S::kBM * kBox + (kk % kStepsPerRow) * Mma::kK), kk > 0);
      Warpgroup::Commit();
    };
    sm.q_full[stage].Wait(ring.phase);
    issue_transposed_scores(s, k_rows, q);
    sm.do_full[stage].Wait(ring.phase);
    issue_transposed_scores(dp, v_rows, dout);
    Warpgroup::Wait<1>();  // Sᵀ is done (dPᵀ may still run)
    // Pᵀ = 2^(Sᵀ·scale·log2 e − lse₂), 0 where the causal mask hides the key from the query.
    const float* lse = sm.lse + stage * S::kBM;
    const bool diagonal = S::kCausal && m * S::kBM < (kb + 1) * S::kBN;
#pragma unroll
    for (int j = 0; j < S::kBM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int column = 8 * j + (lane % 4) * 2 + e;
        const float l = lse[column];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float p = Exp2(s[j * 4 + h * 2 + e] * S::kScaleLog2 - l);
          if (diagonal && kb * S::kBN + key_row0 + 8 * h > m * S::kBM + column) p = 0.0f;
          s[j * 4 + h * 2 + e] = p;
        }
      }
    Warpgroup::Wait<0>();  // dPᵀ is done
    // dSᵀ = Pᵀ ⊙ (dPᵀ − D), then both as A fragments (keys 16c .. 16c + 15 of the reduction:
    // accumulator column blocks 2c and 2c + 1) and dSᵀ to shared memory for dQ.
    const float* d_row = sm.delta + stage * S::kBM;
#pragma unroll
    for (int j = 0; j < S::kBM / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float d = d_row[8 * j + (lane % 4) * 2 + e];
#pragma unroll
        for (int h = 0; h < 2; ++h) dp[j * 4 + h * 2 + e] = s[j * 4 + h * 2 + e] * (dp[j * 4 + h * 2 + e] - d);
      }
    unsigned p_frag[S::kBM / 16][4], ds_frag[S::kBM / 16][4];
#pragma unroll
    for (int c = 0; c < S::kBM / 16; ++c)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        p_frag[c][r] = Element::Pack2(s[8 * c + 2 * r], s[8 * c + 2 * r + 1]);
        ds_frag[c][r] = Element::Pack2(dp[8 * c + 2 * r], dp[8 * c + 2 * r + 1]);
      }
    // Register (c, r) holds row (r % 2) of the pair, columns 8 (2c + r / 2) + (lane % 4) * 2 + {0, 1}.
    Storage* ds_tile = sm.tile_ds + (turn & 1) * S::kBN * kBox;
#pragma unroll
    for (int c = 0; c < S::kBM / 16; ++c)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = key_row0 + 8 * (r % 2), column = 8 * (2 * c + r / 2) + (lane % 4) * 2;
        *(unsigned*)((unsigned char*)ds_tile + Swizzle128(row, column * Element::kBytes)) = ds_frag[c][r];
      }
    FenceSharedForAsync();  // the stores, visible to the wgmma that reads them
    // dV += Pᵀ·dO and dK += dSᵀ·Q: M = keys, N = d, the reduction over the block's queries.
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kBM / Mma::kK; ++kk)
      Mma::template Registers<S::kD, true>(dv, p_frag[kk], SharedMatrix::MnMajor(dout + kk * Mma::kK * kBox, S::kBM * 128), 1);
#pragma unroll
    for (int kk = 0; kk < S::kBM / Mma::kK; ++kk)
      Mma::template Registers<S::kD, true>(dk, ds_frag[kk], SharedMatrix::MnMajor(q + kk * Mma::kK * kBox, S::kBM * 128), 1);
    Warpgroup::Commit();
    NamedBarrierSync(1, 256);  // both consumers' dSᵀ are in shared memory
    // dQᵀ = Kᵀ·dSᵀ: M = 64 of d, N = the queries, the reduction over all 128 keys.
    const bool computes_dq = S::kD == 128 || (turn & 1) == consumer;
    const int d_box = S::kD == 128 ? consumer : 0;
    float dq[S::kBM / 2];
    if (computes_dq) {
      Warpgroup::Fence();
#pragma unroll
      for (int kk = 0; kk < S::kBN / Mma::kK; ++kk)
        Mma::template Shared<S::kBM, true, true>(dq, SharedMatrix::MnMajor(sm.tile_k + d_box * S::kBN * kBox + kk * Mma::kK * kBox, S::kBN * 128),
                                                 SharedMatrix::MnMajor(ds_tile + kk * Mma::kK * kBox, S::kBN * 128), kk > 0);
      Warpgroup::Commit();
    }
    Warpgroup::Wait<0>();
    if (local == 0) {  // this block's Q and dO are read
      sm.q_empty[stage].Arrive();
      sm.do_empty[stage].Arrive();
    }
    if (computes_dq) {
      // Fragment order (register i of thread `local` at i * 128 + local: conflict-free), added
      // to the accumulator by one bulk reduce once the last one has read the buffer.
      float* buffer = sm.dq + consumer * S::kBM * 64;
      if (local == 0) TmaStoreWaitRead();
      NamedBarrierSync(2 + consumer, 128);
#pragma unroll
      for (int i = 0; i < S::kBM / 2; ++i) buffer[i * 128 + local] = dq[i];
      FenceSharedForAsync();
      NamedBarrierSync(2 + consumer, 128);
      if (local == 0) {
        BulkReduceAddF32(dq_accumulator + (((int64_t)head * S::kMBlocks + m) * S::kDBoxes + d_box) * S::kBM * 64, buffer,
                         S::kBM * 64 * 4);
        TmaStoreCommit();
      }
    }
  }
  if (local == 0) TmaStoreWait();
  // dK · scale and dV, as column pairs; keys past the end are not written.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kb * S::kBN + key_row0 + 8 * h;
    if (key >= S::kNK) continue;
    const int64_t offset = ((int64_t)kv_head * S::kNK + key) * S::kD + (lane % 4) * 2;
    unsigned* dk_pairs = (unsigned*)(dk_out + offset);
    unsigned* dv_pairs = (unsigned*)(dv_out + offset);
#pragma unroll
    for (int j = 0; j < S::kD / 8; ++j) {
      dk_pairs[4 * j] = Element::Pack2(dk[j * 4 + h * 2] * S::Scale(), dk[j * 4 + h * 2 + 1] * S::Scale());
      dv_pairs[4 * j] = Element::Pack2(dv[j * 4 + h * 2], dv[j * 4 + h * 2 + 1]);
    }
  }
}

// A CTA's key/value head and key block. Config::kHeadsTogether (0: all) heads at a time, their
// key blocks in order, each block of every head before the next: with the causal mask the
// first key blocks have the most query blocks, so the longest work starts first, and the
// heads running together share their Q and dO in L2. Measured on an H200 (B4 H16 N4096,
// causal, 2026-11-30): 8 heads together 1.486 ms at d128 and 0.920 at d64, one head at a time
// (1) 1.550 and 0.967, all heads (0) 1.519 at d128.
struct AttentionBwdBlock {
  int kv_head, kb;
};
template <class S>
__device__ __forceinline__ AttentionBwdBlock AttentionBwdBlockAt(int index) {
  constexpr int kTogether = S::kHeadsTogether > 0 && S::kHeadsTogether < S::kKvHeads ? S::kHeadsTogether : S::kKvHeads;
  const int set = index / (kTogether * S::kKeyBlocks), in_set = index % (kTogether * S::kKeyBlocks);
  const int heads_in_set = min(kTogether, S::kKvHeads - set * kTogether);  // the last set may be short
  return {set * kTogether + in_set % heads_in_set, in_set / heads_in_set};
}

// The main kernel's body: 384 threads, grid kKeyBlocks × kKvHeads (a head's key blocks
// together: they read the same Q and dO), the host's count of dynamic shared memory.
template <class Config>
__device__ __forceinline__ void AttentionBwdSm90(const TensorMap& map_q, const TensorMap& map_k, const TensorMap& map_v,
                                                 const TensorMap& map_do, const float* __restrict__ lse2,
                                                 const float* __restrict__ delta, float* __restrict__ dq_accumulator,
                                                 typename Config::Element::Storage* __restrict__ dk,
                                                 typename Config::Element::Storage* __restrict__ dv) {
  using S = AttentionBwdShape<Config>;
  AttentionBwdSharedMemory<S> sm;
  if (threadIdx.x == 0) {
    sm.kv_full->Init(1);
    for (int s = 0; s < S::kStages; ++s) {
      sm.q_full[s].Init(1);
      sm.do_full[s].Init(1);
      sm.q_empty[s].Init(2);  // each consumer's thread 0
      sm.do_empty[s].Init(2);
    }
    FenceBarrierInit();
  }
  __syncthreads();
  const AttentionBwdBlock block = AttentionBwdBlockAt<S>(blockIdx.x);
  const int kv_head = block.kv_head, kb = block.kb;
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    Warpgroup::ShrinkRegisters<S::kProducerRegisters>();
    AttentionBwdProducer<S>(sm, map_q, map_k, map_v, map_do, lse2, delta, kv_head, kb);
    return;
  }
  Warpgroup::GrowRegisters<S::kConsumerRegisters>();
  AttentionBwdConsume<S>(sm, dq_accumulator, dk, dv, kv_head, kb, warpgroup - 1);
}

// D, the statistics in base 2 and the zeroed dQ accumulator of one query block of a head
// (grid kMBlocks × kHeads, 256 threads: a warp per row at a time).
template <class Config>
__device__ __forceinline__ void AttentionBwdPrepare(const typename Config::Element::Storage* __restrict__ out,
                                                    const typename Config::Element::Storage* __restrict__ dout,
                                                    const float* __restrict__ lse, float* __restrict__ lse2,
                                                    float* __restrict__ delta, float* __restrict__ dq_accumulator) {
  using S = AttentionBwdShape<Config>;
  using Element = typename S::Element;
  const int m = blockIdx.x % S::kMBlocks, head = blockIdx.x / S::kMBlocks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < S::kBM; r += blockDim.x / 32) {
    const int row = m * S::kBM + r;
    float sum = 0.0f;
    if (row < S::kNQ) {
      const int64_t base = ((int64_t)head * S::kNQ + row) * S::kD;
      for (int d = lane * 2; d < S::kD; d += 64) {
        const unsigned o = *(const unsigned*)(out + base + d), g = *(const unsigned*)(dout + base + d);
        sum += Element::ToFloat(o & 0xffff) * Element::ToFloat(g & 0xffff) + Element::ToFloat(o >> 16) * Element::ToFloat(g >> 16);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) {
      const int64_t at = (int64_t)head * S::kQueryPad + row;
      delta[at] = row < S::kNQ ? sum : 0.0f;
      lse2[at] = row < S::kNQ ? lse[(int64_t)head * S::kNQ + row] * 1.4426950408889634f : INFINITY;
    }
  }
  float4* accumulator = (float4*)(dq_accumulator + ((int64_t)head * S::kMBlocks + m) * S::kAccumulatorFloats);
  for (int i = threadIdx.x; i < S::kAccumulatorFloats / 4; i += blockDim.x) accumulator[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// dQ of one query block of a head from its accumulator (grid kMBlocks × kHeads): the main
// kernel's fragment order undone, times the scale, as column pairs.
template <class Config>
__device__ __forceinline__ void AttentionBwdFinish(const float* __restrict__ dq_accumulator,
                                                   typename Config::Element::Storage* __restrict__ dq) {
  using S = AttentionBwdShape<Config>;
  using Element = typename S::Element;
  const int m = blockIdx.x % S::kMBlocks, head = blockIdx.x / S::kMBlocks;
  const float* block = dq_accumulator + ((int64_t)head * S::kMBlocks + m) * S::kAccumulatorFloats;
  for (int pair = threadIdx.x; pair < S::kBM * S::kD / 2; pair += blockDim.x) {
    const int query = pair / (S::kD / 2), dim = pair % (S::kD / 2) * 2;
    const int row = m * S::kBM + query;
    if (row >= S::kNQ) continue;
    float v[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      // Element (dim + e, query) of dQᵀ: row r = (dim + e) % 64 of box (dim + e) / 64 is
      // warp r / 16, lane / 4 = r % 8, h = r % 16 / 8; column `query` is j = query / 8,
      // lane % 4 = query % 8 / 2, e' = query % 2.
      const int r = (dim + e) % 64, box = (dim + e) / 64;
      const int thread = (r / 16) * 32 + (r % 8) * 4 + query % 8 / 2;
      const int i = (query / 8) * 4 + (r % 16 / 8) * 2 + query % 2;
      v[e] = block[box * S::kBM * 64 + i * 128 + thread];
    }
    *(unsigned*)(dq + ((int64_t)head * S::kNQ + row) * S::kD + dim) = Element::Pack2(v[0] * S::Scale(), v[1] * S::Scale());
  }
}

}  // namespace tf

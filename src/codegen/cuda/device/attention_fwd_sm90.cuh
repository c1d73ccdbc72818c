// The Hopper flash-attention forward skeleton: one warp-specialised kernel, FlashAttention-3
// style. No score ever leaves the registers.
//
//   CTA                      kTiles query blocks of kBM rows of one batch entry (heads are
//                            batch entries), one after another; CTAs of one entry run
//                            together, sharing its K and V in L2
//   warpgroup 0 (producer)   one thread loads a query block's Q tile, then K and V tiles of
//                            kBN keys by TMA into a ring of kStages slots (K and V with
//                            barriers of their own, so Q·Kᵀ starts before V lands)
//   warpgroups 1.. (consumers, 64 query rows each)
//                            S = Q·Kᵀ by wgmma from shared memory; the Logits hook per score
//                            (scale, masks, bias) and the online softmax in f32 registers
//                            (tile_softmax.cuh); P converted in place to A-fragment
//                            registers; O += P·V by wgmma with A from registers; O / row
//                            sum stored, rows past the end not
//   masks                    key blocks a mask removes entirely are never loaded (causal
//                            attention: the blocks above the diagonal); where the mask
//                            removes nothing, the logits run without it (InteriorLogits)
//
// The generated part (codegen/cuda/cuda_attention_emitter.cc) is the Config, the Batch hook (a
// batch entry's operand coordinates), the Logits hooks printed from the group's logits
// program, the key-block tables, and a kernel that calls AttentionFwdSm90.
#pragma once

#include "attention_common.cuh"
#include "tile_mma.cuh"
#include "tile_softmax.cuh"
#include "tilefuse_tiles.cuh"

namespace tf {

// The kernel's TMA descriptors, each a __grid_constant__ parameter. K is Kᵀ ([d][nk]) and V
// is [nk][dv]: wgmma B operands [R][N] (R the reduction dim), K-major (R contiguous: stored
// [R/64][N][64] in boxes of 64 R × the N tile) or MN-major (N contiguous: [N/64][R][64],
// boxes of 64 N × the R tile), as the operand's strides have them (Config::kKMnMajor,
// kVMnMajor).
struct AttentionMaps {
  const TensorMap* q;
  const TensorMap* k;
  const TensorMap* v;
};

// Where the logits run without their mask (Config::kInterior): nowhere, in every key block,
// in the same key blocks of every query block (AttentionLengths), or per query block from
// AttentionBlockTables.
enum AttentionInterior : int { kNoInterior, kAllInterior, kSameInterior, kInteriorTables };

// Per query block, its key blocks and interior key blocks, and the query block each CTA
// slot runs (-1: none); static __device__ arrays of the kernel's, null where Config says
// they are not used (kSkipsKeyBlocks, kInterior).
struct AttentionBlockTables {
  const short* query_block_order;
  const short* first_key_block;
  const short* last_key_block;
  const short* first_inner_block;
  const short* last_inner_block;
};

// The tables as a kernel parameter, where the lengths come at launch (the tables are then data of
// the binding, not text of the kernel): at most kCapacity query blocks, each array in the order of
// AttentionBlockTables, padded with -1.
template <int kCapacity>
struct AttentionTableParameter {
  short query_block_order[kCapacity];
  short first_key_block[kCapacity];
  short last_key_block[kCapacity];
  short first_inner_block[kCapacity];
  short last_inner_block[kCapacity];
  __device__ __forceinline__ AttentionBlockTables Tables() const {
    return {query_block_order, first_key_block, last_key_block, first_inner_block, last_inner_block};
  }
};

// The constants every part of the skeleton derives from Config.
template <class Config>
struct AttentionShape : Config {
  using Element = typename Config::Element;
  using Mma = tf::Mma<Element>;
  static_assert(Mma::kSixteenBit, "attention_fwd_sm90: bf16 or f16 operands (P is an A fragment of registers)");
  static constexpr int kSwizzleElements = 128 / Element::kBytes;  // one 128-byte swizzle row
  static constexpr bool kKMnMajor = Config::kKMnMajor != 0, kVMnMajor = Config::kVMnMajor != 0;
  static constexpr unsigned kQBytes = Config::kBM * Config::kD * Element::kBytes;
  static constexpr unsigned kKBytes = Config::kBN * Config::kD * Element::kBytes;
  static constexpr unsigned kVBytes = Config::kBN * Config::kDV * Element::kBytes;
};

// Shared memory as the host's SharedBytes lays it out: the Q tiles, the K and V rings
// (1024-byte aligned, the swizzle period), then the barriers.
template <class S>
struct AttentionSharedMemory {
  using Storage = typename S::Element::Storage;
  Storage* tile_q;  // [slot][kD / 64][kBM][64], 128-byte swizzle
  Storage* tile_k;  // [stage] Kᵀ tiles
  Storage* tile_v;  // [stage] V tiles
  Barrier* q_full;
  Barrier* q_empty;  // the consumers are done with a Q slot: another tile's may load
  Barrier* k_full;
  Barrier* k_empty;
  Barrier* v_full;
  Barrier* v_empty;

  __device__ __forceinline__ AttentionSharedMemory() {
    unsigned char* shared = AlignedDynamicShared();
    tile_q = (Storage*)shared;
    tile_k = tile_q + S::kQSlots * S::kBM * S::kD;
    tile_v = tile_k + S::kStages * S::kBN * S::kD;
    q_full = (Barrier*)(tile_v + S::kStages * S::kBN * S::kDV);
    q_empty = q_full + S::kQSlots;
    k_full = q_empty + S::kQSlots;
    k_empty = k_full + S::kStages;
    v_full = k_empty + S::kStages;
    v_empty = v_full + S::kStages;
  }
};

// Which query blocks a CTA runs and the key blocks each reads. CTAs of one batch entry
// (same K and V) are neighbours in launch order.
template <class S>
struct AttentionSchedule {
  AttentionBlockTables tables;
  AttentionLengths lengths;
  int m_blocks, key_blocks;  // query blocks and key blocks of a batch entry
  int batch, first_slot;

  __device__ __forceinline__ AttentionSchedule(const AttentionBlockTables& t, const AttentionLengths& l)
      : tables(t), lengths(l), m_blocks((l.nq + S::kBM - 1) / S::kBM), key_blocks((l.nk + S::kBN - 1) / S::kBN) {
    const int ctas_per_batch = (m_blocks + S::kTiles - 1) / S::kTiles;  // kTiles query blocks per CTA
    batch = blockIdx.x / ctas_per_batch;
    first_slot = blockIdx.x % ctas_per_batch * S::kTiles;
  }

  // This CTA's query block `t` and the key blocks it reads; false past its last. With the
  // tables, only the key blocks the mask leaves (others are never loaded), the query blocks
  // with the most work first.
  __device__ __forceinline__ bool Tile(int t, int& m_block, int& kb_first, int& kb_last) const {
    if constexpr (S::kSkipsKeyBlocks) {
      m_block = tables.query_block_order[first_slot + t];
      if (m_block < 0) return false;
      kb_first = tables.first_key_block[m_block];
      kb_last = tables.last_key_block[m_block];
      return true;
    } else {
      m_block = first_slot + t;
      kb_first = 0;
      kb_last = key_blocks - 1;
      return m_block < m_blocks;
    }
  }
};

}  // namespace tf

#include "attention_fwd_sm90_producer.cuh"
#include "attention_fwd_sm90_consumer.cuh"

namespace tf {

// The kernel body. Config (see AttentionShape) gives Element, Index (of the logits' and the
// output's elements), the tile (kBM = 64 kConsumers, kBN, kD, kDV, kStages, kTiles,
// kQSlots), whether the keys are whole key blocks (kWholeKeyBlocks), the operands' layouts
// (kKMnMajor, kVMnMajor), the loop (kOverlap, kPingPong), the mask's blocks (kSkipsKeyBlocks,
// kInterior), the softmax (kPolyExpEvery, LazyMargin()), zeros for rows without
// probabilities (kZeroNanRows: the safe softmax's guard), OutputScale() and the register
// split (kProducerRegisters, kConsumerRegisters). Batch:
//   AttentionBatch operator()(int batch) const   batch entry → Q, K and V map coordinates
//   Index LogitsEntry(int batch) const           → the logits' batch entry
// Logits and InteriorLogits (the logits with and without the mask; NoLogits where unused):
//   enum { kScoreTimesMultiplier }    1: the logit is the score times Multiplier()
//   static float Multiplier()         what the score is multiplied by (1 when not)
//   float operator()(Index row, int key, float score) const   the logit of (row, key)
// `lengths`: nq, nk and kSameInterior's interior key blocks. `out` is [batch][nq][kDV];
// `logsumexp`, where not null, gets each logits row's log Σ exp(logit) (what a training
// forward saves for the backward), at the row's index in the logits ([logits entry][nq]).
template <class Config, class Batch, class Logits, class InteriorLogits>
__device__ __forceinline__ void AttentionFwdSm90(const AttentionMaps& maps, const AttentionBlockTables& tables,
                                                 const AttentionLengths& lengths, const Batch& batch_hook,
                                                 const Logits& logits, const InteriorLogits& interior_logits,
                                                 typename Config::Element::Storage* __restrict__ out, float* __restrict__ logsumexp) {
  using S = AttentionShape<Config>;
  AttentionSharedMemory<S> sm;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kQSlots; ++s) {
      sm.q_full[s].Init(1);
      sm.q_empty[s].Init(S::kConsumers);
    }
    for (int s = 0; s < S::kStages; ++s) {
      sm.k_full[s].Init(1);
      sm.v_full[s].Init(1);
      sm.k_empty[s].Init(S::kConsumers);  // every consumer reads every slot
      sm.v_empty[s].Init(S::kConsumers);
    }
    FenceBarrierInit();
  }
  __syncthreads();
  const AttentionSchedule<S> schedule(tables, lengths);
  const AttentionBatch coordinates = batch_hook(schedule.batch);
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    Warpgroup::ShrinkRegisters<S::kProducerRegisters>();
    AttentionProducer<S>(sm, maps, schedule, coordinates);
    return;
  }
  Warpgroup::GrowRegisters<S::kConsumerRegisters>();
  AttentionConsume<S>(sm, schedule, logits, interior_logits, warpgroup - 1, batch_hook.LogitsEntry(schedule.batch), out, logsumexp);
}

}  // namespace tf

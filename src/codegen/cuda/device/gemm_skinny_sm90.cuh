// The skinny GEMM skeleton: D = A·B with a fused epilogue for a few rows of A (M ≤ 64: a
// decode step's tokens), where the time is reading B once. gemm_sm90's tiles are 128 rows
// tall: at M = 16 they compute 8x what is asked and split K into too few streams of B.
//
// Operands swapped: wgmma computes Dᵀ, 64 of B's columns (wgmma's M side) by A's rows
// padded to kMP (its N side, a multiple of 16; TMA fills the rows past M with zeros), so a
// warpgroup's instruction reads 64 columns of B and all of A's rows at once. K is split into
// units so that every SM streams B; a unit's partial sums go through scratch memory and the
// last unit of a column block adds them in split order (the result does not depend on
// timing) and runs the epilogue. Or (kSplitsInCluster) the splits of a column block are the
// CTAs of a thread-block cluster, one unit each, and their partials cross through the
// cluster's shared memory: each CTA sums a share of the block's elements, in split order,
// and runs their epilogue (SkinnyClusterHandOver).
//
//   warpgroup 0 (producer, one thread)          warpgroups 1..kConsumers (64 columns each)
//   ───────────────────────────────────         ──────────────────────────────────────────────
//   for each unit (kBN columns × K range):      for each unit:
//     for each K step: wait empty[s];             for each K step: wait full[s], wgmma from
//       TMA A (kMP × 64), B (kBN × 64) → s          slot s, hand slot s-1 back
//                                                 [split-K: partials, the last unit sums]
//                                                 epilogue(row, col, acc, 0) per element
//
// The generated part (codegen/cuda/cuda_skinny_gemm_emitter.cc) is the Config, the Epilogue
// functor printed from the group's scalar program (the GEMM template's) and one call of
// GemmSkinnySm90. Config gives Element, Index, kRows (M), kN, kK, kMP, kBN (64 or 128),
// kStages, kSplits, kSplitSteps, kBKMajor (B as [N][K], x · wᵀ; else [K][N]), kBBeforeWait
// (B loaded before the grid ahead has finished: SkinnyProducer), kNormA (A a norm of the
// rows the kernel is given, computed by the producer's second warp: SkinnyNormedA; 1 a layer
// norm, 2 an RMS norm), kSplitsInCluster (the splits summed in a cluster; the grid is then
// every unit, launched in clusters of kSplits CTAs) and kPrefetchEpilogue (the Epilogue's
// Prefetch asked for the elements a consumer thread will store: SkinnyPrefetchEpilogue).
//
// A normed in the kernel (kNormA): a decode step's layer norm feeds one product, and its own
// kernel (one CTA over 768 values) is a launch and a dependency edge on the step's critical
// path. The product reads the norm's input x instead: the producer's second warp sums each
// row's values and squared deviations (as the graph's reduce_means: the mean, then the
// variance about it), then for every K step writes A's tile itself, ((x - mean) · rstd) · γ + β
// rounded to the operands' type (the graph's order of operations), zero rows past M, into the
// 128-byte swizzle TMA would have written; it fences the writes for the tensor cores' proxy and
// arrives on the stage's full barrier beside the producer's B. An RMS norm (kNormA = 2: a
// LLaMA-style layer's, read by its gate and up products alike, each computing it) takes no mean
// and no bias: x · rsqrt(mean(x²) + epsilon) · γ.
#pragma once

#include "tile_mma.cuh"
#include "tilefuse_tiles.cuh"

namespace tf {

template <class Config>
struct SkinnyShape : Config {
  using Element = typename Config::Element;
  // B [K][N] is wgmma's A read MN-major, which only the 16-bit types have.
  static_assert(Element::kBytes == 2, "gemm_skinny_sm90 takes bf16 or f16 operands");
  static_assert(Config::kMP % 16 == 0 && Config::kMP <= 256 && Config::kMP >= Config::kRows, "kMP: the rows padded to 16");
  static_assert(Config::kBN == 64 || Config::kBN == 128, "kBN: 64 or 128 columns a unit");
  static_assert(Config::kNormA == 0 || (Config::kRows <= 16 && Config::kK % 8 == 0), "kNormA: at most 16 rows, K in 16-byte rows");
  static constexpr bool kBKMajor = Config::kBKMajor != 0;
  static constexpr int kBK = 128 / Element::kBytes;  // one 128-byte swizzle row
  static constexpr int kConsumers = Config::kBN / 64;
  static constexpr int kTiles = (Config::kN + Config::kBN - 1) / Config::kBN;
  static constexpr int kKSteps = (Config::kK + kBK - 1) / kBK;
  static constexpr int kUnits = kTiles * Config::kSplits;
  static constexpr bool kNormed = Config::kNormA != 0;
  // A thread's accumulators (Dᵀ's kMP rows of its 64 columns over 128 threads).
  static constexpr int kPerThread = Config::kMP / 2;
  static constexpr bool kInCluster = Config::kSplitsInCluster != 0;
  static_assert(!kInCluster || (Config::kSplits >= 2 && Config::kSplits <= 8), "kSplitsInCluster: 2 to 8 splits, a cluster's portable size");
  // Whether some lane's accumulator i is of a row below kRows (d[i] is row 8(i/4) + 2(lane%4) +
  // i%2): the others are TMA's zero rows, never sent nor summed.
  static constexpr bool HasRows(int i) { return 8 * (i / 4) + i % 2 < Config::kRows; }
  // The accumulators with rows before i: the position of i among those sent.
  static constexpr int SentBefore(int i) {
    int n = 0;
    for (int j = 0; j < i; ++j) n += HasRows(j) ? 1 : 0;
    return n;
  }
  // In a cluster, the CTA of rank r sums and stores the sent accumulators i with
  // SentBefore(i) % kSplits == r: at most kOwned of them.
  static constexpr int kOwned = (SentBefore(kPerThread) + Config::kSplits - 1) / Config::kSplits;
  static constexpr bool kRmsNorm = Config::kNormA == 2;  // no mean taken, no bias
  // The bytes TMA brings a stage: B's tile, and A's unless the norm's warp writes it.
  static constexpr unsigned kStageBytes = (Config::kBN + (kNormed ? 0 : Config::kMP)) * kBK * Element::kBytes;
};

// kNormA: the norm's input x [kRows][kK], its scale γ and bias β [kK] (bias null: none).
template <class Element>
struct SkinnyNorm {
  const typename Element::Storage* x;
  const typename Element::Storage* scale;
  const typename Element::Storage* bias;
  float epsilon;
};

// Shared memory as the host's SkinnySharedBytes lays it out: B's ring and A's (1024-byte
// aligned, the swizzle period), then the barriers.
template <class S>
struct SkinnySharedMemory {
  using Storage = typename S::Element::Storage;
  Storage* tile_b;  // [stage][kBN][kBK] (K-major) or [stage][kBN / 64][kBK][64] (MN-major), 128-byte swizzle
  Storage* tile_a;  // [stage][kMP][kBK], 128-byte swizzle
  Barrier* full;
  Barrier* empty;
  volatile int* finishes;  // [2, a consumer's]: split-K, this unit runs the consumer's epilogue
  Barrier* gathered;       // [2, a consumer's]: kInCluster, every split's partials of its share have landed
  float* slots;            // kInCluster: [split][consumer][kOwned][128], every split's partials of this CTA's share

  __device__ __forceinline__ SkinnySharedMemory() {
    extern __shared__ unsigned char tf_shared_raw[];
    unsigned char* shared = tf_shared_raw + ((1024 - (SharedAddress(tf_shared_raw) & 1023)) & 1023);
    tile_b = (Storage*)shared;
    tile_a = tile_b + S::kStages * S::kBN * S::kBK;
    full = (Barrier*)(tile_a + S::kStages * S::kMP * S::kBK);
    empty = full + S::kStages;
    finishes = (volatile int*)(empty + S::kStages);
    gathered = (Barrier*)(finishes + 2);
    slots = (float*)(gathered + 2);
  }
};

template <class S>
__device__ __forceinline__ void SkinnyUnitRange(int unit, int& tile, int& k_begin, int& k_end) {
  tile = unit / S::kSplits;
  k_begin = unit % S::kSplits * S::kSplitSteps;
  k_end = min(S::kKSteps, k_begin + S::kSplitSteps);
}

// B's tile of K step `ks` for column block `tile` into slot `stage`: boxes of 64 rows of N × kBK
// of K (K-major) or kBK rows of K × 64 columns (MN-major).
template <class S>
__device__ __forceinline__ void SkinnyLoadB(const SkinnySharedMemory<S>& sm, const TensorMap& map_b, int stage, int tile, int ks) {
#pragma unroll
  for (int box = 0; box < S::kBN / 64; ++box) {
    const int n = tile * S::kBN + box * 64, k = ks * S::kBK;
    TmaLoad3d(sm.tile_b + stage * S::kBN * S::kBK + box * 64 * S::kBK, map_b, S::kBKMajor ? k : n, S::kBKMajor ? n : k, 0, sm.full[stage]);
  }
}

// One thread loads. With kBBeforeWait (B a weight no kernel of the model writes), B's tiles
// for the first steps of the CTA's first unit go into the ring's first slots before the grid
// ahead has finished, and only their A after: at batch 1 B is nearly all of the product's
// bytes, and they then cross while the kernel ahead (a norm, an attention of a few CTAs)
// still runs, as gemm_sm90's GemmLoadBAhead does.
template <class S>
__device__ __forceinline__ void SkinnyProducer(const SkinnySharedMemory<S>& sm, const TensorMap& map_a, const TensorMap& map_b) {
  if (threadIdx.x != 0) return;
  Pipeline<S::kStages> ring;
  int ahead = 0;  // steps of the first unit whose B is loaded
  if constexpr (S::kBBeforeWait != 0) {
    if (blockIdx.x < S::kUnits) {
      int tile, k_begin, k_end;
      SkinnyUnitRange<S>(blockIdx.x, tile, k_begin, k_end);
      ahead = min(S::kStages, k_end - k_begin);
      for (int i = 0; i < ahead; ++i) {  // fresh slots: nothing to wait for
        sm.full[i].ArriveExpectingBytes(S::kStageBytes);
        SkinnyLoadB<S>(sm, map_b, i, tile, k_begin + i);
      }
    }
  }
  tf_await_prior_grid();  // A may come from the grid ahead
  for (int unit = blockIdx.x; unit < S::kUnits; unit += gridDim.x, ahead = 0) {
    int tile, k_begin, k_end;
    SkinnyUnitRange<S>(unit, tile, k_begin, k_end);
    for (int ks = k_begin; ks < k_end; ++ks, ring.Advance()) {
      const bool b_loaded = ks - k_begin < ahead;
      if (!b_loaded) {
        sm.empty[ring.stage].Wait(ring.phase ^ 1);
        sm.full[ring.stage].ArriveExpectingBytes(S::kStageBytes);
      }
      if constexpr (!S::kNormed) TmaLoad3d(sm.tile_a + ring.stage * S::kMP * S::kBK, map_a, ks * S::kBK, 0, 0, sm.full[ring.stage]);
      if (!b_loaded) SkinnyLoadB<S>(sm, map_b, ring.stage, tile, ks);
    }
  }
}

// kNormA: the producer warpgroup's second warp writes A's tiles (see the header). A lane holds a
// column pair of every row: x read as pairs, the statistics summed over the lanes.
//
// Where a lane's pairs of every row fit in registers (kNormHeld: a decode step's one row of
// up to 2048 values), x, γ and β are loaded once, all together, right after the wait for the
// grid ahead: one memory round trip before the first tile, where reading x for the mean, again
// for the variance and again with γ and β at every K step cost a round trip each (a layer
// norm's own kernel is as long as that chain: a ~2 us launch on a decode step's critical path).
// `only_begin`, `only_end` (where only_begin ≥ 0): the K steps this CTA's consumers take, into the
// ring's slots from the first, instead of its units' (the skinny chain's pair: each CTA half of K;
// the statistics still over every column of the row).
template <class S>
__device__ __forceinline__ void SkinnyNormedA(const SkinnySharedMemory<S>& sm, const SkinnyNorm<typename S::Element>& norm, int only_begin = -1,
                                              int only_end = 0) {
  using Element = typename S::Element;
  using Storage = typename Element::Storage;
  constexpr int kWords = S::kKSteps;  // a lane's pairs of a row: pair lane + 32 j is K step j's
  constexpr bool kHeld = S::kRows * kWords <= 32;
  const int lane = threadIdx.x % 32;
  tf_await_prior_grid();  // x is the kernel ahead's output
  // Held: x's words by row and K step, γ's and β's pairs by K step (zero past K).
  unsigned x_held[kHeld ? S::kRows : 1][kHeld ? kWords : 1];
  unsigned scale_held[kHeld ? kWords : 1], bias_held[kHeld ? kWords : 1];
  if constexpr (kHeld) {
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const int column = j * S::kBK + 2 * lane;
      const bool inside = column < S::kK;
#pragma unroll
      for (int r = 0; r < S::kRows; ++r)
        x_held[r][j] = inside ? *reinterpret_cast<const unsigned*>(norm.x + (long long)r * S::kK + column) : 0u;
      scale_held[j] = inside ? (unsigned)norm.scale[column] | (unsigned)norm.scale[column + 1] << 16 : 0u;
      bias_held[j] = inside && norm.bias ? (unsigned)norm.bias[column] | (unsigned)norm.bias[column + 1] << 16 : 0u;
    }
  }
  // Row r's word of pair lane + 32 j (j < kWords, the pair inside the row).
  auto x_word = [&](int r, int j) -> unsigned {
    if constexpr (kHeld) return x_held[r][j];
    else return reinterpret_cast<const unsigned*>(norm.x + (long long)r * S::kK)[lane + 32 * j];
  };
  constexpr int kPairs = S::kK / 2;
  float mean[S::kRows], rstd[S::kRows];
#pragma unroll
  for (int r = 0; r < S::kRows; ++r) {
    mean[r] = 0.0f;
    if constexpr (!S::kRmsNorm) {
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kWords; ++j)
        if (lane + 32 * j < kPairs) {
          const unsigned word = x_word(r, j);
          sum += Element::ToFloat((Storage)(word & 0xffff)) + Element::ToFloat((Storage)(word >> 16));
        }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      mean[r] = sum / (float)S::kK;
    }
    float squares = 0.0f;
#pragma unroll
    for (int j = 0; j < kWords; ++j)
      if (lane + 32 * j < kPairs) {
        const unsigned word = x_word(r, j);
        const float d0 = Element::ToFloat((Storage)(word & 0xffff)) - mean[r];
        const float d1 = Element::ToFloat((Storage)(word >> 16)) - mean[r];
        squares += d0 * d0 + d1 * d1;
      }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
    rstd[r] = rsqrtf(squares / (float)S::kK + norm.epsilon);
  }
  Pipeline<S::kStages> ring;
  const bool ranged = only_begin >= 0;
  for (int unit = ranged ? 0 : blockIdx.x; unit < (ranged ? 1 : S::kUnits); unit += ranged ? 1 : gridDim.x) {
    int tile, k_begin = only_begin, k_end = only_end;
    if (!ranged) SkinnyUnitRange<S>(unit, tile, k_begin, k_end);
    for (int ks = k_begin; ks < k_end; ++ks, ring.Advance()) {
      const int column = ks * S::kBK + 2 * lane;  // this lane's pair
      const bool inside = column < S::kK;
      float g0 = 0.0f, g1 = 0.0f, b0 = 0.0f, b1 = 0.0f;
      if constexpr (kHeld) {  // a register array read at a step only the loop knows: picked by an unrolled select
        unsigned g = 0, b = 0;
#pragma unroll
        for (int j = 0; j < kWords; ++j)
          if (j == ks) g = scale_held[j], b = bias_held[j];
        g0 = Element::ToFloat((Storage)(g & 0xffff)), g1 = Element::ToFloat((Storage)(g >> 16));
        b0 = Element::ToFloat((Storage)(b & 0xffff)), b1 = Element::ToFloat((Storage)(b >> 16));
      } else if (inside) {
        g0 = Element::ToFloat(norm.scale[column]), g1 = Element::ToFloat(norm.scale[column + 1]);
        if (norm.bias) b0 = Element::ToFloat(norm.bias[column]), b1 = Element::ToFloat(norm.bias[column + 1]);
      }
      sm.empty[ring.stage].Wait(ring.phase ^ 1);
      unsigned* a = reinterpret_cast<unsigned*>(sm.tile_a + ring.stage * S::kMP * S::kBK);
#pragma unroll
      for (int r = 0; r < S::kMP; ++r) {
        unsigned word = 0;
        if (r < S::kRows && inside) {
          unsigned in = 0;
          if constexpr (kHeld) {
#pragma unroll
            for (int j = 0; j < kWords; ++j)
              if (j == ks) in = x_held[r < S::kRows ? r : 0][j];
          } else {
            in = *reinterpret_cast<const unsigned*>(norm.x + (long long)r * S::kK + column);
          }
          const float y0 = (Element::ToFloat((Storage)(in & 0xffff)) - mean[r]) * rstd[r] * g0 + b0;
          const float y1 = (Element::ToFloat((Storage)(in >> 16)) - mean[r]) * rstd[r] * g1 + b1;
          word = Element::Pack2(y0, y1);
        }
        // Row r's 128 bytes: the lane's word in 16-byte chunk lane / 4, the chunks XOR-swizzled
        // by the row within the 1024-byte period (the tile starts on one).
        a[r * 32 + ((lane / 4) ^ (r % 8)) * 4 + lane % 4] = word;
      }
      FenceSharedForAsync();  // the generic proxy's writes, before the tensor cores read them
      __syncwarp();
      if (lane == 0) sm.full[ring.stage].Arrive();
    }
  }
}

// Split-K: the unit's partial sums to scratch memory (coalesced: element i of the consumer's
// 128 threads together); the consumer that finishes a column block last adds every split's
// partials in split order. Memory order as gemm_sm90's GemmSplitKHandOver: partials fenced
// before the counter's atomic, the last one fences before reading them through L2. Returns
// whether this consumer runs the epilogue of its 64 columns.
template <class S>
__device__ __forceinline__ bool SkinnyHandOver(const SkinnySharedMemory<S>& sm, float (&d)[S::kPerThread], int unit, int tile, int consumer,
                                               int local, unsigned* __restrict__ counters, float* __restrict__ partials) {
  constexpr int kPerThread = S::kPerThread;
  float* mine = partials + ((long long)unit * S::kConsumers + consumer) * kPerThread * 128 + local;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) __stcg(mine + i * 128, d[i]);
  __threadfence();
  NamedBarrierSync(1 + consumer, 128);
  if (local == 0) {
    const int slot = tile * S::kConsumers + consumer;
    const bool last = atomicAdd(counters + slot, 1u) == S::kSplits - 1;
    if (last) counters[slot] = 0;  // zero again for the next launch
    sm.finishes[consumer] = last;
  }
  NamedBarrierSync(1 + consumer, 128);
  if (!sm.finishes[consumer]) return false;
  __threadfence();
  const float* first = partials + ((long long)tile * S::kSplits * S::kConsumers + consumer) * kPerThread * 128 + local;
  // Every split's loads in flight at once (the rule keeps kSplits × kPerThread within the
  // registers): the sum is on the kernel's critical path, after the last unit's main loop.
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) d[i] = __ldcg(first + i * 128);
#pragma unroll
  for (int s = 1; s < S::kSplits; ++s) {
    const float* part = first + (long long)s * S::kConsumers * kPerThread * 128;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) d[i] += __ldcg(part + i * 128);
  }
  return true;
}

// Split-K in a cluster (kInCluster): every thread sends each accumulator of a row below M
// (HasRows) to the slots of the CTA that sums it, rank SentBefore(i) % kSplits (its own
// included: no accumulator is read under a branch on the rank, which made ptxas serialize the
// wgmmas), by st.async with its bytes counted on that CTA's `gathered` barrier: no fence, no
// counter. Each CTA then sums its share over the splits in split order (as SkinnyHandOver: the
// same sums, bit for bit) and runs their epilogue; at one row two accumulators of a thread are
// sent, and two CTAs of the cluster sum them. A CTA that owns some waits for all their bytes,
// so none exits while a peer may still store into it; one that owns none receives nothing. The
// cluster barrier every thread arrived at first (GemmSkinnySm90) is awaited before the first
// send: every CTA's barriers are initialised.
template <class S, class Epilogue>
__device__ __forceinline__ void SkinnyClusterHandOver(const SkinnySharedMemory<S>& sm, const float (&d)[S::kPerThread],
                                                      const Epilogue& epilogue, int tile, int consumer, int local) {
  using Index = typename S::Index;
  constexpr int kSent = S::SentBefore(S::kPerThread);
  const int rank = (int)tf_cluster_rank();
  const int owned = rank < kSent ? (kSent - rank + S::kSplits - 1) / S::kSplits : 0;
  Barrier& gathered = sm.gathered[consumer];
  if (local == 0 && owned > 0) gathered.ArriveExpectingBytes(S::kSplits * owned * 128 * 4);
  tf_cluster_wait();
  float* slots = sm.slots + consumer * S::kOwned * 128 + local;  // [split][consumer][kOwned][128]
  constexpr int kSplitStride = S::kConsumers * S::kOwned * 128;
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i)
    if (S::HasRows(i))
      StoreAsyncInCluster(slots + rank * kSplitStride + S::SentBefore(i) / S::kSplits * 128, d[i], gathered,
                          S::SentBefore(i) % S::kSplits);
  if (owned == 0) return;
  gathered.WaitForCluster(0);
  const int warp = local / 32, lane = local % 32;
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i) {  // d[i] is Dᵀ's (warp*16 + lane/4 + 8h, 8j + (lane%4)*2 + e), i = j*4 + h*2 + e
    if (!S::HasRows(i) || S::SentBefore(i) % S::kSplits != rank) continue;
    const float* sent = slots + S::SentBefore(i) / S::kSplits * 128;
    float sum = sent[0];
#pragma unroll
    for (int split = 1; split < S::kSplits; ++split) sum += sent[split * kSplitStride];
    const int col = tile * S::kBN + consumer * 64 + warp * 16 + lane / 4 + 8 * (i / 2 % 2), row = 8 * (i / 4) + (lane % 4) * 2 + i % 2;
    if (row < S::kRows && col < S::kN) epilogue((Index)row, col, sum, 0.0f);
  }
}

// The epilogue's loads of the elements this thread will store (Epilogue::Prefetch), asked of
// L1 as the consumer starts, after the wait for the grid ahead: at a decode step's few rows the
// epilogue is on the kernel's critical path, and its loads (a bias no kernel has touched
// since the last step, in DRAM; a residual in L2) were a memory round trip after the sums.
// Only the CTA's first unit's (a persistent grid's later units find their lines as they come);
// in a cluster, only the share this CTA sums (SkinnyClusterHandOver's owners); split through
// memory, every unit's, as the last one to finish is not known in advance.
template <class S, class Epilogue>
__device__ __forceinline__ void SkinnyPrefetchEpilogue(const Epilogue& epilogue, int consumer) {
  if (blockIdx.x >= S::kUnits) return;
  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;
  const int tile = blockIdx.x / S::kSplits;
  int rank = 0;
  if constexpr (S::kInCluster) rank = (int)tf_cluster_rank();
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i) {  // d[i]'s element, as the consumer's epilogue maps it
    if (!S::HasRows(i) || (S::kInCluster && S::SentBefore(i) % S::kSplits != rank)) continue;
    const int col = tile * S::kBN + consumer * 64 + warp * 16 + lane / 4 + 8 * (i / 2 % 2), row = 8 * (i / 4) + (lane % 4) * 2 + i % 2;
    if (row < S::kRows && col < S::kN) epilogue.Prefetch((typename S::Index)row, col);
  }
}

template <class S, class Epilogue>
__device__ __forceinline__ void SkinnyConsumer(const SkinnySharedMemory<S>& sm, const Epilogue& epilogue, int consumer,
                                               unsigned* __restrict__ counters, float* __restrict__ partials) {
  using Mma = tf::Mma<typename S::Element>;
  using Index = typename S::Index;
  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;
  Pipeline<S::kStages> ring;
  float d[S::kPerThread];
  for (int unit = blockIdx.x; unit < S::kUnits; unit += gridDim.x) {
    int tile, k_begin, k_end;
    SkinnyUnitRange<S>(unit, tile, k_begin, k_end);
    int previous = -1;  // the slot still read by the step before, handed back once it retires
    for (int ks = k_begin; ks < k_end; ++ks, ring.Advance()) {
      sm.full[ring.stage].Wait(ring.phase);
      const auto* b = sm.tile_b + ring.stage * S::kBN * S::kBK + consumer * 64 * S::kBK;
      const auto* a = sm.tile_a + ring.stage * S::kMP * S::kBK;
      Warpgroup::Fence();
#pragma unroll
      for (int kk = 0; kk < S::kBK / Mma::kK; ++kk)
        Mma::template Shared<S::kMP, false, !S::kBKMajor>(
            d, S::kBKMajor ? SharedMatrix::KMajor(b + kk * Mma::kK) : SharedMatrix::MnMajor(b + kk * Mma::kK * 64, S::kBK * 128),
            SharedMatrix::KMajor(a + kk * Mma::kK), ks > k_begin || kk > 0);
      Warpgroup::Commit();
      Warpgroup::Wait<1>();
      if (previous >= 0 && local == 0) sm.empty[previous].Arrive();
      previous = ring.stage;
    }
    Warpgroup::Wait<0>();
    if (local == 0) sm.empty[previous].Arrive();
    if constexpr (S::kInCluster) {  // the sums and the epilogue of this CTA's share
      SkinnyClusterHandOver(sm, d, epilogue, tile, consumer, local);
      continue;
    } else if constexpr (S::kSplits > 1) {
      if (!SkinnyHandOver(sm, d, unit, tile, consumer, local, counters, partials)) continue;
    }
    // d[j*4 + h*2 + e] is Dᵀ's (warp*16 + lane/4 + 8h, 8j + (lane%4)*2 + e): column n, row m.
    const int col_base = tile * S::kBN + consumer * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < S::kMP / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = col_base + 8 * h, row = 8 * j + (lane % 4) * 2 + e;
          if (row < S::kRows && col < S::kN) epilogue((Index)row, col, d[j * 4 + h * 2 + e], 0.0f);
        }
  }
}

// The kernel body (launched with 128 × (1 + kBN / 64) threads, at most one CTA an SM, a
// persistent grid of at most kUnits CTAs; kInCluster: kUnits CTAs in clusters of kSplits). Epilogue:
//   float operator()(Index row, int col, float acc, float loaded) const
// writes every store of element (row, col) itself (there is no staged store; `loaded` is 0);
//   void Prefetch(Index row, int col) const
// asks L1 for the lines its loads of that element read.
template <class Config, class Epilogue>
__device__ __forceinline__ void GemmSkinnySm90(const TensorMap& map_a, const TensorMap& map_b, const Epilogue& epilogue,
                                               unsigned* __restrict__ counters, float* __restrict__ partials,
                                               const SkinnyNorm<typename Config::Element> norm = {}) {
  using S = SkinnyShape<Config>;
  SkinnySharedMemory<S> sm;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      sm.full[s].Init(S::kNormed ? 2 : 1);  // (kNormA: the norm's warp arrives too)
      sm.empty[s].Init(S::kConsumers);
    }
    if constexpr (S::kInCluster)
      for (int c = 0; c < S::kConsumers; ++c) sm.gathered[c].Init(1);  // its consumer's announcement
    FenceBarrierInit();
  }
  __syncthreads();
  // Every thread arrives (relaxed: the barriers' initialisation is released by the fence
  // above); the consumers wait before their first send (SkinnyClusterHandOver).
  if constexpr (S::kInCluster) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    if constexpr (S::kNormed)
      if (threadIdx.x / 32 == 1) SkinnyNormedA<S>(sm, norm);
    SkinnyProducer<S>(sm, map_a, map_b);  // awaits the grid ahead after loading what of B it may
    return;
  }
  tf_await_prior_grid();  // before the partials and the epilogue touch what the grid ahead may use
  if constexpr (Config::kPrefetchEpilogue != 0) SkinnyPrefetchEpilogue<S>(epilogue, warpgroup - 1);
  SkinnyConsumer<S>(sm, epilogue, warpgroup - 1, counters, partials);
}

}  // namespace tf

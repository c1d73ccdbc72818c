// Two skinny products in one kernel, the second reading the first's epilogue as its A: a
// decode step's MLP, y = (gelu(LN(x)·W1 + b1))·W2 + b2 + x, at a few rows. As two skinny
// kernels (gemm_skinny_sm90.cuh) each is a launch and a dependency edge on the step's critical
// path (GPT-2 small on an H100: 4.5 µs of the step for the first, 3.9 for the second, though
// their weights cross in ~1.4 µs each, loaded before the kernel ahead ends).
//
// CTA c takes 64 of the first product's N1 columns over all of K1 (no split), so it holds the
// whole of h[:, 64c, 64c+64) = epilogue1(A·W1) after its main loop: exactly the 64 rows of K2
// that the second product's partial sum over them needs, h's tile written into shared memory
// as that product's A (128-byte swizzle, rows past M zero). Then the CTA multiplies it by W2's
// 64 rows × N2 (its N2 / 64 tiles side by side in registers) and writes those partial sums
// to scratch memory. Every CTA's partials are summed after a grid-wide barrier, each CTA a
// share of the outputs, in CTA order (the result does not depend on timing), and epilogue2
// runs on the sums.
//
//   warpgroup 0: thread 0 loads every tile of W1 and W2 (weights: before the grid ahead ends,
//                as kBBeforeWait), then A's tiles (or warp 1 writes them normed: kNormA)
//   warpgroup 1: the first product's K steps, epilogue1 into h's tile, the second product,
//                the partials, the barrier, its share of the sums and epilogue2
//
// The grid barrier needs every CTA resident: the grid is at most one CTA an SM, and a CTA
// that waits there has executed launch_dependents (tf_await_prior_grid), so the kernel behind,
// launched once every CTA has, takes no SM a CTA of this grid still needs. Its counters (the
// arrivals, then the departures) are zero again when the last CTA departs: scratch memory is
// shared by the model's kernels, each finding its counters zero.
//
// The pair form (kPair): a cluster of two CTAs takes the 64 columns, each CTA half of K1's steps
// and half of N2's tiles, so that each holds half the weights (GPT-2 small: 96 KB, not 192) and
// fits an SM beside a CTA of the kernel ahead, where its weights cross while that kernel runs.
// (The whole form's 225 KB CTAs could not: 11.5 µs a layer against the two kernels' 8.0, H100,
// 2026-12-06.) After the first product each CTA sends its partial sums to the other by st.async,
// and both add the two in the same order (own + other's is other's + own, bit for bit), so
// both hold the same h tile; each then multiplies it by its half of W2's tiles.
//
// Config is the skinny skeleton's for the first product (kSplits 1, kStages the K steps a CTA
// takes: every tile of its W1 resident; kBN 64) with kN2 (N2), kB2KMajor (W2 as [N2][K2]; else
// [K2][N2]) and kPair. Epilogue1 returns element (row, col)'s value of h (its store staged);
// Epilogue2 is the skinny skeleton's, Prefetch included.
#pragma once

#include "gemm_skinny_sm90.cuh"

namespace tf {

template <class Config>
struct SkinnyChainShape : SkinnyShape<Config> {
  using Base = SkinnyShape<Config>;
  static constexpr bool kPaired = Config::kPair != 0;
  static constexpr int kRanks = kPaired ? 2 : 1;  // CTAs a 64-column block
  static_assert(!kPaired || (Base::kKSteps % 2 == 0 && Config::kN2 % 128 == 0), "the chain's pair: K1's steps and N2's tiles halved evenly");
  static constexpr int kCtaSteps = Base::kKSteps / kRanks;  // K1's steps a CTA takes, from rank · kCtaSteps
  static_assert(Config::kSplits == 1 && Config::kBN == 64 && Config::kStages == kCtaSteps && Config::kSplitsInCluster == 0,
                "the chain's first product: every K step a CTA takes resident, 64 columns a block, no split");
  static_assert(Config::kN % 64 == 0, "the chain's N1: whole tiles of 64 (the second product's K steps)");
  static_assert(Config::kN2 % 64 == 0 && Config::kN2 / 64 <= 16, "the chain's N2: 64 to 1024 columns in whole tiles");
  static constexpr int kBlocks = Config::kN / 64;                // 64-column blocks of N1: the partials summed
  static constexpr int kTiles2 = Config::kN2 / 64 / kRanks;      // N2's tiles a CTA multiplies, from rank · kTiles2
  static constexpr int kSent = Base::SentBefore(Base::kPerThread);  // a thread's sums of rows below M (the pair's exchange)
  static constexpr bool kB2KMajor = Config::kB2KMajor != 0;
};

// A CTA's place: its 64-column block of N1 and its rank in the pair, the cluster's (0 in the
// whole form).
template <class S>
__device__ __forceinline__ int ChainBlock() { return blockIdx.x / S::kRanks; }
template <class S>
__device__ __forceinline__ int ChainRank() { return S::kPaired ? (int)tf_cluster_rank() : 0; }

// The chain's shared memory past the skinny skeleton's: W2's tiles, h's tile and the barrier
// W2's loads complete on (1024-byte aligned, the swizzle period), then the pair's exchange (the
// other CTA's sums; counted on the skeleton's gathered[0]).
template <class S>
struct SkinnyChainSharedMemory {
  using Storage = typename S::Element::Storage;
  Storage* tile_b2;  // [kTiles2][64][kBK] (K-major) or [kTiles2][kBK][64] (MN-major), 128-byte swizzle
  Storage* tile_h;   // [kMP][kBK], 128-byte swizzle: the second product's A
  Barrier* full_b2;
  float* exchange;   // kPaired: [kSent][128], the other CTA's sums of rows below M

  __device__ __forceinline__ explicit SkinnyChainSharedMemory(const SkinnySharedMemory<S>& sm) {
    const unsigned address = SharedAddress(sm.gathered + 2);
    unsigned char* after = reinterpret_cast<unsigned char*>(sm.gathered + 2) + ((1024 - (address & 1023)) & 1023);
    tile_b2 = (Storage*)after;
    tile_h = tile_b2 + S::kTiles2 * 64 * S::kBK;
    full_b2 = (Barrier*)(tile_h + S::kMP * S::kBK);
    exchange = (float*)(full_b2 + 1);
  }
};

// Thread 0 of the producer: W1's tiles of the CTA's 64 columns (its K steps, slot s step
// k_begin + s) and W2's 64 rows of K2 (the same 64 of h; its N2 tiles), all before the wait
// (weights: no kernel of the model writes them), then A's tiles.
template <class S>
__device__ __forceinline__ void SkinnyChainProducer(const SkinnySharedMemory<S>& sm, const SkinnyChainSharedMemory<S>& chain,
                                                    const TensorMap& map_a, const TensorMap& map_b, const TensorMap& map_b2) {
  if (threadIdx.x != 0) return;
  const int tile = ChainBlock<S>(), rank = ChainRank<S>(), k_begin = rank * S::kCtaSteps;
  for (int s = 0; s < S::kCtaSteps; ++s) {
    sm.full[s].ArriveExpectingBytes(S::kStageBytes);
    SkinnyLoadB<S>(sm, map_b, s, tile, k_begin + s);
  }
  constexpr unsigned kB2Bytes = S::kTiles2 * 64 * S::kBK * S::Element::kBytes;
  chain.full_b2->ArriveExpectingBytes(kB2Bytes);
  for (int t = 0; t < S::kTiles2; ++t) {  // rows k = 64·tile of K2, columns n = 64·(rank·kTiles2 + t) of N2
    const int n = (rank * S::kTiles2 + t) * 64, k = tile * S::kBK;
    TmaLoad3d(chain.tile_b2 + t * 64 * S::kBK, map_b2, S::kB2KMajor ? k : n, S::kB2KMajor ? n : k, 0, *chain.full_b2);
  }
  tf_await_prior_grid();  // A may come from the grid ahead
  if constexpr (!S::kNormed)
    for (int s = 0; s < S::kCtaSteps; ++s) TmaLoad3d(sm.tile_a + s * S::kMP * S::kBK, map_a, (k_begin + s) * S::kBK, 0, 0, sm.full[s]);
}

// The pair's exchange (kPaired): each thread sends its sums of rows below M (HasRows) to the
// same thread's slots in the other CTA, counted on that CTA's gathered[0], then adds the
// other's to its own once they have landed. Both CTAs then hold A·W1's full sums, the same bits
// (a + b = b + a). Each waits for the other's bytes before it goes on, so neither exits while
// the other may still store into it. The cluster barrier every thread arrived at after the
// barriers' initialisation (GemmSkinnyChainSm90) is awaited before the first send.
template <class S>
__device__ __forceinline__ void ChainExchange(const SkinnySharedMemory<S>& sm, const SkinnyChainSharedMemory<S>& chain,
                                              float (&d)[S::kPerThread], int local) {
  Barrier& gathered = sm.gathered[0];
  if (local == 0) gathered.ArriveExpectingBytes(S::kSent * 128 * 4);
  tf_cluster_wait();
  const unsigned other = (unsigned)ChainRank<S>() ^ 1u;
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i)
    if (S::HasRows(i)) StoreAsyncInCluster(chain.exchange + S::SentBefore(i) * 128 + local, d[i], gathered, other);
  gathered.WaitForCluster(0);
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i)
    if (S::HasRows(i)) d[i] += chain.exchange[S::SentBefore(i) * 128 + local];
}

// Element (row, k) of h's tile, as the norm's warp writes A's (128-byte rows, 16-byte chunks
// XOR-swizzled by the row within the 1024-byte period).
template <class S>
__device__ __forceinline__ void SkinnyChainStoreH(const SkinnyChainSharedMemory<S>& chain, int row, int k, unsigned short bits) {
  unsigned short* h = reinterpret_cast<unsigned short*>(chain.tile_h);
  h[row * 64 + (((k / 8) ^ (row % 8)) * 8) + k % 8] = bits;
}

// The grid-wide barrier (see the header): thread `local` 0 of each CTA arrives and waits until
// every CTA has; counters[0] counts arrivals, counters[1] departures (ChainDepart).
__device__ __forceinline__ void ChainGridBarrier(unsigned* counters, int local) {
  __threadfence();  // this CTA's partials, before its arrival
  NamedBarrierSync(1, 128);
  if (local == 0) {
    atomicAdd(counters, 1u);
    unsigned arrived = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(arrived) : "l"(counters) : "memory");
    } while (arrived < gridDim.x);
  }
  NamedBarrierSync(1, 128);
}

// After the barrier: the last CTA to depart zeroes both counters (none still waits on them).
__device__ __forceinline__ void ChainDepart(unsigned* counters, int local) {
  if (local != 0) return;
  if (atomicAdd(counters + 1, 1u) == gridDim.x - 1) {
    counters[0] = 0;
    counters[1] = 0;
  }
}

template <class S, class Epilogue1, class Epilogue2>
__device__ __forceinline__ void SkinnyChainConsumer(const SkinnySharedMemory<S>& sm, const SkinnyChainSharedMemory<S>& chain,
                                                    const Epilogue1& epilogue1, const Epilogue2& epilogue2, unsigned* __restrict__ counters,
                                                    float* __restrict__ partials) {
  using Mma = tf::Mma<typename S::Element>;
  using Index = typename S::Index;
  const int local = threadIdx.x % 128, warp = local / 32, lane = local % 32;
  const int tile = ChainBlock<S>(), rank = ChainRank<S>();
  // The first product: Dᵀ = W1ᵀ·Aᵀ over the CTA's K steps, each in its own slot.
  float d[S::kPerThread];
  for (int s = 0; s < S::kCtaSteps; ++s) {
    sm.full[s].Wait(0);
    const auto* b = sm.tile_b + s * S::kBN * S::kBK;
    const auto* a = sm.tile_a + s * S::kMP * S::kBK;
    Warpgroup::Fence();
#pragma unroll
    for (int kk = 0; kk < S::kBK / Mma::kK; ++kk)
      Mma::template Shared<S::kMP, false, !S::kBKMajor>(
          d, S::kBKMajor ? SharedMatrix::KMajor(b + kk * Mma::kK) : SharedMatrix::MnMajor(b + kk * Mma::kK * 64, S::kBK * 128),
          SharedMatrix::KMajor(a + kk * Mma::kK), s > 0 || kk > 0);
    Warpgroup::Commit();
    Warpgroup::Wait<1>();
  }
  Warpgroup::Wait<0>();
  if constexpr (S::kPaired) ChainExchange<S>(sm, chain, d, local);
  // h = epilogue1 of each element into h's tile, rows past M zero: d[j*4 + h*2 + e] is Dᵀ's
  // (column warp*16 + lane/4 + 8h of the tile, row 8j + (lane%4)*2 + e).
#pragma unroll
  for (int i = 0; i < S::kPerThread; ++i) {
    const int k = warp * 16 + lane / 4 + 8 * (i / 2 % 2), row = 8 * (i / 4) + (lane % 4) * 2 + i % 2;
    const int col = tile * 64 + k;
    const float value = row < S::kRows ? epilogue1((Index)row, col, d[i], 0.0f) : 0.0f;
    SkinnyChainStoreH<S>(chain, row, k, row < S::kRows ? (unsigned short)(S::Element::Pack2(value, 0.0f) & 0xffffu) : (unsigned short)0);
  }
  FenceSharedForAsync();  // the generic proxy's writes, before the tensor cores read them
  NamedBarrierSync(1, 128);
  // The second product over h's 64 rows of K2: Dᵀ = W2ᵀ·hᵀ, N2's tiles side by side.
  chain.full_b2->Wait(0);
  float d2[S::kTiles2][S::kPerThread];
  Warpgroup::Fence();
#pragma unroll
  for (int t = 0; t < S::kTiles2; ++t) {
    const auto* b = chain.tile_b2 + t * 64 * S::kBK;
#pragma unroll
    for (int kk = 0; kk < S::kBK / Mma::kK; ++kk)
      Mma::template Shared<S::kMP, false, !S::kB2KMajor>(
          d2[t], S::kB2KMajor ? SharedMatrix::KMajor(b + kk * Mma::kK) : SharedMatrix::MnMajor(b + kk * Mma::kK * 64, S::kBK * 128),
          SharedMatrix::KMajor(chain.tile_h + kk * Mma::kK), kk > 0);
  }
  Warpgroup::Commit();
  Warpgroup::Wait<0>();
  // The block's partials: [block][row][N2], rows below M (a pair's CTAs their halves of N2).
  float* mine = partials + (long long)tile * S::kRows * S::kN2 + rank * S::kTiles2 * 64;
#pragma unroll
  for (int t = 0; t < S::kTiles2; ++t)
#pragma unroll
    for (int i = 0; i < S::kPerThread; ++i) {
      const int col = t * 64 + warp * 16 + lane / 4 + 8 * (i / 2 % 2), row = 8 * (i / 4) + (lane % 4) * 2 + i % 2;
      if (S::HasRows(i) && row < S::kRows) __stcg(mine + row * S::kN2 + col, d2[t][i]);
    }
  // This CTA's share of the outputs, each summed over the blocks in order after the barrier
  // (epilogue2's loads asked of L1 before it).
  constexpr int kOutputs = S::kRows * S::kN2;
  const int share = (kOutputs + (int)gridDim.x - 1) / (int)gridDim.x;
  const int first = (int)blockIdx.x * share + local, end = min(kOutputs, ((int)blockIdx.x + 1) * share);
  for (int e = first; e < end; e += 128) epilogue2.Prefetch((Index)(e / S::kN2), e % S::kN2);
  ChainGridBarrier(counters, local);
  for (int e = first; e < end; e += 128) {
    const int row = e / S::kN2, col = e % S::kN2;
    float sum = 0.0f;
#pragma unroll 8
    for (int c = 0; c < S::kBlocks; ++c) sum += __ldcg(partials + ((long long)c * S::kRows + row) * S::kN2 + col);
    epilogue2((Index)row, col, sum, 0.0f);
  }
  ChainDepart(counters, local);
}

// The kernel body: launched with 256 threads, N1 / 64 CTAs (at most one an SM), or twice as
// many in clusters of two (kPair).
template <class Config, class Epilogue1, class Epilogue2>
__device__ __forceinline__ void GemmSkinnyChainSm90(const TensorMap& map_a, const TensorMap& map_b, const TensorMap& map_b2,
                                                    const Epilogue1& epilogue1, const Epilogue2& epilogue2, unsigned* __restrict__ counters,
                                                    float* __restrict__ partials, const SkinnyNorm<typename Config::Element> norm = {}) {
  using S = SkinnyChainShape<Config>;
  SkinnySharedMemory<S> sm;
  const SkinnyChainSharedMemory<S> chain(sm);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      sm.full[s].Init(S::kNormed ? 2 : 1);  // (kNormA: the norm's warp arrives too)
      sm.empty[s].Init(1);
    }
    chain.full_b2->Init(1);
    if constexpr (S::kPaired) sm.gathered[0].Init(1);  // the exchange: this CTA's announcement
    FenceBarrierInit();
  }
  __syncthreads();
  // Every thread arrives (relaxed: the initialisation is released by the fence above); the
  // consumers wait before the exchange's first send (ChainExchange).
  if constexpr (S::kPaired) asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  if (threadIdx.x / 128 == 0) {
    if constexpr (S::kNormed)
      if (threadIdx.x / 32 == 1) SkinnyNormedA<S>(sm, norm, ChainRank<S>() * S::kCtaSteps, (ChainRank<S>() + 1) * S::kCtaSteps);
    SkinnyChainProducer<S>(sm, chain, map_a, map_b, map_b2);
    return;
  }
  tf_await_prior_grid();  // before the partials and the epilogues touch what the grid ahead may use
  SkinnyChainConsumer<S>(sm, chain, epilogue1, epilogue2, counters, partials);
}

}  // namespace tf

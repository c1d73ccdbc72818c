// A decode attention's output projection in the attention's own kernel (Config::kProjection):
// y = o · W + epilogue, where o is one token's heads side by side ([heads · dv]) and W the
// attention's output weight. As its own kernel the projection is a launch and a dependency edge
// on a decode step's critical path (GPT-2 small on an H100: ~2.5 µs a layer for 1.2 MB of W).
//
//   cluster  one batch entry's heads, a CTA each (kHeads CTAs; rank = head)
//   before   the CTA's 64 columns of W (all of K) loaded into shared memory by TMA before the
//            wait for the grid ahead: W is a weight no kernel of the model writes
//   after    the attention as AttentionDecode computes it; each head's row, rounded as the
//            output stores it, sent to every CTA of the cluster (st.async, its bytes counted
//            on that CTA's barrier); each CTA then multiplies all heads' rows by its columns
//            of W and runs the product's epilogue on them (a bias, the residual)
//
// The generated part (codegen/cuda/cuda_attention_emitter.cc) adds kProjection, kHeads and
// kWKMajor (W as [N][K]; else [K][N]) to the decode Config, the product's Epilogue functor
// (the skinny template's: operator()(row, col, acc, 0) and Prefetch(row, col)) and calls
// DecodeProjectionStart first, DecodeProjection last. The attention's own output is not stored.
#pragma once

#include "tilefuse_tiles.cuh"

namespace tf {

// Dynamic shared memory (the host's DecodeProjectionSharedBytes): W's columns as kK / 64 boxes
// of 64 × 64 (no swizzle: MN-major [k][n], K-major [n][k]), every head's row, the K slices'
// partial sums and two barriers.
template <class Config>
struct DecodeProjectionShared {
  using Storage = typename Config::Element::Storage;
  static constexpr int kK = Config::kHeads * Config::kDV;
  Storage* w;
  float* heads;    // [kK]: heads side by side, as the output rounds them
  float* partial;  // [4][64]
  Barrier* w_full;
  Barrier* gathered;

  __device__ __forceinline__ DecodeProjectionShared() {
    extern __shared__ unsigned char tf_shared_raw[];
    unsigned char* base = tf_shared_raw + ((1024 - (SharedAddress(tf_shared_raw) & 1023)) & 1023);
    w = (Storage*)base;
    heads = (float*)(w + kK * 64);
    partial = heads + kK;
    w_full = (Barrier*)(partial + 4 * 64);
    gathered = w_full + 1;
  }
};

// First, before the wait for the grid ahead: the barriers, W's columns of this CTA (rank r:
// columns 64r..64r+63), and every thread's arrival at the cluster barrier that the sends await
// (every CTA's barriers initialised before any stores into it).
template <class Config>
__device__ __forceinline__ void DecodeProjectionStart(const TensorMap& map_w) {
  static_assert(Config::kHeads >= 2 && Config::kHeads <= 16, "kHeads: a cluster of 2 to 16 CTAs");
  static_assert(Config::kWarps == 8 && Config::kSplit == 0, "the projection: 8 warps, no split over the keys");
  using S = DecodeProjectionShared<Config>;
  static_assert(S::kK % 64 == 0, "K in whole boxes of 64");
  const S sm;
  if (threadIdx.x == 0) {
    sm.w_full->Init(1);
    sm.gathered->Init(1);
    FenceBarrierInit();
    sm.w_full->ArriveExpectingBytes(S::kK * 64 * sizeof(typename S::Storage));
    const int n = (int)tf_cluster_rank() * 64;
    for (int box = 0; box < S::kK / 64; ++box)
      TmaLoad3d(sm.w + box * 64 * 64, map_w, Config::kWKMajor ? 64 * box : n, Config::kWKMajor ? n : 64 * box, 0, *sm.w_full);
    sm.gathered->ArriveExpectingBytes(S::kK * 4);  // every head's row, from the cluster
  }
  __syncthreads();
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}

// Column `column` of this head's row (as the output would store it) into every CTA of the
// cluster, at the head's place. The caller has awaited the cluster barrier of the start.
template <class Config>
__device__ __forceinline__ void DecodeProjectionSend(int column, typename Config::Element::Storage value) {
  const DecodeProjectionShared<Config> sm;
  const float v = Config::Element::ToFloat(value);
  const unsigned head = tf_cluster_rank();
#pragma unroll 4
  for (unsigned rank = 0; rank < Config::kHeads; ++rank)
    StoreAsyncInCluster(sm.heads + head * Config::kDV + column, v, *sm.gathered, rank);
}

// Last, every thread: once every head's row and W have landed, this CTA's 64 columns of the
// product for batch entry `row`, and their epilogue. MN-major W: 4 slices of K by 64 columns,
// a thread each; K-major: a warp per 8 columns, its lanes over K, summed by shuffles.
template <class Config, class Epilogue>
__device__ __forceinline__ void DecodeProjection(const Epilogue& epilogue, int row) {
  using S = DecodeProjectionShared<Config>;
  const S sm;
  sm.gathered->WaitForCluster(0);
  sm.w_full->Wait(0);
  const int t = threadIdx.x;
  if constexpr (Config::kWKMajor == 0) {
    const int column = t % 64, slice = t / 64;
    constexpr int kPer = S::kK / 4;
    float acc = 0.0f;
#pragma unroll 8
    for (int k = slice * kPer; k < (slice + 1) * kPer; ++k)
      acc += sm.heads[k] * Config::Element::ToFloat(sm.w[(k / 64) * 4096 + (k % 64) * 64 + column]);
    sm.partial[slice * 64 + column] = acc;
  } else {
    const int warp = t / 32, lane = t % 32;
#pragma unroll 1
    for (int c = 0; c < 8; ++c) {
      const int column = warp * 8 + c;
      float acc = 0.0f;
#pragma unroll 4
      for (int k = lane; k < S::kK; k += 32) acc += sm.heads[k] * Config::Element::ToFloat(sm.w[(k / 64) * 4096 + column * 64 + k % 64]);
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
      if (lane == 0) sm.partial[column] = acc;
    }
  }
  __syncthreads();
  if (t < 64) {
    const float sum = Config::kWKMajor == 0 ? (sm.partial[t] + sm.partial[64 + t]) + (sm.partial[128 + t] + sm.partial[192 + t]) : sm.partial[t];
    epilogue((typename Config::Index)row, (int)tf_cluster_rank() * 64 + t, sum, 0.0f);
  }
}

}  // namespace tf

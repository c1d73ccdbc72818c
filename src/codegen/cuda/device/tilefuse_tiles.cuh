// tilefuse tile library: the Hopper building blocks the compute-bound templates (GEMM,
// attention forward and backward) are written with. NVRTC gets it as an in-memory header beside
// tilefuse_device.cuh; generated template kernels include both.
//
//   TensorMap          a TMA descriptor passed by value as a __grid_constant__ parameter
//   Barrier            an mbarrier in shared memory: arrive, expect bytes, wait on a phase
//   Pipeline           the stage/phase bookkeeping of a multi-stage producer/consumer ring
//   TmaLoad3d/5d       a tile from global memory into shared memory, completing on a barrier
//   TmaLoad3dMulticast the same tile into every CTA of a cluster (GEMM's shared B tiles)
//   TmaLoadIm2col4d    an implicit GEMM's A tile: im2col of an NHWC activation, by TMA
//   TmaStore3d         a swizzled shared-memory tile to global memory, asynchronously
//   BulkLoad           a contiguous run of bytes into shared memory (1-D bulk copy)
//   BulkReduceAddF32   f32 values in shared memory added into global memory (bulk reduce)
//   LoadMatrix8x8x4    ldmatrix: four 8x8 16-bit matrices from shared memory into registers
//   AlignedDynamicShared  the dynamic shared memory's first 1024-byte boundary
//   SharedMatrix       wgmma shared-memory descriptors for 128-byte swizzled tiles, K-major
//                      and MN-major
//   Warpgroup          fence / commit / wait around asynchronous wgmma, register reallocation
//   TileScheduler      persistent CTAs walking output tiles in grouped (L2-friendly) order
//
//   QuadMax/QuadSum    a row's reduction across the four lanes that hold it in a wgmma
//                      accumulator fragment (attention's online softmax)
//   Exp2, Exp2Poly     the online softmax's exponent (tile_softmax.cuh)
//
// Everything lives in namespace tf beside the device library, and redeclares none of
// CUDA's names. The wgmma instruction itself, typed by the element, is tile_mma.cuh's Mma.
#pragma once

namespace tf {

#define TF_TILE static __device__ __forceinline__

// ---- TMA descriptors ----
// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

TF_TILE unsigned SharedAddress(const void* p) { return tf_shared_address(p); }  // the device library's

// ---- mbarrier ----
struct Barrier {
  unsigned long long word;

  __device__ __forceinline__ void Init(unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SharedAddress(&word)), "r"(arrivals));
  }
  // One arrival that also announces `bytes` of asynchronous copies completing on this barrier.
  __device__ __forceinline__ void ArriveExpectingBytes(unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SharedAddress(&word)), "r"(bytes) : "memory");
  }
  __device__ __forceinline__ void Arrive() {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SharedAddress(&word)) : "memory");
  }
  // One arrival, once this thread's cp.async copies so far have landed (counted in Init's
  // arrivals: .noinc).
  __device__ __forceinline__ void ArriveOnCopiesAsync() {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(SharedAddress(&word)) : "memory");
  }
  // One arrival on this barrier's twin in CTA `rank` of the cluster (the same shared-memory
  // offset there; this CTA's own with its own rank). The default CTA-scope release, as
  // CUTLASS's cluster barriers arrive: what it orders is a slot's wgmma reads, complete
  // before the arrival. A cluster-scope release compiles to MEMBAR.ALL.GPU before every
  // arrival, and GEMMs whose consumers handed slots back that way took twice as long
  // (H100, 2026-11-28).
  __device__ __forceinline__ void ArriveInCluster(unsigned rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(SharedAddress(&word)),
        "r"(rank)
        : "memory");
  }
  // Waits until the phase with parity `phase` has completed, with what other CTAs of the
  // cluster stored into this one's shared memory counted on it (StoreAsyncInCluster) visible.
  __device__ __forceinline__ void WaitForCluster(unsigned phase) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "TF_WAIT_CLUSTER_%=:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra TF_WAIT_CLUSTER_%=;\n"
        "}\n" ::"r"(SharedAddress(&word)),
        "r"(phase)
        : "memory");
  }
  // Waits until the phase with parity `phase` has completed.
  __device__ __forceinline__ void Wait(unsigned phase) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "TF_WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra TF_WAIT_%=;\n"
        "}\n" ::"r"(SharedAddress(&word)),
        "r"(phase)
        : "memory");
  }
};

// Makes barrier initialisation visible to the asynchronous (TMA) proxy.
TF_TILE void FenceBarrierInit() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// Stores `value` at the twin of `shared` in CTA `rank` of the cluster (the same offset there),
// its 4 bytes counted on the twin of `bar` (st.async: no fence, no arrival; the receiver has
// announced the bytes it awaits and waits with Barrier::WaitForCluster).
TF_TILE void StoreAsyncInCluster(const float* shared, float value, const Barrier& bar, unsigned rank) {
  asm volatile(
      "{\n"
      ".reg .b32 slot, remote_bar;\n"
      "mapa.shared::cluster.u32 slot, %0, %2;\n"
      "mapa.shared::cluster.u32 remote_bar, %1, %2;\n"
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [slot], %3, [remote_bar];\n"
      "}\n" ::"r"(SharedAddress(shared)),
      "r"(SharedAddress(&bar.word)), "r"(rank), "r"(__float_as_uint(value))
      : "memory");
}

// The ring position of a `Stages`-deep pipeline: which stage, and the parity of its phase.
template <int Stages>
struct Pipeline {
  int stage = 0;
  unsigned phase = 0;
  __device__ __forceinline__ void Advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1;
    }
  }
  // Moves past `steps` positions consumed by someone else (the other ping-pong consumer).
  __device__ __forceinline__ void Skip(int steps) {
    const int total = stage + steps;
    phase ^= (total / Stages) & 1;
    stage = total % Stages;
  }
};

// ---- TMA loads (tiled mode; out-of-bounds elements arrive as zeros) ----
TF_TILE void TmaLoad3d(void* shared_dst, const TensorMap& map, int c0, int c1, int c2, Barrier& barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          SharedAddress(shared_dst)),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(SharedAddress(&barrier.word))
      : "memory");
}

// The same tile into the same shared-memory offset of every CTA of the cluster in
// `cta_mask` (bit r: CTA rank r), completing on each one's barrier at the offset of `barrier`.
TF_TILE void TmaLoad3dMulticast(void* shared_dst, const TensorMap& map, int c0, int c1, int c2, Barrier& barrier,
                                unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, "
      "%4}], [%5], %6;" ::"r"(SharedAddress(shared_dst)),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(SharedAddress(&barrier.word)), "h"(cta_mask)
      : "memory");
}

// The same over a 4-D map (a GEMM operand read through a view: column in head, row in
// entry, head, entry).
TF_TILE void TmaLoad4d(void* shared_dst, const TensorMap& map, int c0, int c1, int c2, int c3, Barrier& barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(
          SharedAddress(shared_dst)),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(SharedAddress(&barrier.word))
      : "memory");
}

// The same over a 5-D map (a strided view: matrix dims, then up to three batch dims).
TF_TILE void TmaLoad5d(void* shared_dst, const TensorMap& map, int c0, int c1, int c2, int c3, int c4, Barrier& barrier) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], "
      "[%7];" ::"r"(SharedAddress(shared_dst)),
      "l"(&map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(SharedAddress(&barrier.word))
      : "memory");
}

// An implicit GEMM's A tile from an NHWC activation through an im2col map: the map's
// `pixels` consecutive output pixels from the one whose window starts at input (w, h) of
// image n, channels c.. of each, at filter tap (tap_w, tap_h) (dilation applied). Pixels in
// the padding or past the last image arrive as zeros.
TF_TILE void TmaLoadIm2col4d(void* shared_dst, const TensorMap& map, int c, int w, int h, int n, unsigned short tap_w,
                             unsigned short tap_h, Barrier& barrier) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], "
      "{%7, %8};" ::"r"(SharedAddress(shared_dst)),
      "l"(&map), "r"(c), "r"(w), "r"(h), "r"(n), "r"(SharedAddress(&barrier.word)), "h"(tap_w), "h"(tap_h)
      : "memory");
}

// `bytes` contiguous bytes from global into shared memory (a 1-D bulk copy: both addresses
// and `bytes` multiples of 16), completing on `barrier` (attention backward's per-query
// statistics, riding on their tile's barrier).
TF_TILE void BulkLoad(void* shared_dst, const void* global_src, unsigned bytes, Barrier& barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   SharedAddress(shared_dst)),
               "l"(global_src), "r"(bytes), "r"(SharedAddress(&barrier.word))
               : "memory");
}

// ---- TMA stores (elements past the tensor's edge are not written) ----
TF_TILE void TmaStore3d(const TensorMap& map, const void* shared_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(&map),
               "r"(SharedAddress(shared_src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
// Adds `bytes` of f32 values from shared memory into global memory, element by element and
// asynchronously (a bulk group, as the TMA stores: TmaStoreCommit, TmaStoreWaitRead): the
// attention backward's dQ, summed over key blocks by the CTAs that hold them.
TF_TILE void BulkReduceAddF32(float* global_dst, const float* shared_src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(global_dst),
               "r"(SharedAddress(shared_src)), "r"(bytes)
               : "memory");
}
TF_TILE void TmaStoreCommit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Until the committed stores have read their shared memory (it may then be rewritten).
TF_TILE void TmaStoreWaitRead() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// Until the committed stores are complete.
TF_TILE void TmaStoreWait() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Makes this thread's shared-memory writes visible to the asynchronous (TMA) proxy.
TF_TILE void FenceSharedForAsync() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// ldmatrix: four 8x8 matrices of 16-bit values (8 rows of 16 bytes) into one register each,
// lanes 8m..8m+7 giving the row addresses of matrix m; lane l receives row l / 4, bytes
// (l % 4) * 4 of each: for f32 data, the word of column l % 4 of 8 rows of four.
TF_TILE void LoadMatrix8x8x4(unsigned (&r)[4], unsigned shared_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address)
               : "memory");
}
// A four-byte copy from global to shared memory, asynchronous (cp.async; Barrier's
// ArriveOnCopiesAsync tracks it).
TF_TILE void CopyAsync4(void* shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(SharedAddress(shared)), "l"(global) : "memory");
}
// A barrier among `threads` threads of the block (a warpgroup: 128), named `id` (1..15).
TF_TILE void NamedBarrierSync(int id, int threads) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory"); }
// Arrives at named barrier `id` without waiting: `threads` counts the arriving threads too
// (a warpgroup that syncs on it and one that signals it: 256).
TF_TILE void NamedBarrierArrive(int id, int threads) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory"); }

// The dynamic shared memory's first 1024-byte boundary (the 128-byte swizzle's period, where
// the templates' tiles start); the host counts 1024 bytes of slack for it.
TF_TILE unsigned char* AlignedDynamicShared() {
  extern __shared__ unsigned char tf_shared_raw[];
  return tf_shared_raw + ((1024 - (SharedAddress(tf_shared_raw) & 1023)) & 1023);
}

// Byte offset of (row, byte) in a tile of 128-byte rows stored with the 128-byte swizzle:
// 16-byte chunks XORed with the row's position in its group of 8 (what TMA and wgmma expect,
// and what keeps a warp's row-strided writes free of bank conflicts).
TF_TILE unsigned Swizzle128(unsigned row, unsigned byte) { return row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15)); }

// ---- wgmma shared-memory descriptors (128-byte swizzle) ----
// A tile stored as TMA writes it with CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes (64
// half-precision elements), groups of 8 rows 1024 bytes apart.
struct SharedMatrix {
  static __device__ __forceinline__ unsigned long long Field(unsigned bytes) { return (bytes & 0x3FFFF) >> 4; }
  // K-major (the reduction dimension contiguous): A as [M][K], B as [N][K]. The leading
  // offset is unused with swizzling; the stride offset steps over 8 rows.
  static __device__ __forceinline__ unsigned long long KMajor(const void* tile) {
    return Field(SharedAddress(tile)) | Field(16) << 16 | Field(1024) << 32 | 1ull << 62;
  }
  // MN-major (M or N contiguous): B as [K][N] in boxes of 64 columns, `box_bytes` apart.
  // The leading offset steps to the next 64-column box, the stride offset over 8 K rows.
  static __device__ __forceinline__ unsigned long long MnMajor(const void* tile, unsigned box_bytes) {
    return Field(SharedAddress(tile)) | Field(box_bytes) << 16 | Field(1024) << 32 | 1ull << 62;
  }
};

// ---- warpgroup-wide asynchronous MMA ----
struct Warpgroup {
  // Orders this warpgroup's register accesses before the wgmma that follows.
  static __device__ __forceinline__ void Fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
  static __device__ __forceinline__ void Commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
  // Waits until at most `Pending` committed groups are still running.
  template <int Pending>
  static __device__ __forceinline__ void Wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
  }
  // Pins registers a wgmma wrote to this point of the program: read after it, not hoisted
  // above the Wait that retired them (the compiler sees no tie between the two; ptxas then
  // finds reads of accumulators still in flight and serializes every wgmma, C7514).
  template <int N>
  static __device__ __forceinline__ void FenceRegisters(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
  }
  // Register reallocation between producer and consumer warpgroups.
  template <int Registers>
  static __device__ __forceinline__ void GrowRegisters() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Registers));
  }
  template <int Registers>
  static __device__ __forceinline__ void ShrinkRegisters() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Registers));
  }
};

// ---- accumulator-fragment rows ----
// In a wgmma D fragment, row r of a warp's 16 lives in lanes 4(r % 8) .. 4(r % 8) + 3.
TF_TILE float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
TF_TILE float QuadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// 2^x by the hardware approximation (2 ulp; 2^-inf is 0): the online softmax's exponent.
TF_TILE float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 2^x for x <= 0 on the FMA pipe instead of the SFU, whose 16 results per clock and SM bound
// the attention softmax at head dim 64: 2^round(x) put into the exponent bits of a cubic for
// 2^f, f = x - round(x) in [-0.5, 0.5] (relative error 7.5e-5, far below the bf16/f16 P it
// feeds). Below -120 (2^-120: nothing beside a row maximum's 1) the result is 0, as for -inf.
TF_TILE float Exp2Poly(float x) {
  const float t = x + 12582912.0f;  // 1.5 * 2^23: round(x) lands in t's low mantissa bits
  const float f = x - (t - 12582912.0f);
  const float p = fmaf(fmaf(fmaf(0.05517164245f, f, 0.2426111698f), f, 0.6932609677f), f, 0.9999280572f);
  // (bits(t) << 23) is round(x) << 23: the bits above t's low 9 leave the word.
  const float y = __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
  return x < -120.0f ? 0.0f : y;
}

// ---- persistent tile scheduling ----
// Output tiles numbered batch-major; inside a batch entry, `Group` rows of tiles are swept
// column by column, so CTAs running together share A rows and B columns in L2.
struct TileCoordinates {
  int m, n, batch;
};
// Over `tiles_m` rows of tiles (known at launch, or a constant: TileAt<TilesM, ...>).
template <int TilesN, int Group>
TF_TILE TileCoordinates TileAt(int tile, int tiles_m) {
  const int per_batch = tiles_m * TilesN;
  constexpr int kPerGroup = Group * TilesN;
  const int batch = tile / per_batch;
  const int t = tile - batch * per_batch;
  const int group = t / kPerGroup;
  const int first_m = group * Group;
  // The last group may be short; where tiles_m is a constant and none is, `rows` is a constant
  // and the divisions below are shifts or multiplications, not a runtime division per tile.
  const int rows = tiles_m % Group != 0 && tiles_m - first_m < Group ? tiles_m - first_m : Group;
  const int in_group = t - group * kPerGroup;
  return {first_m + in_group % rows, in_group / rows, batch};
}
template <int TilesM, int TilesN, int Group>
TF_TILE TileCoordinates TileAt(int tile) {
  return TileAt<TilesN, Group>(tile, TilesM);
}

#undef TF_TILE

}  // namespace tf

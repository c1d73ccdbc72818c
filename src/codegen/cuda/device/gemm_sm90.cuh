// The Hopper GEMM skeleton: D = A·B with a fused epilogue, one persistent kernel.
//
//   warpgroup 0 (producer, one thread)     warpgroups 1.. (consumers)
//   ─────────────────────────────────      ───────────────────────────────────────────────
//   for each unit (tile × K split,         for each unit:
//   or stream-K part):
//     for each K step:                       for each K step: wait full[s], wgmma from slot s,
//       wait empty[s]; TMA A, B → slot s       hand slot s-1 back (empty)
//       (B multicast to the cluster)         [split-K: partials through scratch, last sums]
//   [3xTF32, warps 1-3: wait full[s],      [3xTF32: wait split_full[s], the small parts of
//    B's small parts, split_full[s]]         the consumer's rows of A]
//     [ring of residual chunks]              epilogue.Pair(row, col, acc, loaded) per column
//                                            pair (an odd N: epilogue(...) per element):
//                                            direct stores, or a staged tile out by TMA
//                                            [stream-K: parts through scratch, the part
//                                             with the tile's last step sums them]
//
// Configurations (all compile-time, from Config):
//   cooperative consumers (each 64 of the tile's rows) or ping-pong (whole tiles in turn);
//   the epilogue in the main loop's tail, or overlapped: the held tile's epilogue in chunks
//   beside the next tile's main-loop steps; split-K with a deterministic sum; clusters of
//   two CTAs sharing B by TMA multicast; a TMA-store epilogue (the staged store), a residual
//   read by TMA into the staging tile (the staged load) or into a ring (the ringed load).
//
// The generated part (codegen/cuda/gemm_emitter.cc) is the Config, the A loader (a matrix,
// a view or an implicit GEMM's im2col), the Epilogue functor printed from the group's
// scalar program, and a kernel that calls GemmSm90. Element types (tile_mma.cuh) fix the
// operand and staging sizes; only 16-bit operands are read MN-major (TF32 and FP8 K-major).
#pragma once

#include "tile_mma.cuh"
#include "tilefuse_tiles.cuh"

namespace tf {

// The kernel's TMA descriptors, each a __grid_constant__ parameter (null where unused).
struct GemmMaps {
  const TensorMap* a;
  const TensorMap* b;
  const TensorMap* out;       // the staged store's
  const TensorMap* in;        // the staged load's
  const TensorMap* residual;  // the ringed load's
  void* stored;               // the staged store's output where the threads write it (kStoreByThreads)
  const TensorMap* more_b[3];  // a product grouped over N (kBParts > 1): parts 1.. B's maps; gated (kGated): this product's
  // A normed by rows (kNormA): the norm's scale, one 16-bit value a column of K, and its epsilon.
  const void* norm_scale;
  float norm_epsilon;
  // Block scales (kScaleBlocks > 0): A's [rows][blocks] and B's [blocks][N], f32.
  const float* block_scale_a;
  const float* block_scale_b;
  // The product's rows a batch entry: Config::kRows, or (kRowsAtLaunch) the launch's, a size
  // the model's symbolic dims give (batch · sequence) that the kernel's text does not hold.
  int rows = 0;
  // An amax in the epilogue (kAmax): two words of scratch memory, the largest |u|'s bits so far
  // and how many warps have added theirs, zero between launches (GemmAmaxFinish).
  unsigned* amax = nullptr;
};

// An amax's running max (the largest |value| so far) taking `value`: PTX's max.NaN, a NaN
// winning as it does in ReduceMax; one FMNMX an element, the |·| its operand's modifier (the
// bits of |value| compared as integers took an FADD, an FSEL and half a VIMNMX3).
__device__ __forceinline__ float GemmAmaxUpdate(float running, float value) {
  float larger;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(larger) : "f"(running), "f"(fabsf(value)));
  return larger;
}

// ---- A loaders: one K step of A's tile t.m into a ring slot ----
// A as [batch][rows][K].
struct MatrixA {
  template <class C>
  static __device__ __forceinline__ void Load(void* slot, const TensorMap& map, int ks, const TileCoordinates& t, Barrier& full) {
    TmaLoad3d(slot, map, ks * C::kBK, t.m * C::kBM, t.batch, full);
  }
};
// A MN-major, the [K][M] matrix of Aᵀ (xᵀ · dy): kBM / 64 boxes of kBK rows of K × 64 of M,
// each [kBK][64] with the 128-byte swizzle, as B's MN-major boxes.
struct MatrixAMnMajor {
  template <class C>
  static __device__ __forceinline__ void Load(void* slot, const TensorMap& map, int ks, const TileCoordinates& t, Barrier& full) {
#pragma unroll
    for (int box = 0; box < C::kBM / 64; ++box)
      TmaLoad3d((unsigned char*)slot + box * C::kBK * 64 * C::Element::kBytes, map, t.m * C::kBM + box * 64, ks * C::kBK, t.batch, full);
  }
};
// A through a view: (column in head, row in entry, head, entry).
template <int Head, int EntryRows>
struct ViewA {
  template <class C>
  static __device__ __forceinline__ void Load(void* slot, const TensorMap& map, int ks, const TileCoordinates& t, Barrier& full) {
    TmaLoad4d(slot, map, ks * C::kBK % Head, t.m * C::kBM % EntryRows, ks * C::kBK / Head, t.m * C::kBM / EntryRows, full);
  }
};
// An implicit GEMM's A: im2col of an NHWC activation. Row m is output pixel (image, oh, ow);
// column k is (kh, kw, channel), so a K step is kBK channels of one filter tap.
template <int Channels, int OutPixels, int OutWidth, int StrideW, int PadW, int StrideH, int PadH, int KernelW, int DilationW,
          int DilationH>
struct Im2colA {
  template <class C>
  static __device__ __forceinline__ void Load(void* slot, const TensorMap& map, int ks, const TileCoordinates& t, Barrier& full) {
    const int pixel = t.m * C::kBM, image = pixel / OutPixels, oh = pixel % OutPixels / OutWidth, ow = pixel % OutWidth;
    const int tap = ks * C::kBK / Channels;
    TmaLoadIm2col4d(slot, map, ks * C::kBK % Channels, ow * StrideW - PadW, oh * StrideH - PadH, image,
                    (unsigned short)(tap % KernelW * DilationW), (unsigned short)(tap / KernelW * DilationH), full);
  }
};

// The constants every part of the skeleton derives from Config.
template <class Config>
struct GemmShape : Config {
  using Element = typename Config::Element;
  // B as [K][N] (MN-major, the default) or as [N][K] (K-major, kBKMajor: x · wᵀ with w a
  // linear layer's weight); wgmma reads an MN-major B only for 16-bit types.
  static constexpr bool kBKMajor = Config::kBKMajor != 0;
  static_assert(Element::kBytes == 2 || kBKMajor || Config::kSplitTf32, "gemm_sm90 reads an MN-major B of bf16, f16 or (3xTF32) f32 only");
  // Columns of N in one TMA box of B: 64 rows of N K-major; MN-major, one 128-byte swizzle row.
  static constexpr int kBBoxColumns = kBKMajor ? 64 : 128 / Element::kBytes;
  // A as [M][K] (K-major, the default) or as [K][M] (MN-major, kAMnMajor: xᵀ · dy), wgmma's
  // imm-trans-a: 16-bit types only, as for B.
  static constexpr bool kAMnMajor = Config::kAMnMajor != 0;
  static_assert(Element::kBytes == 2 || !kAMnMajor, "gemm_sm90 reads an MN-major A of bf16 or f16 only");
  // B is a weight no kernel of the model writes: its first tiles load before the kernel
  // waits for the grid ahead (programmatic dependent launch; GemmLoadBAhead). Single CTAs.
  static constexpr bool kBBeforeWait = Config::kBBeforeWait != 0;
  static_assert(!kBBeforeWait || Config::kClusterM == 1, "gemm_sm90 loads B ahead in single CTAs only");
  static constexpr int kBK = 128 / Element::kBytes;  // one 128-byte swizzle row
  // 3xTF32 (f32 products at f32's accuracy): the small parts of each slot's B (Tf32::Small)
  // are written beside it by the producer warpgroup's idle warps (GemmSplitter), the slot
  // keeping the big parts; each consumer reads its rows of A into registers and splits them
  // there (GemmLoadA), and issues three products a step. Cooperative consumers, promoted sums
  // (a step waited on before the next one's A is read), one epilogue in the tail.
  static constexpr bool kSplitTf32 = Config::kSplitTf32 != 0;
  static_assert(!kSplitTf32 || (kSameType<Element, Tf32> && !Config::kPingPong && !Config::kOverlap && Config::kPromote),
                "gemm_sm90 splits f32 operands for cooperative consumers with promoted sums, without an overlapped epilogue");
  static constexpr int kSplitBuffers = kSplitTf32 ? Config::kStages : 0;
  // Promoted steps issued whole (one wgmma as wide as the tile a product and 8 columns of K),
  // not in two column halves: 3xTF32, whose chains are a step long (GemmPromotedSteps), so
  // its halves overlapped nothing but one half's additions, at half the width (H200,
  // 2026-12-02: no change on GPT-2's products at 128 rows, 2% on the model at 8x512).
  static constexpr bool kWholeSteps = kSplitTf32;
  // 3xTF32 with B MN-major ([K][N], a weight given as [in][out]): the splitter writes B's big
  // parts K-major too, transposed into a buffer of their own (the tensor cores read TF32 K-major).
  static constexpr bool kSplitTransposesB = kSplitTf32 && !kBKMajor;
  static constexpr int kBigBBuffers = kSplitTransposesB ? Config::kStages : 0;
  // The layout the consumers' wgmmas read B in.
  static constexpr bool kBReadKMajor = kBKMajor || kSplitTf32;
  static constexpr int kSplitterThreads = 96;  // the producer warpgroup's warps 1 to 3
  // 8-bit floats and 3xTF32 (the tensor cores' sums of a step lose digits, FP8's and TF32's
  // alike). An overlapped epilogue holds a tile's products rounded to the MatMul's 16-bit
  // output type (HeldElement), or, for an FP8 product (an f32 MatMul of 8-bit floats:
  // kHeldF32), as f32 sums (a consumer's 64 x 128 of them beside its promoted ones), and then
  // without block scales (a step's scales are read from its slot in GemmPromotedSteps only).
  static constexpr bool kHeldF32 = Config::kHeldF32 != 0;
  static_assert(!kHeldF32 || (Config::kOverlap && Element::kBytes == 1 && Config::kScaleBlocks == 0 && Config::kBN <= 128),
                "gemm_sm90 holds f32 sums of FP8 products of at most 128 columns a tile, without block scales");
  static_assert(!Config::kPromote || ((Element::kBytes == 1 || kSplitTf32) && (!Config::kOverlap || kHeldF32)),
                "gemm_sm90 promotes FP8 and 3xTF32 sums only, an overlapped epilogue beside FP8 sums held in f32");
  // int8 (S8): the tensor cores sum in int32, exactly (K below 2^31 / 128^2 = 131072, which
  // passes/fp8_products checks), into int32 accumulators (Accumulator), which everything after
  // the main loop reads as f32 values (an epilogue's `acc`, split-K's partials). Not promoted,
  // not held for an overlapped epilogue.
  static constexpr bool kInt8 = kSameType<Element, S8>;
  using Accumulator = typename Mma<Element>::Accumulator;
  static_assert(!kInt8 || (!Config::kPromote && !Config::kOverlap && Config::kScaleBlocks == 0),
                "gemm_sm90 sums int8 products in int32 without promotion, block scales or an overlapped epilogue");
  // A gated product (kGated): a tile computes kBN / 2 columns of N of two products of one A,
  // the gate's (its B from maps.b) in its first half and this product's (maps.more_b[0]) in
  // its second, so a thread holds column c of both (accumulator groups j and j + kOutBN / 8);
  // the generated Epilogue takes both sums of a column. Its outputs are kOutBN columns a tile.
  static constexpr bool kGated = Config::kGated != 0;
  static constexpr int kOutBN = kGated ? Config::kBN / 2 : Config::kBN;
  static_assert(!kGated || (kBKMajor && Config::kBParts == 1 && Config::kBatch == 1 && Config::kBN % 128 == 0 &&
                            Config::kN % kOutBN == 0 && !Config::kStagedLoad && !Config::kRingedLoad && !Config::kStoreByThreads),
                "gemm_sm90 gates K-major weights of one batch entry, whole boxes a half tile, without a staged or ringed load");
  // An epilogue reading column c's partner c XOR 8 * kPartnerGroups (a rotary embedding's
  // rotated half): in the same thread's accumulators (group j XOR kPartnerGroups), the tile's
  // columns whole pairs of halves.
  static constexpr int kPartnerGroups = Config::kPartnerGroups;
  static_assert(kPartnerGroups == 0 || (!kGated && kOutBN % (16 * kPartnerGroups) == 0 && Config::kN % 2 == 0),
                "gemm_sm90's partner columns lie in the tile, not beside a gate");
  // A normed by rows in the consumers' registers (kNormA: an RMS norm folded into the product
  // that reads it, codegen/gemm_row_norms.h). Each consumer reads its 64 rows of a slot's A into
  // registers (GemmLoadNormedA), multiplies them by the norm's scale (maps.norm_scale, one
  // value a column of K, copied into shared memory first) and gives them to the wgmma from
  // there, then reads them again to add their squares to its rows' sums while the wgmma runs;
  // before the epilogue the accumulators of row r are multiplied by rsqrt(sum_r / K + epsilon).
  // The normed A is never written nor read back, and its kernel is not launched.
  static constexpr bool kNormA = Config::kNormA != 0;
  static_assert(!kNormA || (Element::kBytes == 2 && !kAMnMajor && !Config::kPingPong && !Config::kOverlap && !Config::kPromote &&
                            Config::kSplits == 1 && Config::kStreamTiles == 0 && Config::kK % kBK == 0 && !Config::kStagedLoad &&
                            !Config::kRingedLoad),
                "gemm_sm90 norms a 16-bit K-major A of whole K steps on cooperative consumers, one unit a tile, the epilogue in the tail");
  // Block scales (kScaleBlocks > 0: DeepGEMM's scaling, passes/fp8_products.h): K in
  // kScaleBlocks blocks of whole K steps, each step's promoted sums multiplied by its block's
  // scales of the thread's rows of A and columns of B before they are added (GemmPromote).
  static constexpr int kScaleBlocks = Config::kScaleBlocks;
  // The staged store's element: 16-bit, or an 8-bit float (a quantized output) or an f32 value,
  // whose tile shares nothing with a staged load and is never written by the threads.
  static_assert(Config::kStoreBytes == 2 ||
                    ((Config::kStoreBytes == 1 || Config::kStoreBytes == 4) && !Config::kStagedLoad && !Config::kStoreByThreads),
                "gemm_sm90 stages 16-bit stores, or 8-bit or f32 ones alone");
  static_assert(kScaleBlocks == 0 || (Config::kPromote && Element::kBytes == 1 && Config::kK % (kScaleBlocks * kBK) == 0 && !kGated &&
                                      Config::kBParts == 1 && Config::kBatch == 1),
                "gemm_sm90 scales blocks of whole K steps of FP8 products with promoted sums, one product of a shared B");
  static constexpr int kStepsPerScaleBlock = kScaleBlocks ? Config::kK / kBK / kScaleBlocks : 1;
  // B's scales shared by aligned runs of kBScaleColumns columns (DeepGEMM's 128x128 weight
  // blocks): a tile lies in one run (kBN 64, 128) or two (192: a tile starts at a run's start or
  // 64 columns into it), so a step's sums take one FMA each (the row's scale times the run's,
  // per row and run), not a multiplication and an FMA (a scale per column).
  static constexpr int kBScaleColumns = Config::kBScaleColumns;
  static constexpr int kBScaleRuns = kBScaleColumns == 0 || kBScaleColumns % Config::kBN == 0 ? 1 : 2;
  static_assert(kBScaleColumns == 0 || (kScaleBlocks > 0 && (kBScaleColumns % Config::kBN == 0 || (kBScaleColumns == 128 && Config::kBN == 192))),
                "gemm_sm90 shares B's scales over whole tiles, or 192-column tiles over two runs of 128");
  // Rows known at launch (maps.rows): the tiles, the units and the edges are the launch's
  // (GemmRows, GemmTilesM, GemmUnits), one compiled kernel for every row count. Without
  // stream-K, whose split of the last round of tiles is the host's for a tile count. Whether
  // the rows are whole tiles (kWholeRowTiles) is the kernel's: the epilogue then checks no
  // edge (checking them cost 6-12% of a bf16 MLP block's products, H200).
  static constexpr bool kRowsAtLaunch = Config::kRowsAtLaunch != 0;
  static_assert(!kRowsAtLaunch || (Config::kRows == 0 && Config::kStreamTiles == 0),
                "gemm_sm90 takes its rows at launch with kRows 0 and without stream-K");
  static constexpr int kTilesM = (Config::kRows + Config::kBM - 1) / Config::kBM;
  static constexpr int kTilesN = (Config::kN + kOutBN - 1) / kOutBN;
  static constexpr int kTiles = kTilesM * kTilesN * Config::kBatch;
  static constexpr int kKSteps = (Config::kK + kBK - 1) / kBK;
  // A product grouped over N (kBParts > 1): products of one A by up to four weights, their
  // columns side by side, part p's from column kBPartStart[p]; a tile's columns lie in one part,
  // whose weight (maps.more_b) its B tiles come from. The generated Epilogue picks the part's
  // program by column.
  static constexpr int kBParts = Config::kBParts;
  static_assert(kBParts >= 1 && kBParts <= 4, "gemm_sm90 groups at most four products over N");
  static_assert(kBParts == 1 || (kBKMajor && Config::kBatch == 1 && Config::kBPart1 % Config::kBN == 0 &&
                                 Config::kBPart2 % Config::kBN == 0 && Config::kBPart3 % Config::kBN == 0),
                "gemm_sm90 groups K-major weights of one batch entry, each part whole tiles");
  static constexpr bool kNoEdges = (kRowsAtLaunch ? Config::kWholeRowTiles != 0 : Config::kRows % Config::kBM == 0) && Config::kN % kOutBN == 0;
  // The Epilogue functor stores values itself (outputs besides the staged one): it runs only
  // for column pairs inside the product. Otherwise a pair past the edge computes a clamped
  // pair's values, which the staged store drops (GemmEpilogue says why).
  static constexpr bool kEpilogueWrites = Config::kEpilogueWrites != 0;
  // The Epilogue keeps a running max of one output's magnitudes (tf_amax), which the consumers
  // hand over when they finish (GemmAmaxFinish) and the grid's last warp writes (StoreAmax).
  static constexpr bool kAmax = Config::kAmax != 0;
  // Stream-K (kStreamTiles > 0): the last kStreamTiles tiles, those a persistent grid would
  // leave as a partial last round, are shared by kStreamCtas CTAs as one run of K steps cut
  // evenly (GemmWorkList), each tile's parts summed by the part holding its last step.
  static constexpr int kStreamTiles = Config::kStreamTiles, kStreamCtas = Config::kStreamCtas;
  static constexpr bool kStreamK = kStreamTiles > 0;
  static_assert(!kStreamK || (Config::kSplits == 1 && Config::kClusterM == 1 && !Config::kPingPong && !Config::kOverlap),
                "gemm_sm90 streams K over single CTAs of cooperative consumers, the epilogue in the tail, without split-K");
  // Units of work before the stream-K tiles: a tile's K range in kSplits parts of kSplitSteps
  // steps; a cluster's CTAs take vertically adjacent tiles and walk tile columns in lockstep,
  // sharing B.
  static constexpr int kUnits = (kTiles - kStreamTiles) / Config::kClusterM * Config::kSplits;
  // Cooperative consumers take 64 rows each: 1 to 3 (192-row tiles: 512 threads, 16-bit
  // operands, the epilogue in the tail; the host's rule says when).
  static constexpr int kConsumers = Config::kPingPong ? 2 : Config::kBM / 64;
  static_assert(kConsumers <= 3, "gemm_sm90 runs at most three consumer warpgroups");
  // Named barriers: 1 + consumer, a consumer's epilogue; kHandOverBarrier, every consumer
  // around split-K's and stream-K's hand-over.
  static constexpr int kHandOverBarrier = 7;
  static constexpr int kConsumerRows = Config::kPingPong ? Config::kBM : 64;
  static constexpr int kMBlocks = kConsumerRows / 64;
  static constexpr unsigned kStageBytes = (Config::kBM + Config::kBN) * kBK * Element::kBytes;
  // The overlapped epilogue's residual ring: kResidualSlots chunks of kBM rows × kChunkCols.
  static constexpr int kResidualSlots = 4;
  static constexpr int kChunkCols = Config::kBN / Config::kChunks;
  static constexpr int kResidualSlotBytes = Config::kBM * kChunkCols * 2;
};

// The product's rows a batch entry, its tiles down M, and the units of work (GemmWorkList).
template <class S>
__device__ __forceinline__ int GemmRows(const GemmMaps& maps) {
  if constexpr (S::kRowsAtLaunch) return maps.rows;
  else return S::kRows;
}
template <class S>
__device__ __forceinline__ int GemmTilesM(const GemmMaps& maps) {
  if constexpr (S::kRowsAtLaunch) return (maps.rows + S::kBM - 1) / S::kBM;
  else return S::kTilesM;
}
template <class S>
__device__ __forceinline__ int GemmUnits(const GemmMaps& maps) {
  if constexpr (S::kRowsAtLaunch) return GemmTilesM<S>(maps) * S::kTilesN * S::kBatch / S::kClusterM * S::kSplits;
  else return S::kUnits;
}

// Shared memory as the host's SharedBytes lays it out: the ring (1024-byte aligned, the
// swizzle period), the staging tile, the residual ring, the norm's scale, then the barriers.
template <class S>
struct GemmSharedMemory {
  using Storage = typename S::Element::Storage;
  Storage* tile_a;          // [stage][kBM][kBK], 128-byte swizzle; MN-major: [stage][kBM / 64][kBK][64], the same swizzle as B
  Storage* tile_b;          // [stage][kBN / 64][kBK][64]; K-major: [stage][kBN][kBK], the same swizzle as A
  Storage* small_b;         // 3xTF32: [stage][kBN][kBK], K-major whatever B's layout
  Storage* big_b;           // 3xTF32, B MN-major: [stage][kBN][kBK], B's big parts K-major
  unsigned char* staging;   // [consumer][boxes][64 rows][128 bytes] of the staged store's type (GemmStagingOf)
  unsigned char* residual_ring;  // [slot][kBM][kChunkCols]
  unsigned* norm_scale;          // kNormA: the norm's scale, kK 16-bit values (GemmNormedSteps)
  float* block_scales;           // kScaleBlocks: [stage][kBM rows of A, then kBN columns of B] (GemmScaleLoader)
  Barrier* full;
  Barrier* empty;
  Barrier* turn;     // ping-pong: turn[c] completes when consumer c may run its next main loop
  Barrier* tile_in;  // tile_in[c]: consumer c's staged load has landed (three)
  volatile int* finishes_tile;  // split-K: this unit runs the epilogue
  Barrier* residual_full;       // a residual slot's chunk has landed
  Barrier* residual_empty;      // every consumer warp has read it
  Barrier* split_full;          // 3xTF32: a slot's small parts are written too

  __device__ __forceinline__ GemmSharedMemory() {
    extern __shared__ unsigned char tf_shared_raw[];
    unsigned char* shared = tf_shared_raw + ((1024 - (SharedAddress(tf_shared_raw) & 1023)) & 1023);
    tile_a = (Storage*)shared;
    tile_b = tile_a + S::kStages * S::kBM * S::kBK;
    small_b = tile_b + S::kStages * S::kBN * S::kBK;
    big_b = small_b + S::kSplitBuffers * S::kBN * S::kBK;
    staging = (unsigned char*)(big_b + S::kBigBBuffers * S::kBN * S::kBK);
    residual_ring = staging + S::kStaging;
    norm_scale = (unsigned*)(S::kRingedLoad ? residual_ring + S::kResidualSlots * S::kResidualSlotBytes : staging + S::kStaging);
    block_scales = (float*)(norm_scale + (S::kNormA ? S::kK / 2 : 0));
    full = (Barrier*)(block_scales + (S::kScaleBlocks ? S::kStages * (S::kBM + S::kBN) : 0));
    empty = full + S::kStages;
    turn = empty + S::kStages;
    tile_in = turn + 2;
    finishes_tile = (volatile int*)(tile_in + 3);
    residual_full = tile_in + 4;
    residual_empty = residual_full + S::kResidualSlots;
    split_full = residual_empty + S::kResidualSlots;
  }
};

// Hands slot `slot` back to the producer of every CTA whose copies filled it.
template <class S>
__device__ __forceinline__ void GemmReleaseSlot(const GemmSharedMemory<S>& sm, int slot, int local) {
  if (local == 0) {
    if (S::kClusterM > 1)
      for (int rank = 0; rank < S::kClusterM; ++rank) sm.empty[slot].ArriveInCluster(rank);
    else
      sm.empty[slot].Arrive();
  }
}

// The K steps a unit (a tile, or a split-K part of one) runs: [begin, end).
struct UnitSteps {
  int begin, end;
};
template <class S>
__device__ __forceinline__ UnitSteps GemmUnitSteps(int unit) {
  const int begin = unit % S::kSplits * S::kSplitSteps;
  return {begin, min(S::kKSteps, begin + S::kSplitSteps)};
}

// One piece of a CTA's work: K steps [begin, end) of tile `tile` (GemmTileAt's numbering).
// `unit`: split-K's unit, or the stream-K CTA's index (their partials' slot). `stream_tile`:
// the tile's index among the stream-K tiles where the part is not the whole tile, else -1;
// `finishes`: the part holds the tile's last step (a whole tile, a split-K unit that may
// finish it, or the stream-K part that sums the others').
struct GemmWork {
  int tile, begin, end, unit, stream_tile;
  bool finishes;
};

// The stream-K run: the stream-K tiles' K steps one after another, CTA j taking steps
// [Begin(j), Begin(j + 1)).
template <class S>
struct GemmStreamK {
  static constexpr long long kSteps = (long long)S::kStreamTiles * S::kKSteps;
  static constexpr long long kCtas = S::kStreamCtas > 0 ? S::kStreamCtas : 1;  // none without stream-K (no division by 0)
  static __device__ __forceinline__ int Begin(int cta) { return (int)(cta * kSteps / kCtas); }
  // The CTA whose steps hold step `step`.
  static __device__ __forceinline__ int Owner(int step) { return (int)(((step + 1) * (long long)S::kStreamCtas + kSteps - 1) / kSteps) - 1; }
};

// A CTA's (or a ping-pong consumer's) work in order: units first_unit, first_unit + stride,
// ... below kUnits, then, with stream-K, its part of the run taken from the end backwards.
// Backwards, a CTA's first stream-K part is the one leaving its tile unfinished (its last
// steps), and the part that finishes a tile comes last: the part it waits for is the CTA
// before's first, so the waits are short and never circular (every CTA of the persistent grid
// is resident, one an SM).
template <class S>
struct GemmWorkList {
  int unit, stride, cta, stream_begin, stream_end, units;
  __device__ __forceinline__ GemmWorkList(int first_unit, int unit_stride, const GemmMaps& maps)
      : unit(first_unit), stride(unit_stride), cta(first_unit), stream_begin(0), stream_end(0), units(GemmUnits<S>(maps)) {
    if (S::kStreamK && cta < S::kStreamCtas) {
      stream_begin = GemmStreamK<S>::Begin(cta);
      stream_end = GemmStreamK<S>::Begin(cta + 1);
    }
  }
  __device__ __forceinline__ bool Next(GemmWork& w) {
    if (unit < units) {
      const UnitSteps steps = GemmUnitSteps<S>(unit);
      w = {unit / S::kSplits, steps.begin, steps.end, unit, -1, true};
      unit += stride;
      return true;
    }
    if (!S::kStreamK || stream_end <= stream_begin) return false;
    const int stream_tile = (stream_end - 1) / S::kKSteps, first_step = stream_tile * S::kKSteps;
    const int begin = max(stream_begin, first_step);
    const bool finishes = stream_end == first_step + S::kKSteps, whole = finishes && begin == first_step;
    w = {units + stream_tile, begin - first_step, stream_end - first_step, cta, whole ? -1 : stream_tile, finishes};
    stream_end = begin;
    return true;
  }
};

// This CTA's tile of the cluster's tile pair number `tile` (pairs in grouped order).
template <class S>
__device__ __forceinline__ TileCoordinates GemmTileAt(int tile, int cta_rank, const GemmMaps& maps) {
  constexpr int kGroup = (S::kGroupM + S::kClusterM - 1) / S::kClusterM;
  TileCoordinates t;
  if constexpr (S::kRowsAtLaunch) t = TileAt<S::kTilesN, kGroup>(tile, GemmTilesM<S>(maps) / S::kClusterM);
  else t = TileAt<S::kTilesM / S::kClusterM, S::kTilesN, kGroup>(tile);
  t.m = t.m * S::kClusterM + cta_rank;
  return t;
}

}  // namespace tf

#include "gemm_sm90_producer.cuh"
#include "gemm_sm90_consumer.cuh"

namespace tf {

// The kernel body. Config (see GemmShape) gives Element, Index, the tile (kBM, kBN,
// kStages, kGroupM, kClusterM, kSplits, kSplitSteps, kStreamTiles, kStreamCtas, kChunks, kStaging), the problem (kRows,
// kN, kK, kBatch), the consumers (kPingPong, kOverlap), the staged and ringed accesses
// (kStagedStore, kStagedLoad, kRingedLoad and their element types StoreElement, LoadElement;
// kStoreByThreads: the staged store written out by the threads, its rows not 16-byte aligned),
// A's and B's layouts (kAMnMajor, kBKMajor), promoted FP8 sums (kPromote: each K step's
// products summed apart, then added into the f32 accumulators), f32 operands as 3xTF32
// (kSplitTf32)
// and the register split (kProducerRegisters, kConsumerRegisters). Epilogue:
//   float operator()(Index row, int col, float acc, float loaded) const
// writes the direct stores of element (row, col) and returns the staged store's value
// (anything when there is none); `loaded` is the staged or ringed load's element.
template <class Config, class ALoader, class Epilogue>
__device__ __forceinline__ void GemmSm90(const GemmMaps& maps, const Epilogue& epilogue, unsigned* __restrict__ tile_counters,
                                         float* __restrict__ partials) {
  using S = GemmShape<Config>;
  GemmSharedMemory<S> sm;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      sm.full[s].Init(1 + (S::kScaleBlocks ? 32 : 0));  // (the scale loader's lanes arrive too)
      // A slot is read by every cooperative consumer, or one ping-pong one, of each CTA of
      // the cluster (its B half came from either).
      sm.empty[s].Init((S::kPingPong ? 1 : S::kConsumers) * S::kClusterM);
    }
    sm.turn[0].Init(1);
    sm.turn[1].Init(1);
    for (int c = 0; c < 3; ++c) sm.tile_in[c].Init(1);
    if constexpr (S::kRingedLoad)
      for (int s = 0; s < S::kResidualSlots; ++s) {
        sm.residual_full[s].Init(1);
        sm.residual_empty[s].Init(S::kConsumers * 4);
      }
    if constexpr (S::kSplitTf32)
      for (int s = 0; s < S::kStages; ++s) sm.split_full[s].Init(S::kSplitterThreads);
    FenceBarrierInit();
  }
  // The cluster's barriers are initialised before any CTA's copy or arrival reaches them.
  if (S::kClusterM > 1) tf_cluster_sync();
  else __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  const int cta_rank = S::kClusterM > 1 ? (int)tf_cluster_rank() : 0;
  if (warpgroup == 0) {
    GemmProducer<S, ALoader>(sm, maps, cta_rank);  // awaits the grid ahead after loading what of B it may
    return;
  }
  tf_await_prior_grid();  // before the epilogue reads a residual or a vector the grid ahead wrote
  GemmConsumer<S>(sm, maps, epilogue, cta_rank, warpgroup - 1, tile_counters, partials);
}

}  // namespace tf

// gemm_sm90's consumer warpgroups: the main loop's wgmma steps, split-K's hand-over and the
// epilogue. Included by gemm_sm90.cuh.
#pragma once

namespace tf {

// What one consumer thread knows of itself and its current tile.
template <class S>
struct GemmConsumerState {
  int consumer, local, warp, lane;
  int rows;  // the product's rows a batch entry (GemmRows)
  typename S::Accumulator d[S::kMBlocks][S::kBN / 2];  // the accumulators: the wgmma D fragments (int32 for int8)
  // Promoted accumulation (kPromote, 8-bit floats and 3xTF32): a step's products, summed here
  // by the tensor cores, then added into d once retired, step[h] for the tile's column half h.
  // Hopper's FP8 MMA keeps about 14 bits of its sum (DeepSeek-V3's report, section 3.3.2),
  // so a deep K loses digits d would keep; its TF32 MMA, adding into f32 accumulators, still
  // loses more than f32's rounding to nearest would (3xTF32 summed by the tensor cores alone:
  // 1.3e-6 to 4.1e-6 of the output's scale at K = 520 to 4096, cuBLAS's f32 4e-7 to 8e-7;
  // H200, 2026-12-01). One half's products are added while the other's wgmma runs
  // (GemmPromotedSteps).
  // Steps issued whole (kWholeSteps) hold the tile's width in step[0].
  float step[S::kPromote && !S::kWholeSteps ? 2 : 1][S::kPromote ? S::kMBlocks : 1][S::kPromote ? S::kBN / (S::kWholeSteps ? 2 : 4) : 1];
  // Overlapped epilogue: the previous tile's products, packed pairs of the product's type
  // (S::HeldElement; held[mb][j * 2 + h] is d[mb][j * 4 + h * 2 + e] for e = 0, 1), or, for an
  // FP8 product (an f32 MatMul of 8-bit floats, kHeldF32), d's values as they are (GemmHeld).
  unsigned held[S::kOverlap && !S::kHeldF32 ? S::kMBlocks : 1][S::kOverlap && !S::kHeldF32 ? S::kBN / 4 : 1];
  float held_f32[S::kHeldF32 ? S::kMBlocks : 1][S::kHeldF32 ? S::kBN / 2 : 1];
  // 3xTF32: this consumer's rows of the step's A, whole and small parts (GemmLoadA); the
  // step's wgmmas read them until it is waited on.
  unsigned a_big[S::kSplitTf32 ? S::kBK / 8 : 1][4], a_small[S::kSplitTf32 ? S::kBK / 8 : 1][4];
  // kNormA: this consumer's rows of a step's A, normed, a wgmma A fragment per 16 columns of
  // K, for two steps in turn (a step's wgmma reads its registers until it is waited on, while
  // the next step's are written); and the sums of squares of its rows warp * 16 + lane / 4 and
  // + 8 over the columns it has read.
  unsigned a_normed[S::kNormA ? 2 : 1][S::kNormA ? S::kBK / 16 : 1][4];
  float norm_squares[2];
  // kNormA: the norm's scale for a step, read a step ahead from its copy in shared memory, as
  // bf16 or f16 pairs at columns (lane % 4) * 2 and + 8 of each 16.
  unsigned norm_scale[S::kNormA ? S::kBK / 16 : 1][2];
  Pipeline<S::kStages> ring;
  int previous;  // the slot of the step before this one, still read by its wgmma (-1: none)
};

// This consumer's 64 rows of the current slot's A into registers, a wgmma A fragment per 32
// bytes of each row (four words a thread: rows warp * 16 + lane / 4 and + 8; 16-bit values:
// columns (lane % 4) * 2 (+ 1) and + 8, f32: lane % 4 and + 4), as ldmatrix's 8x8 b16 matrices
// deliver them. The slot's 128-byte swizzle moves each row's 16-byte chunk j to j ^ (row % 8).
template <class S>
__device__ __forceinline__ void GemmReadA(const GemmSharedMemory<S>& sm, const GemmConsumerState<S>& c, unsigned (&a)[4][4]) {
  const unsigned base = SharedAddress(sm.tile_a + c.ring.stage * S::kBM * S::kBK + c.consumer * 64 * S::kBK);
  const int matrix = c.lane / 8, row_in_8 = c.lane % 8;  // ldmatrix: this lane's row of matrix `matrix`
  const int row = c.warp * 16 + (matrix % 2) * 8 + row_in_8;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) LoadMatrix8x8x4(a[kk], base + row * 128 + (((2 * kk + matrix / 2) ^ row_in_8) << 4));
}

// 3xTF32: this consumer's 64 rows of the current slot's A into registers (GemmReadA), a wgmma
// A fragment per 8 columns of K, as the tensor cores read them (big: the word itself) and the
// rest (small). From registers, A is read from shared memory once a step, not once by each of
// the step's wgmmas, and its small parts are never written there: a 64-row step of GPT-2's f32
// products at 128 rows 0.67 -> 0.51 µs, GPT-2 at 8x512 20357 -> 16902 µs (H200, 2026-12-02).
template <class S>
__device__ __forceinline__ void GemmLoadA(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c) {
  static_assert(S::kBK / 8 == 4, "3xTF32: 32 f32 columns of K a step");
  GemmReadA(sm, c, c.a_big);
#pragma unroll
  for (int kk = 0; kk < S::kBK / 8; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) c.a_small[kk][i] = __float_as_uint(Tf32::Small(__uint_as_float(c.a_big[kk][i])));
}

// One main-loop step, issued: wait for the slot, start its wgmma into `into` (and the staged
// load where ks is `load_at`, -1 for a part that runs no epilogue)... Promoted sums issue a step in two halves of the tile's columns, kCols
// from kFirstCol (B read K-major): the first half waits for the slot and starts the load.
template <class S, int kCols = S::kBN, int kFirstCol = 0>
__device__ __forceinline__ void GemmIssueStepInto(const GemmSharedMemory<S>& sm, const GemmMaps& maps, GemmConsumerState<S>& c,
                                                  const TileCoordinates& t, int ks, int load_at,
                                                  typename S::Accumulator (&into)[S::kMBlocks][kCols / 2], bool accumulate) {
  using Mma = tf::Mma<typename S::Element>;
  static_assert(kFirstCol == 0 || S::kBReadKMajor, "a part of B's columns is read K-major");
  // 3xTF32: this consumer reads its rows of A into registers once the slot has landed, while
  // the producer's warps split B (GemmSplitter), then waits for B's parts too. The step's
  // second column half reads the same registers.
  if (kFirstCol == 0) sm.full[c.ring.stage].Wait(c.ring.phase);
  if constexpr (S::kSplitTf32 && kFirstCol == 0) {
    GemmLoadA(sm, c);
    sm.split_full[c.ring.stage].Wait(c.ring.phase);
  }
  const int a_offset = S::kPingPong ? 0 : c.consumer * 64 * S::kBK;
  const auto* a = sm.tile_a + c.ring.stage * S::kBM * S::kBK + a_offset;
  const auto* b = (S::kSplitTransposesB ? sm.big_b : sm.tile_b) + c.ring.stage * S::kBN * S::kBK + kFirstCol * S::kBK;
  Warpgroup::Fence();
  using Storage = typename S::Element::Storage;
  auto issue = [&](typename S::Accumulator(&acc)[kCols / 2], const Storage* tile_a, const Storage* tile_b, int mb, int kk, int accumulate) {
    Mma::template Shared<kCols, !S::kBReadKMajor, S::kAMnMajor>(
        acc,
        S::kAMnMajor ? SharedMatrix::MnMajor(tile_a + mb * 64 * S::kBK + kk * Mma::kK * 64, S::kBK * 128)
                     : SharedMatrix::KMajor(tile_a + mb * 64 * S::kBK + kk * Mma::kK),
        S::kBReadKMajor ? SharedMatrix::KMajor(tile_b + kk * Mma::kK) : SharedMatrix::MnMajor(tile_b + kk * Mma::kK * 64, S::kBK * 128),
        accumulate);
  };
#pragma unroll
  for (int kk = 0; kk < S::kBK / Mma::kK; ++kk)
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb) {
      if constexpr (S::kSplitTf32) {  // the small products first, then the big one; A from registers
        static_assert(S::kMBlocks == 1 && S::kBReadKMajor, "3xTF32: a consumer's 64 rows, B read K-major");
        const auto* small_b = sm.small_b + c.ring.stage * S::kBN * S::kBK + kFirstCol * S::kBK;
        auto issue_a_held = [&](const unsigned(&a_words)[4], const Storage* tile_b, int accumulate) {
          Mma::template Registers<kCols, false>(into[mb], a_words, SharedMatrix::KMajor(tile_b + kk * Mma::kK), accumulate);
        };
        issue_a_held(c.a_small[kk], b, accumulate || kk > 0);
        issue_a_held(c.a_big[kk], small_b, 1);
        issue_a_held(c.a_big[kk], b, 1);
      } else {
        issue(into[mb], a, b, mb, kk, accumulate || kk > 0);
      }
    }
  Warpgroup::Commit();
  // The staged load's tile, requested halfway through the main loop, while the step just
  // issued runs: by then the previous tile's TMA store has long read the staging tile it
  // lands in, and the load still has half the main loop to arrive. (Requested as the tile
  // started, the wait for that store stalled the next main loop's first step: a residual
  // over 16384x4096x1024 took 248 us on cooperative tiles against 195 for bias+ReLU, H100.)
  if constexpr (S::kStagedLoad && kFirstCol == 0) {
    if (ks == load_at && c.local == 0) {
      TmaStoreWaitRead();
      unsigned char* my_staging = sm.staging + c.consumer * S::kConsumerRows * S::kBN * 2;
      sm.tile_in[c.consumer].ArriveExpectingBytes(S::kConsumerRows * S::kBN * 2);
      for (int mb = 0; mb < S::kMBlocks; ++mb)
        for (int box = 0; box < S::kBN / 64; ++box)
          TmaLoad3d(my_staging + (mb * (S::kBN / 64) + box) * 64 * 128, *maps.in, t.n * S::kBN + box * 64,
                    t.m * S::kBM + (S::kPingPong ? 0 : c.consumer * 64) + mb * 64, t.batch, sm.tile_in[c.consumer]);
    }
  }
}

template <class S>
__device__ __forceinline__ void GemmIssueStep(const GemmSharedMemory<S>& sm, const GemmMaps& maps, GemmConsumerState<S>& c,
                                              const TileCoordinates& t, int ks, int k_begin, int load_at) {
  GemmIssueStepInto(sm, maps, c, t, ks, load_at, c.d, ks > k_begin);
}

// ...and retire the step before it, handing its slot back.
template <class S>
__device__ __forceinline__ void GemmRetireStep(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c) {
  Warpgroup::Wait<1>();
  if (c.previous >= 0) GemmReleaseSlot(sm, c.previous, c.local);
  c.previous = c.ring.stage;
}

// kNormA: the slot's A multiplied by the norm's scale of its columns (norm_scale) into
// a_normed[kBuffer], each product rounded to the element type as the wgmma reads it.
template <class S, int kBuffer>
__device__ __forceinline__ void GemmLoadNormedA(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c) {
  using E = typename S::Element;
  GemmReadA(sm, c, c.a_normed[kBuffer]);
#pragma unroll
  for (int kk = 0; kk < S::kBK / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) c.a_normed[kBuffer][kk][i] = E::Mul2(c.a_normed[kBuffer][kk][i], c.norm_scale[kk][i / 2]);
}

// kNormA: the squares of the slot's A, read again (the slot is held until its wgmma is done),
// added to its rows' sums (words i of rows lane / 4 + 8 (i % 2)).
template <class S>
__device__ __forceinline__ void GemmAddSquares(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c) {
  using E = typename S::Element;
  unsigned a[S::kBK / 16][4];
  GemmReadA(sm, c, a);
#pragma unroll
  for (int kk = 0; kk < S::kBK / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float lo = E::ToFloat((unsigned short)(a[kk][i] & 0xffffu)), hi = E::ToFloat((unsigned short)(a[kk][i] >> 16));
      c.norm_squares[i % 2] = fmaf(lo, lo, fmaf(hi, hi, c.norm_squares[i % 2]));
    }
}

// kNormA: the norm's scale for step `ks` (clamped to the last) into norm_scale, from its copy
// in shared memory (GemmNormedSteps).
template <class S>
__device__ __forceinline__ void GemmLoadNormScale(const unsigned* scale_shared, GemmConsumerState<S>& c, int ks) {
  const unsigned* words = scale_shared + min(ks, S::kKSteps - 1) * (S::kBK / 2) + c.lane % 4;
#pragma unroll
  for (int kk = 0; kk < S::kBK / 16; ++kk) c.norm_scale[kk][0] = words[kk * 8], c.norm_scale[kk][1] = words[kk * 8 + 4];
}

// kNormA: one main-loop step (A's registers `kBuffer`, steps taking turns): A read and scaled,
// the next step's scale read, the wgmma issued, then A read again and its squares summed while
// the wgmma runs, and the step before retired. Only the read and the multiplication stand
// between the slot's landing and its wgmma: a slot is held from its landing to its wgmma's
// end, and each cycle held is one the ring has fewer bytes in flight. (The forms measured:
// bench/results/2026-12-03-h200-row-norms.md.)
template <class S, int kBuffer>
__device__ __forceinline__ void GemmNormedStep(const GemmSharedMemory<S>& sm, const unsigned* scale_shared, GemmConsumerState<S>& c, int ks,
                                               bool accumulate) {
  using Mma = tf::Mma<typename S::Element>;
  sm.full[c.ring.stage].Wait(c.ring.phase);
  GemmLoadNormedA<S, kBuffer>(sm, c);
  GemmLoadNormScale<S>(scale_shared, c, ks + 1);
  const auto* b = sm.tile_b + c.ring.stage * S::kBN * S::kBK;
  Warpgroup::Fence();
#pragma unroll
  for (int kk = 0; kk < S::kBK / Mma::kK; ++kk)
    Mma::template Registers<S::kBN, !S::kBReadKMajor>(
        c.d[0], c.a_normed[kBuffer][kk],
        S::kBReadKMajor ? SharedMatrix::KMajor(b + kk * Mma::kK) : SharedMatrix::MnMajor(b + kk * Mma::kK * 64, S::kBK * 128),
        accumulate || kk > 0);
  Warpgroup::Commit();
  GemmAddSquares(sm, c);
  GemmRetireStep(sm, c);
  c.ring.Advance();
}

// kNormA: the norm's scale into shared memory, once a CTA, before the consumers' first unit.
// Read from L2 a step ahead instead, its loads stood on the critical path (the gated
// LLaMA-style gate and up at 128 rows 24-29 µs, 22.9 from shared memory, 21.8 for the same loop
// without scale and squares, 20.7 unnormed; H200, 2026-12-03).
template <class S>
__device__ __forceinline__ void GemmCopyNormScale(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const GemmConsumerState<S>& c) {
  const unsigned* scale = static_cast<const unsigned*>(maps.norm_scale);
  for (int i = c.consumer * 128 + c.local; i < S::kK / 2; i += S::kConsumers * 128) sm.norm_scale[i] = __ldg(scale + i);
  NamedBarrierSync(S::kHandOverBarrier, S::kConsumers * 128);  // (split-K's and stream-K's, which a norm never has)
}

// kNormA: a unit's main loop, steps [k_begin, k_end), two at a time (registers taking turns).
template <class S>
__device__ __forceinline__ void GemmNormedSteps(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c, int k_begin, int k_end) {
  const unsigned* scale_shared = sm.norm_scale;
  c.norm_squares[0] = c.norm_squares[1] = 0.0f;
  GemmLoadNormScale<S>(scale_shared, c, k_begin);
  for (int ks = k_begin; ks < k_end; ks += 2) {
    GemmNormedStep<S, 0>(sm, scale_shared, c, ks, ks > k_begin);
    if (ks + 1 == k_end) break;
    GemmNormedStep<S, 1>(sm, scale_shared, c, ks + 1, true);
  }
  Warpgroup::Wait<0>();
  GemmReleaseSlot(sm, c.previous, c.local);
}

// kNormA: the accumulators of each row times rsqrt(its mean square + epsilon), once the main
// loop is done. A row's sum is spread over the four threads of a quad (columns lane % 4).
template <class S>
__device__ __forceinline__ void GemmScaleRowsByNorm(GemmConsumerState<S>& c, float epsilon) {
  float factor[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = c.norm_squares[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    factor[h] = rsqrtf(sum * (1.0f / S::kK) + epsilon);
  }
#pragma unroll
  for (int i = 0; i < S::kBN / 2; ++i) c.d[0][i] *= factor[i / 2 % 2];  // d[j * 4 + h * 2 + e]: row lane / 4 + 8h
}

// Block scales (kScaleBlocks) of one step as a thread adds them: A's scales of its two rows of
// each 64 (rows warp * 16 + lane / 4 and + 8), each times B's scale of the run of columns the
// tile starts in and of the next (kBScaleColumns: the tile's one or two B scales; else 1, B's
// scale per column read from the slot as it is added). Read from the step's slot as the step's
// first half is added (GemmReadStepScales) and held for its second, so that with B's scales
// shared the slot goes back once the step's wgmmas are done, as an unscaled step's does, not
// after its second half is added. (Read as the step was issued, they lived across two issues
// and spilled.)
// Two runs (kBScaleRuns: 192 columns over runs of 128) make three zones of the tile's columns,
// each with its own scale: below 64 the first run's, from 128 on the second's, and between
// them the second's where the tile starts 64 columns into a run (`run_start` 64), else the
// first's. A column group's zone is then a constant, its scale chosen once a step, not by a
// select per column group (34 a step, and as many predicates, beside 96 FMAs).
template <class S>
constexpr int kBScaleZones = S::kBScaleRuns > 1 ? 3 : 1;
template <class S>
__host__ __device__ constexpr int BScaleZone(int column) { return kBScaleZones<S> == 1 ? 0 : column < 64 ? 0 : column < 128 ? 1 : 2; }
template <class S>
struct GemmStepScales {
  const float* slot;  // the step's [kBM rows of A, then kBN columns of B] (GemmScaleLoader)
  float rows[S::kMBlocks][2][kBScaleZones<S>];
};
template <class S>
__device__ __forceinline__ GemmStepScales<S> GemmReadStepScales(const GemmSharedMemory<S>& sm, int slot, const GemmConsumerState<S>& c,
                                                                 int run_start) {
  static_assert(S::kBScaleRuns == 1 || (S::kBScaleColumns == 128 && S::kBN == 192), "the zones of BScaleZone");
  GemmStepScales<S> s{};
  if constexpr (S::kScaleBlocks > 0) {
    s.slot = sm.block_scales + slot * (S::kBM + S::kBN);
#pragma unroll
    for (int mb = 0; mb < S::kMBlocks; ++mb) {
      const float* rows = s.slot + (S::kPingPong ? 0 : c.consumer * 64) + mb * 64 + c.warp * 16 + c.lane / 4;
#pragma unroll
      for (int zone = 0; zone < kBScaleZones<S>; ++zone) {
        const int run = zone == 0 ? 0 : zone == 2 ? 1 : run_start == 64;
        const float b = S::kBScaleColumns ? s.slot[S::kBM + run] : 1.0f;
        s.rows[mb][0][zone] = rows[0] * b, s.rows[mb][1][zone] = rows[8] * b;
      }
    }
  }
  return s;
}

// Promoted sums: a unit's accumulators cleared before its first step is added (no wgmma in
// flight: a unit starts after the last one's steps were waited on and its sums held or stored).
template <class S>
__device__ __forceinline__ void GemmZeroAccumulators(GemmConsumerState<S>& c) {
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int i = 0; i < S::kBN / 2; ++i) c.d[mb][i] = 0.0f;
}

// Promoted sums: a retired step's products `step`, kCols columns of the tile from kFirstCol (a
// column half, or the whole width), added into the accumulators, which GemmZeroAccumulators
// cleared at the unit's start. (A flag for the unit's first step, `d = first ? s : d + s`, was
// two instructions an element, a select or a predicated pair: with block scales the main loop
// issued 323 instructions a step where the tensor cores take ~768 cycles for it, two consumer
// warps a scheduler; 8192^3 with weight blocks 1026 µs, 880 since, per tensor 814 -> 760; H100,
// 2026-12-07.) A half of a tile's columns is a whole number of the D fragment's 8-column
// groups, so its fragment is d's from kFirstCol / 2 on.
// Block scales (kScaleBlocks): the step's sums first multiplied by their scales (`scales`:
// GemmReadStepScales), a column's B scale read from the slot where each column has its own.
// The fragment's element j * 4 + h * 2 + e is row lane / 4 + 8h of the warp's 16, column j * 8
// + (lane % 4) * 2 + e.
template <class S, int kFirstCol, int kCols>
__device__ __forceinline__ void GemmPromote(GemmConsumerState<S>& c, float (&step)[S::kMBlocks][kCols / 2],
                                            const GemmStepScales<S>& scales = {}) {
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb) {
    Warpgroup::FenceRegisters(step[mb]);
#pragma unroll
    for (int j = 0; j < kCols / 8; ++j) {
      float2 column_scale = make_float2(1.0f, 1.0f);
      if constexpr (S::kScaleBlocks > 0 && S::kBScaleColumns == 0)
        column_scale = *reinterpret_cast<const float2*>(scales.slot + S::kBM + kFirstCol + j * 8 + (c.lane % 4) * 2);
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int i = j * 4 + h * 2 + e;
          float& d = c.d[mb][kFirstCol / 2 + i];
          if constexpr (S::kScaleBlocks > 0) {
            const float row_scale = scales.rows[mb][h][BScaleZone<S>(kFirstCol + j * 8)];
            const float scale = S::kBScaleColumns ? row_scale : row_scale * (e ? column_scale.y : column_scale.x);
            d = fmaf(step[mb][i], scale, d);
          } else {
            d += step[mb][i];
          }
        }
    }
  }
}

// Promoted main-loop steps, kPromotedChain at a time (fewer where a unit's steps end), each
// issued in two column halves with step sums of their own, so that one half's sums are added
// while a wgmma runs:
//   issue h0(1), h1(1) | add h0(1) | issue h0(2) | add h1(1) | issue h1(2) | add h0(2) | ... | wait, add h1(last)
// The tensor cores stand idle only for the chain's last addition. Nothing is in flight from
// one chain to the next: with a wgmma carried over the loop's back edge (step sums taking
// turns, or a half added in the next step) ptxas serialized every wgmma (C7514); with one set
// of sums waited on each step the tensor cores stood idle through every addition (8192^3: 975
// us against 751 unpromoted; chains of 2 steps 889; H200, 2026-11-30).
// Split-K units (products of few rows, bound by reading B) take chains of 2: their unit
// bookkeeping beside chains of 4 spilled (64x128 tiles, 2026-11-30). 3xTF32 takes chains of 1
// (a step waited on whole, its second half added with the tensor cores idle): with chains of
// 2 to 4 ptxas serialized its wgmmas (C7514) for two consumers in most of its forms. Measured
// both ways (4096^3 + bias, H200, 2026-12-01): chains of 4, serialized, 1620 µs; chains of 1
// 1717 µs. A form that neither serializes nor idles is still to find. (3xTF32's A registers
// are rewritten by each step's GemmLoadA: chains of 1 only.)
// A chain's length is also a power of two dividing every unit's steps (4 for K = 1024, 2 for
// K = 768), so its steps are a constant: with a partial chain possible (K = 768's six steps in
// chains of 4; split-K's units, whose ends the compiler cannot see), the skipped steps' branch
// lies between a wgmma and the reading of its sums, and ptxas serialized every wgmma (C7514):
// GPT-2's FP8 products, all but one of K = 768, ran at 144 TF/s (H200, 2026-12-04). Chains of 3
// serialized too. Stream-K's parts, whose ends vary, take chains of 1, and so do block scales
// per column beside 192 columns (chains of 4 spilled; 128 columns take them: GemmPromotedSteps
// holds a step's slot until its column scales are read). B's scales shared by the tile's
// columns take chains of 4 at 192 columns since their step's scales are read once, as its
// first half is added (2026-12-07: no spill; read as each half was added, with the slot held
// until then, they took chains of 2, 4 spilling).
// (A unit has `steps` steps, or the K steps left over after the whole ones, `partial`.)
constexpr int PromotedChainDividing(int steps, int partial, int longest) {
  for (int chain = longest; chain > 1; chain /= 2)
    if (steps % chain == 0 && partial % chain == 0) return chain;
  return 1;
}
template <class S>
constexpr int kUnitSteps = S::kSplits > 1 ? S::kSplitSteps : S::kKSteps;
template <class S>
constexpr int kPromotedChain = S::kSplitTf32 || S::kStreamK || (S::kScaleBlocks && S::kBN > 128 && !S::kBScaleColumns) ? 1
                               : PromotedChainDividing(kUnitSteps<S>, S::kKSteps % kUnitSteps<S>, S::kSplits > 1 ? 2 : 4);
// The overlapped epilogue's (GemmConsumerOverlapped): its first steps one at a time beside the
// held tile's chunks, the rest in chains dividing both what is left after them and a whole unit
// (a tile without a held one before it runs all its steps in chains).
template <class S>
constexpr int kOverlappedChain = PromotedChainDividing(S::kKSteps, S::kKSteps - (S::kChunks < S::kKSteps ? S::kChunks : S::kKSteps), 4);
template <class S, int kChain = kPromotedChain<S>>
__device__ __forceinline__ void GemmPromotedSteps(const GemmSharedMemory<S>& sm, const GemmMaps& maps, GemmConsumerState<S>& c,
                                                  const TileCoordinates& t, int ks, int load_at) {
  if constexpr (S::kWholeSteps) {  // a step waited on whole, then added
    GemmIssueStepInto(sm, maps, c, t, ks, load_at, c.step[0], false);
    Warpgroup::Wait<0>();
    GemmReleaseSlot(sm, c.ring.stage, c.local);
    c.ring.Advance();
    GemmPromote<S, 0, S::kBN>(c, c.step[0]);
  } else {
    constexpr int kHalf = S::kBN / 2;
    // Block scales: a step's, read as its first half is added; a slot whose B scales are per
    // column is held until its second half is added (the column scales are read as added).
    constexpr bool kHoldSlot = S::kScaleBlocks > 0 && S::kBScaleColumns == 0;
    const int run_start = S::kBScaleRuns > 1 ? S::kBScaleColumns - t.n * S::kOutBN % S::kBScaleColumns : 0;
    GemmIssueStepInto<S, kHalf, 0>(sm, maps, c, t, ks, load_at, c.step[0], false);
    GemmIssueStepInto<S, kHalf, kHalf>(sm, maps, c, t, ks, load_at, c.step[1], false);
    int slot = c.ring.stage;  // the slot half 1 of the last step issued still reads
    Warpgroup::Wait<1>();
    GemmStepScales<S> scales = GemmReadStepScales(sm, slot, c, run_start);
    GemmPromote<S, 0, kHalf>(c, c.step[0], scales);
    c.ring.Advance();
#pragma unroll
    for (int i = 1; i < kChain; ++i) {  // every chain whole
      GemmIssueStepInto<S, kHalf, 0>(sm, maps, c, t, ks + i, load_at, c.step[0], false);
      Warpgroup::Wait<1>();
      if constexpr (!kHoldSlot) GemmReleaseSlot(sm, slot, c.local);
      GemmPromote<S, kHalf, kHalf>(c, c.step[1], scales);
      if constexpr (kHoldSlot) GemmReleaseSlot(sm, slot, c.local);
      GemmIssueStepInto<S, kHalf, kHalf>(sm, maps, c, t, ks + i, load_at, c.step[1], false);
      Warpgroup::Wait<1>();
      slot = c.ring.stage;
      scales = GemmReadStepScales(sm, slot, c, run_start);
      GemmPromote<S, 0, kHalf>(c, c.step[0], scales);
      c.ring.Advance();
    }
    Warpgroup::Wait<0>();
    if constexpr (!kHoldSlot) GemmReleaseSlot(sm, slot, c.local);
    GemmPromote<S, kHalf, kHalf>(c, c.step[1], scales);
    if constexpr (kHoldSlot) GemmReleaseSlot(sm, slot, c.local);
  }
}

// One promoted step beside an overlapped epilogue's chunk: both column halves issued into the
// step sums (GemmPromotedStepIssue), the chunk's epilogue run while they compute, then waited
// on, the slot handed back and the sums added (GemmPromotedStepRetire). The chunk's arithmetic
// stands where a chain's other half's additions stand in GemmPromotedSteps.
template <class S>
__device__ __forceinline__ void GemmPromotedStepIssue(const GemmSharedMemory<S>& sm, const GemmMaps& maps, GemmConsumerState<S>& c,
                                                      const TileCoordinates& t, int ks) {
  static_assert(!S::kWholeSteps && S::kScaleBlocks == 0, "the overlapped epilogue's promoted steps: FP8 without block scales");
  constexpr int kHalf = S::kBN / 2;
  GemmIssueStepInto<S, kHalf, 0>(sm, maps, c, t, ks, -1, c.step[0], false);
  GemmIssueStepInto<S, kHalf, kHalf>(sm, maps, c, t, ks, -1, c.step[1], false);
}
template <class S>
__device__ __forceinline__ void GemmPromotedStepRetire(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c) {
  constexpr int kHalf = S::kBN / 2;
  Warpgroup::Wait<0>();
  GemmReleaseSlot(sm, c.ring.stage, c.local);
  GemmPromote<S, 0, kHalf>(c, c.step[0]);
  GemmPromote<S, kHalf, kHalf>(c, c.step[1]);
  // The additions done here: the compiler otherwise sank them past the next chunk's barrier
  // wait, below the next step's wgmmas, which then wrote copies of the step sums; ptxas
  // waited on every such wgmma (C7517/C7519) wherever two chunks issued steps.
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb) Warpgroup::FenceRegisters(c.d[mb]);
}

// Partial tiles in scratch memory (split-K's and stream-K's): slot `slot` holds each
// consumer's kMBlocks * kBN / 2 sums a thread, element i of all 128 threads together
// (coalesced). This thread's first one:
template <class S>
__device__ __forceinline__ float* GemmPartial(float* partials, long long slot, const GemmConsumerState<S>& c) {
  return partials + (slot * S::kConsumers + c.consumer) * (S::kMBlocks * S::kBN / 2) * 128 + c.local;
}
// The accumulators out to a partial, fenced, every consumer past the store.
template <class S>
__device__ __forceinline__ void GemmStorePartial(const GemmConsumerState<S>& c, float* at) {
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int i = 0; i < S::kBN / 2; ++i) __stcg(at + (mb * S::kBN / 2 + i) * 128, c.d[mb][i]);
  __threadfence();
  NamedBarrierSync(S::kHandOverBarrier, S::kConsumers * 128);
}
// A partial into the accumulators (kAdd: added to them), read through L2 (__ldcg; L1 is not
// coherent). One partial's values are independent loads in flight.
template <class S, bool kAdd>
__device__ __forceinline__ void GemmLoadPartial(GemmConsumerState<S>& c, const float* at) {
#pragma unroll
  for (int mb = 0; mb < S::kMBlocks; ++mb)
#pragma unroll
    for (int i = 0; i < S::kBN / 2; ++i) {
      const float v = __ldcg(at + (mb * S::kBN / 2 + i) * 128);
      c.d[mb][i] = kAdd ? c.d[mb][i] + v : v;
    }
}

// Split-K: every unit leaves its partial sums in scratch memory, and the unit that finishes a
// tile last goes on with the sum of all partials, added in split order whichever unit that
// is, so results do not depend on timing. (Summed element by element, the loads of one
// element's splits waited on each other: 16 x 4096 x 4096 took 30 us with 2 splits and 964 us
// with 16, H100.) Memory order: the partials are fenced before the counter's atomic, and the
// last unit fences before reading them. Returns whether this unit runs the epilogue.
template <class S>
__device__ __forceinline__ bool GemmSplitKHandOver(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c, int unit, int tile,
                                                   unsigned* __restrict__ tile_counters, float* __restrict__ partials) {
  GemmStorePartial(c, GemmPartial(partials, unit, c));
  if (c.consumer == 0 && c.local == 0) {
    const bool last = atomicAdd(tile_counters + tile, 1u) == S::kSplits - 1;
    if (last) tile_counters[tile] = 0;  // zero again for the next launch
    *sm.finishes_tile = last;
  }
  NamedBarrierSync(S::kHandOverBarrier, S::kConsumers * 128);
  if (!*sm.finishes_tile) return false;
  __threadfence();
  // Every partial, this unit's own too (it is in L2), in split order: the sum does not depend
  // on which unit came last.
  GemmLoadPartial<S, false>(c, GemmPartial(partials, (long long)tile * S::kSplits, c));
#pragma unroll 1
  for (int s = 1; s < S::kSplits; ++s) GemmLoadPartial<S, true>(c, GemmPartial(partials, (long long)tile * S::kSplits + s, c));
  return true;
}

// Stream-K: a part that leaves its tile unfinished (w.finishes false) leaves its sums in
// scratch memory, in its CTA's slot (a CTA has at most one such part: its range's last steps),
// and counts itself in the tile's counter; the part holding the tile's last step (on a later
// CTA, run as that CTA's last work) waits until every earlier CTA of the tile has counted,
// then adds their partials in CTA order: the sum does not depend on timing. Memory order as
// in GemmSplitKHandOver. Returns whether this part runs the epilogue.
template <class S>
__device__ __forceinline__ bool GemmStreamKHandOver(const GemmSharedMemory<S>& sm, GemmConsumerState<S>& c, const GemmWork& w,
                                                    unsigned* __restrict__ tile_counters, float* __restrict__ partials) {
  if (w.stream_tile < 0) return true;  // a whole tile
  if (!w.finishes) {
    GemmStorePartial(c, GemmPartial(partials, w.unit, c));
    if (c.consumer == 0 && c.local == 0) atomicAdd(tile_counters + w.stream_tile, 1u);
    return false;
  }
  const int first = GemmStreamK<S>::Owner(w.stream_tile * S::kKSteps);  // the tile's first CTA; this one is its last
  if (c.consumer == 0 && c.local == 0) {
    volatile unsigned* counter = tile_counters + w.stream_tile;
    while (*counter < (unsigned)(w.unit - first)) __nanosleep(32);
    *counter = 0;  // zero again for the next launch (every part has counted)
  }
  NamedBarrierSync(S::kHandOverBarrier, S::kConsumers * 128);
  __threadfence();
#pragma unroll 1
  for (int cta = first; cta < w.unit; ++cta) GemmLoadPartial<S, true>(c, GemmPartial(partials, cta, c));
  return true;
}

}  // namespace tf

#include "gemm_sm90_epilogue.cuh"

namespace tf {

// An amax's hand-over once this consumer's tiles are done: its warp's largest |u| into the
// scratch word by an atomic max, then the count of warps that have added theirs; the grid's
// last warp takes the result (zeroing both words for the next launch) and writes it. Memory
// order: each warp's max is fenced before its count, and the last fences before reading.
template <class S, class Epilogue>
__device__ __forceinline__ void GemmAmaxFinish(const Epilogue& epilogue, const GemmConsumerState<S>& c, unsigned* __restrict__ words) {
  // (A non-negative float orders as its bits do, and a NaN's are above every number's.)
  const unsigned warp_max = __reduce_max_sync(0xffffffffu, __float_as_uint(epilogue.tf_amax));
  if (c.lane != 0) return;
  atomicMax(words, warp_max);
  __threadfence();
  const unsigned warps = gridDim.x * (unsigned)S::kConsumers * 4u;
  if (atomicAdd(words + 1, 1u) != warps - 1) return;
  __threadfence();
  const unsigned all = atomicExch(words, 0u);
  atomicExch(words + 1, 0u);
  epilogue.StoreAmax(all);
}

template <class S, class Epilogue>
__device__ __forceinline__ void GemmConsumer(const GemmSharedMemory<S>& sm, const GemmMaps& maps, const Epilogue& epilogue, int cta_rank,
                                             int consumer, unsigned* __restrict__ tile_counters, float* __restrict__ partials) {
  Warpgroup::GrowRegisters<S::kConsumerRegisters>();
  const int cluster_id = blockIdx.x / S::kClusterM, clusters = gridDim.x / S::kClusterM;
  GemmConsumerState<S> c;
  c.consumer = consumer;
  c.local = threadIdx.x % 128, c.warp = c.local / 32, c.lane = c.local % 32;
  c.rows = GemmRows<S>(maps);
  // Ping-pong: the consumers take the CTA's tiles in turn. The producer fills the ring tile
  // by tile, so each consumer skips the other's steps, and one's epilogue runs while the
  // other's main loop keeps the tensor cores busy.
  const int first_unit = S::kPingPong ? cluster_id + consumer * clusters : cluster_id;
  const int unit_step = S::kPingPong ? 2 * clusters : clusters;
  // Their main loops strictly alternate (turn barriers): a consumer waiting on a slot is then
  // never more than one phase ahead of it, as parity waits need.
  if (S::kPingPong && consumer == 1) c.ring.Skip(S::kKSteps);
  if constexpr (S::kOverlap) {
    GemmConsumerOverlapped<S>(sm, maps, epilogue, c, cta_rank, first_unit, unit_step);
  } else {
    int main_loops = 0, epilogues = 0;
    if constexpr (S::kNormA) GemmCopyNormScale(sm, maps, c);
    GemmWork w;
    for (GemmWorkList<S> works(first_unit, unit_step, maps); works.Next(w); ++main_loops) {
      const TileCoordinates t = GemmTileAt<S>(w.tile, cta_rank, maps);
      const int k_begin = w.begin, k_end = w.end;
      // The staged load (never with split-K) halfway through a part that runs the epilogue.
      const int load_at = w.finishes ? (k_begin + k_end) / 2 : -1;
      if (S::kPingPong && (consumer == 1 || main_loops > 0)) sm.turn[consumer].Wait((consumer == 1 ? main_loops : main_loops - 1) & 1);
      c.previous = -1;
      if constexpr (S::kPromote) {
        GemmZeroAccumulators(c);
        for (int ks = k_begin; ks < k_end; ks += kPromotedChain<S>) GemmPromotedSteps(sm, maps, c, t, ks, load_at);
      } else if constexpr (S::kNormA) {
        GemmNormedSteps(sm, c, k_begin, k_end);
        GemmScaleRowsByNorm(c, maps.norm_epsilon);
      } else {
        for (int ks = k_begin; ks < k_end; ++ks, c.ring.Advance()) {
          GemmIssueStep(sm, maps, c, t, ks, k_begin, load_at);
          GemmRetireStep(sm, c);
        }
        Warpgroup::Wait<0>();
        GemmReleaseSlot(sm, c.previous, c.local);
      }
      if (S::kPingPong && c.local == 0) sm.turn[1 - consumer].Arrive();
      if constexpr (S::kSplits > 1)
        if (!GemmSplitKHandOver(sm, c, w.unit, w.tile, tile_counters, partials)) continue;
      if constexpr (S::kStreamK)
        if (!GemmStreamKHandOver(sm, c, w, tile_counters, partials)) continue;
      GemmEpilogue<S, false>(sm, epilogue, c, t, 0, nullptr, epilogues++ & 1);
      if constexpr (S::kStagedStore) GemmEpilogueStore(sm, maps, c, t);
      if (S::kPingPong) c.ring.Skip(S::kKSteps);  // the other consumer's next tile
    }
  }
  if constexpr (S::kAmax) GemmAmaxFinish<S>(epilogue, c, maps.amax);
  if constexpr (S::kStagedStore && !S::kStoreByThreads)
    if (c.local == 0) TmaStoreWait();  // shared memory must outlive the stores reading it
}

}  // namespace tf

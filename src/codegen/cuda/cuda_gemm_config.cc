#include "codegen/cuda/cuda_gemm_config.h"

#include <algorithm>
#include <limits>
#include <fmt/format.h>

#include "codegen/gemm_gates.h"
#include "codegen/gemm_n_groups.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

namespace gemm_layout {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t Tiles(const GemmTemplateKernel& g, int block_m, int block_n) {
  return CeilDiv(g.rows, block_m) * CeilDiv(g.n, TileOutputColumns(g, block_n)) * g.batch;
}
int BlockK(const GemmTemplateKernel& g) { return 128 / static_cast<int>(DTypeSize(g.operand_dtype)); }
// A row of every operand tile is one 128-byte swizzle row, whatever the type.
int64_t StageBytes(const CudaGemmConfig& c) { return int64_t{c.block_m + c.block_n} * 128; }
// Consumer warpgroups, and the output rows each computes per tile: ping-pong consumers own
// whole tiles; cooperative ones split a tile's rows, 64 each.
int Consumers(const CudaGemmConfig& c) { return c.pingpong.value_or(false) ? 2 : c.block_m / 64; }
int ConsumerRows(const CudaGemmConfig& c) { return c.pingpong.value_or(false) ? c.block_m : 64; }
int AccumulatorRegisters(const CudaGemmConfig& c, int block_n) { return ConsumerRows(c) * block_n / 128 * (c.promote.value_or(false) ? 2 : 1); }
// Three consumers (192-row tiles) have 152 registers a thread: 96 for accumulators (64 x 192).
int MaxAccumulatorRegisters(const CudaGemmConfig& c) { return Consumers(c) == 3 ? 96 : c.promote.value_or(false) ? 192 : 128; }

// The tiles the epilogues stage for their TMA stores: each consumer's rows × a tile's output
// columns of half-precision values (or 8-bit floats).
int64_t StagingBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g, bool staged) {
  return staged ? int64_t{Consumers(c)} * ConsumerRows(c) * TileOutputColumns(g, c.block_n) * StagedStoreBytes(g) : 0;
}
int64_t ResidualRingBytes(const CudaGemmConfig& c, bool ringed) {
  return ringed ? int64_t{kResidualSlots} * c.block_m * (c.block_n / EpilogueChunks(c)) * 2 : 0;
}
int64_t SplitBufferBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g) {
  if (!g.split_f32) return 0;
  // B's small parts (A's stay in the consumers' registers); B MN-major: its big parts K-major
  // too (kSplitTransposesB).
  return c.stages * (int64_t{c.block_n} * 128 + (g.b_k_major < 0 ? int64_t{c.block_n} * 128 : 0));
}
// The ring of stages, aligned to 1024 bytes (the swizzle pattern's period), 3xTF32's parts
// of B, the staging tile, the residual's ring, the norm's scale, the block scales' slots, then
// the barriers (full and empty per stage, two ping-pong turns, three staged loads, split-K's
// "this unit finishes the tile" flag, full and empty per residual slot, 3xTF32's split_full per
// stage after those).
int64_t SharedBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g, bool staged, bool ringed) {
  return 1024 + c.stages * StageBytes(c) + SplitBufferBytes(c, g) + StagingBytes(c, g, staged) + ResidualRingBytes(c, ringed) +
         (g.row_norm ? g.k * 2 : 0) +                                              // the norm's scale (gemm_sm90's kNormA)
         (g.scale_blocks ? int64_t{c.stages} * (c.block_m + c.block_n) * 4 : 0) +  // a step's block scales a slot
         8 * (2 * c.stages + 6 + (ringed || g.split_f32 ? 2 * kResidualSlots : 0) + (g.split_f32 ? c.stages : 0));
}

int64_t KSteps(const GemmTemplateKernel& g) { return CeilDiv(g.k, BlockK(g)); }
int UnitsWithoutEmpty(const GemmTemplateKernel& g, int64_t splits) {
  return static_cast<int>(CeilDiv(KSteps(g), CeilDiv(KSteps(g), splits)));
}
int EpilogueChunks(const CudaGemmConfig& c) {
  // Promoted FP8 steps (128 of K: GPT-2's K = 768 is six) in 4 chunks, so that a short main
  // loop still covers every chunk with a step; each chunk's step is printed whole, two
  // wgmmas and their additions.
  const int most = c.promote.value_or(false) ? 4 : 16;
  int chunks = 1;
  while (chunks < most && (c.block_n / 8) % (chunks * 2) == 0) chunks *= 2;
  return chunks;
}
int64_t StepsPerSplit(const GemmTemplateKernel& g, const CudaGemmConfig& c) { return CeilDiv(KSteps(g), c.splits); }
// Split-K's scratch memory: a tile counter each in the counters' region (launch_spec.h),
// then every unit's f32 partial tile.
int64_t CounterBytes(const GemmTemplateKernel&, const CudaGemmConfig&) { return kScratchCounterBytes; }
// Stream-K's: a counter per stream-K tile, then a partial tile per CTA (at most one part a CTA
// leaves unfinished: its range's last steps).
int64_t ScratchBytes(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  if (StreamKTiles(g, c) > 0) return CounterBytes(g, c) + int64_t{StreamKCtas(g, c)} * c.block_m * c.block_n * 4;
  if (c.splits <= 1) return 0;
  return CounterBytes(g, c) + Tiles(g, c.block_m, c.block_n) * c.splits * c.block_m * c.block_n * 4;
}
int64_t StreamKTiles(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  if (!c.stream_k.value_or(false) || c.block_n == 0) return 0;
  const int64_t tiles = Tiles(g, c.block_m, c.block_n), last_round = tiles % c.sm_count;
  return last_round * KSteps(g) / kStreamKMinSteps >= 2 ? last_round : 0;
}
int StreamKCtas(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  return static_cast<int>(std::min<int64_t>(c.sm_count, StreamKTiles(g, c) * KSteps(g) / kStreamKMinSteps));
}
int64_t GridCtas(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  const int64_t tiles = Tiles(g, c.block_m, c.block_n), streamed = StreamKTiles(g, c);
  if (streamed > 0) return tiles > streamed ? c.sm_count : StreamKCtas(g, c);
  return c.cluster_m * std::min<int64_t>(c.sm_count / c.cluster_m, tiles / c.cluster_m * c.splits);
}

// An access to a half-precision buffer at the product's own (row, column): a tile of it can
// go through the staging tile...
static bool AtTile(const GemmTemplateKernel& g, const Index& index, DType dtype) {
  return IsHalf(dtype) && AtProductPosition(g, index);
}
// ...and one TMA can move it where its rows are whole 16-byte units.
static bool RowsAligned(const GemmTemplateKernel& g) { return g.n * 2 % 16 == 0; }
static bool TileAccess(const GemmTemplateKernel& g, const Index& index, DType dtype) { return AtTile(g, index, dtype) && RowsAligned(g); }

// The first tile access among the epilogue's loads of another value than the product (a
// residual; a gated product's gate comes in registers), or -1.
static int ResidualLoad(const GemmTemplateKernel& g) {
  const Kernel& k = g.epilogue;
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind == ScalarValue::Kind::kLoad && k.buffers[value.buffer].node != g.product && k.buffers[value.buffer].node != g.gate_value &&
        TileAccess(g, value.index, k.buffers[value.buffer].dtype))
      return static_cast<int>(v);
  }
  return -1;
}

bool ProductMayBeHeld(const GemmTemplateKernel& g) {
  // A product grouped over N stores its parts' outputs from the main loop's tail (its
  // overlapped form is not written).
  if (!g.n_parts.empty()) return false;
  // Held rounded to the MatMul's 16-bit type, or an FP8 product's f32 sums as they are (its
  // 64 x 128 a consumer beside the promoted ones; block scales are read in the main loop's
  // chains only).
  const bool fp8_sums = IsFloat8(g.operand_dtype) && g.scale_blocks == 0;
  if (g.dtype != DType::kBF16 && g.dtype != DType::kF16 && !fp8_sums) return false;
  const Kernel& k = g.epilogue;
  const int residual = ResidualLoad(g);
  for (size_t v = 0; v < k.values.size(); ++v) {
    const ScalarValue& value = k.values[v];
    if (value.kind == ScalarValue::Kind::kLoad && k.buffers[value.buffer].node != g.product && k.buffers[value.buffer].elements > g.n &&
        static_cast<int>(v) != residual && k.buffers[value.buffer].node != g.gate_value)
      return false;
  }
  return true;
}

// The store the epilogue writes through shared memory, then out by TMA (or by the threads,
// StoreByThreads): the first half-precision store at the product's position (a staged load may
// share its tile), else the first 8-bit float one (e4m3, e5m2: a quantized output) whose rows
// are whole 16-byte units, or -1. (By the threads, an 8-bit output went as pairs of bytes, each
// a partial write of a sector: GPT-2's MLP product at 8x512 with its GELU cast to e4m3 took
// 75.7 µs that way, 64.2 staged; H200, 2026-12-04.)
int StagedStore(const GemmTemplateKernel& g) {
  const Kernel& k = g.epilogue;
  for (size_t s = 0; s < k.stores.size(); ++s)
    if (AtTile(g, k.stores[s].index, k.buffers[k.stores[s].buffer].dtype)) return static_cast<int>(s);
  // An f32 output where asked for (GemmTemplateKernel::stage_f32_output), its rows whole
  // 16-byte units (TMA's) as RowsAligned has them (an N of 8s: not written by the threads).
  if (g.stage_f32_output && RowsAligned(g))
    for (size_t s = 0; s < k.stores.size(); ++s)
      if (k.buffers[k.stores[s].buffer].dtype == DType::kF32 && AtProductPosition(g, k.stores[s].index)) return static_cast<int>(s);
  for (size_t s = 0; s < k.stores.size(); ++s) {
    const DType dtype = k.buffers[k.stores[s].buffer].dtype;
    if ((dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2) && g.n % 16 == 0 && AtProductPosition(g, k.stores[s].index))
      return static_cast<int>(s);
  }
  return -1;
}

int StagedStoreBytes(const GemmTemplateKernel& g) {
  const int s = StagedStore(g);
  return s < 0 ? 2 : static_cast<int>(DTypeSize(g.epilogue.buffers[g.epilogue.stores[s].buffer].dtype));
}

bool StoreByThreads(const GemmTemplateKernel& g) { return StagedStore(g) >= 0 && !RowsAligned(g); }

// The load (a residual) whose tile TMA brings into the staging tile while the main loop
// runs, read there in place of scattered global loads. Needs a staged store. Split-K issues
// a tile's loads before knowing which unit runs its epilogue, and an overlapped epilogue
// keeps the staging tile for the previous tile's store: none staged there.
int StagedLoad(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  // (Not beside a gate: the staged and ringed loads address whole tiles' columns; not needed yet.)
  // (An 8-bit staged store's tile has no room for a 16-bit residual.)
  if (StagedStore(g) < 0 || StagedStoreBytes(g) != 2 || c.splits > 1 || c.overlap_epilogue.value_or(false) || !g.gate.empty()) return -1;
  return ResidualLoad(g);
}

int RingedLoad(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  return c.overlap_epilogue.value_or(false) && g.gate.empty() ? ResidualLoad(g) : -1;
}

Status CheckClusters(const GemmTemplateKernel& g, const CudaGemmConfig& c) {
  if (c.cluster_m != 1 && c.cluster_m != 2) return InvalidArgument(fmt::format("{}: clusters of {} CTAs (need 1 or 2)", g.name, c.cluster_m));
  if (c.cluster_m == 1) return Status::Ok();
  // The pair splits B's 64-column boxes between them and walks tile pairs in lockstep.
  if (c.splits > 1) return InvalidArgument(fmt::format("{}: clusters sharing B need one unit per tile, not split-K", g.name));
  if (c.stream_k.value_or(false)) return InvalidArgument(fmt::format("{}: clusters sharing B need one unit per tile, not stream-K", g.name));
  if (c.block_n % (64 * c.cluster_m) != 0)
    return InvalidArgument(fmt::format("{}: block_n {} does not split into {} CTAs' 64-column boxes", g.name, c.block_n, c.cluster_m));
  if (CeilDiv(g.rows, c.block_m) % c.cluster_m != 0)
    return InvalidArgument(
        fmt::format("{}: {} rows of tiles, not a multiple of the cluster's {}", g.name, CeilDiv(g.rows, c.block_m), c.cluster_m));
  if (c.sm_count < c.cluster_m) return InvalidArgument(fmt::format("{}: {} SMs for clusters of {}", g.name, c.sm_count, c.cluster_m));
  return Status::Ok();
}

bool ClustersFit(const GemmTemplateKernel& g, const CudaGemmConfig& c, int cluster) {
  CudaGemmConfig paired = c;
  paired.cluster_m = cluster;
  return CheckClusters(g, paired).ok();
}

}  // namespace gemm_layout

using namespace gemm_layout;

CudaGemmConfig ResolveGemmConfig(const GemmTemplateKernel& g, const CudaGemmConfig& requested) {
  CudaGemmConfig c = requested;
  const bool rows_by_rule = c.block_m == 0;
  if (rows_by_rule) c.block_m = 128;
  // A decode-like product (a few rows) wastes at most 64 rows of each tile, not 128.
  if (g.rows <= 64 && !c.pingpong.value_or(false)) c.block_m = 64;
  // Cooperative consumers. Ping-pong ones (128 x 128 tiles, one consumer's epilogue behind
  // the other's main loop) were the rule for a residual after a short main loop (K <= 1024)
  // until the cooperative tile's overlapped epilogue read it from a ring of its own: H200,
  // 2026-11-28, µs, ping-pong 5 stages / overlapped 128x256 3 stages: residual
  // 16384x4096x1024 200.2 / 191.3, 4096^3 179.8 / 175.3, the MLP block 388.3 / 382.1, the GPT
  // block B8 783.0 / 774.4. Elsewhere the wider cooperative tile had won since 2026-11-24
  // (H100, cooperative 128x256 / ping-pong 128x128 at 5 / 4 stages: 16384x4096x1024
  // bias+ReLU 195 / 233 / 206, bias+GELU 208 / 240 / 229; 4096^3 bias+GELU 180 / 189 / 208;
  // the MLP block 422 / 455). The tuner still tries ping-pong tiles.
  // TF32 (f32 products): the epilogue stores f32 values straight from the accumulators, in
  // the main loop's tail (neither a TMA store nor an overlapped epilogue holds f32 tiles), so a
  // short main loop leaves the tensor cores idle through it; ping-pong consumers cover one's
  // epilogue with the other's main loop (H200, 2026-11-29, µs, cooperative 128x256 /
  // ping-pong 128x128: K = 768 residual 8192x768 76.2 / 56.3, bias 8192x3072 243.5 / 174.8;
  // K = 1024 bias+GELU 16384x4096 596 / 505; K = 4096 residual 16384x1024 407.5 / 450.9, bias
  // 4096^2 413.5 / 445.2). Where 128x128 tiles would leave SMs idle, the cooperative forms
  // (split-K) stay.
  // (FP8 products, f32 too, stay cooperative until measured: promoted sums fit at most 64 x 192
  // accumulators a consumer, and ping-pong consumers hold 128 rows.)
  // 3xTF32 stays cooperative: its consumers split B's tile between them.
  // A normed by rows (GemmTemplateKernel::row_norm): cooperative consumers, one unit a tile
  // (a row's squares summed over the whole of K), the epilogue in the tail.
  if (g.row_norm) c.pingpong = false, c.overlap_epilogue = false, c.stream_k = false;
  const bool short_tf32 = g.operand_dtype == DType::kF32 && !g.split_f32 && g.k <= 1024 && g.rows > 64 && Tiles(g, 128, 128) >= c.sm_count;
  c.pingpong = c.pingpong.value_or(short_tf32);
  // Promoted sums for FP8 and 3xTF32 (gemm_sm90_consumer.cuh says why).
  c.promote = g.split_f32 || g.scale_blocks != 0 || (IsFloat8(g.operand_dtype) && c.promote.value_or(true));  // 3xTF32's A registers need it
  // FP8 products with the epilogue overlapped: their f32 sums held beside the promoted ones
  // (ProductMayBeHeld) take tiles of 128 columns at most, promoted sums only (the tensor
  // cores' own accumulation beside held sums serialized its wgmmas). Asked for or tried by
  // the tuner, not the rule: the tail's 128x192 tiles won wherever timed (H200, 2026-12-04,
  // µs, tail / overlapped 128x128: GPT-2's MLP product with bias, GELU and quantization
  // 4096 x 768 -> 3072 37.3 / 40.4, the plain product 25 / 27, GPT-2's MLP block 53.6 / 69.9,
  // the 8192 x 4096 x 16384 block 1847 / 2117). RULE_NUMBERS
  const bool fp8_overlap = IsFloat8(g.operand_dtype) && *c.promote && ProductMayBeHeld(g) && !*c.pingpong && c.block_m != 192 &&
                           c.overlap_epilogue.value_or(false);
  if (c.block_n == 0) {
    // The width whose tiles end soonest: the persistent grid's rounds (every SM a tile a
    // round) times a tile's columns, a column a little dearer in a narrower tile (its A tile
    // is loaded for fewer columns) and the padding past N counted as work. The tiles of a
    // round end together, so a last round of a few tiles costs a whole one: GPT-2's QKV
    // (4096x2304x768) took 288 tiles of 128x256 in 3 rounds where 384 of 128x192 take 3 rounds
    // of smaller tiles, and its N = 768 products 192 tiles of 128x128 in 2 rounds where 128 of
    // 128x192 take one. H200, 2026-11-30: GPT-2 8x512 3021 -> 2865 µs, ViT-B b32 3703 -> 3485;
    // the four GPT-2 products alone then at cuBLAS's speed (26.1 / 14.8 / 35.7 / 33.8 µs with
    // their epilogues against addmm's 26.7 / 15.8 / 32.6 / 28.2). A vocabulary of 50257 keeps
    // 256 (the wider tiles won there by far: 4096x768x50257 665 against 957 µs with 128-column
    // tiles); N = 384 at ConvNeXt's 100k rows takes 192 (no padding).
    double best = std::numeric_limits<double>::infinity();
    // A pair splits B's tile in 64-column boxes. Where no width both fits and splits (3xTF32's
    // 128 columns at most over N = 72), the single CTA's width, which CheckClusters then
    // refuses for the pair (the probe of RequestedGemmConfig had divided by a width of 0).
    //
    // 192-row tiles (three consumers; 16-bit operands, the epilogue in the tail, no pair) where
    // the rule picks the rows and they take fewer rounds: cuBLAS runs 192-row tiles where they
    // fill the SMs' rounds (H200, 2026-12-01: 6304 x 768 in 132 tiles of 192x192, 4096 x 768 in
    // 132 of 192x128). A column of them costs a little more than of 128x192 (3 stages, no
    // overlapped epilogue). H200, 2026-12-01, µs, the tuner's times, 192x192 / the rule before:
    // ViT-B at 6304 rows fc2 + residual 48.6 / 55.8, out-projection + residual 20.6 / 22.9, fc1 +
    // bias 49.7 / 52.7, fc1 + erf GELU 61.8 / 69.6 (192x128 at 4 stages 48.8 and 60.6: 792 tiles,
    // six whole rounds); GPT-2's QKV at 4096 rows 27.5 against 26.5 for 128x192 (3 rounds of
    // 128x192 against 2 of 192x192: the same area), hence 1.08 and 1.12. RULE_NUMBERS
    const bool three_consumers = rows_by_rule && IsHalf(g.operand_dtype) && !*c.pingpong && !c.overlap_epilogue.value_or(false) &&
                                 c.cluster_m <= 1 && c.block_m == 128;
    const int first_rows = c.block_m;
    for (bool split_by_pair : {c.cluster_m > 1, false}) {
      for (int m : {first_rows, 192}) {
        if (m == 192 && (!three_consumers || split_by_pair || g.rows < 192)) continue;
        CudaGemmConfig shape = c;
        shape.block_m = m;
        for (int n : {256, 192, 128, 64}) {
          if ((n > 64 && g.n < TileOutputColumns(g, n)) || AccumulatorRegisters(shape, n) > MaxAccumulatorRegisters(shape)) continue;
          // 3xTF32's parts of B add to a stage (128 columns keep 4 stages, 3 with B transposed;
          // wider tiles were slower when A's parts took shared memory too, not timed since).
          if (g.split_f32 && n > 128) continue;
          // Block scales: 256 columns twice over promoted take too many registers; 128x192 in
          // chains of one step (8192^3 1301 µs) beat 128x128 in chains of four (1448; H200,
          // 2026-12-04).
          if (g.scale_blocks && n > 192) continue;
          // B's scales shared by 128 columns: a tile inside one run reads one a step, a
          // 192-column tile two (chains of two steps). The widths as the cost below picks them
          // were the faster (H200, 2026-12-04, µs: 8192³ 1069 at 128x192, 1144 at 128x128;
          // 4096³ 145 at 128x128, 155 at 128x192). RULE_NUMBERS
          if (g.b_scale_columns && g.b_scale_columns % n != 0 && !(g.b_scale_columns == 128 && n == 192)) continue;
          if (fp8_overlap && n > 128) continue;
          if (split_by_pair && n % (64 * c.cluster_m) != 0) continue;
          if (m == 192 && n < 128) continue;
          if (!PartsTakeWidth(g, n)) continue;  // a tile's columns in one part of a grouped product
          const double per_column = m == 192 ? (n == 192 ? 1.08 : 1.12) : n == 256 ? 1.0 : n == 192 ? 1.04 : n == 128 ? 1.12 : 1.3;
          const double cost = static_cast<double>(CeilDiv(Tiles(g, m, n), c.sm_count)) * m / 128.0 * n * per_column;
          if (cost < best) best = cost, c.block_n = n, c.block_m = m;
        }
      }
      if (c.block_n != 0) break;
    }
  }
  if (c.splits == 0) {
    // Too few tiles to fill the GPU (a decode-like M): 128 columns a tile and K split into
    // units of at least 4 steps of 64, about half as many units as SMs. Such a product is
    // bound by reading B, and more units add partial-sum traffic without adding bandwidth:
    // 16 x 4096 x 4096 bf16 (H100, 2026-11-24, µs) 64-column tiles 21.5 / 22.7 / 26.9 with
    // 1 / 2 / 4 splits, 128-column 23.6 / 21.2 / 22.8 / 32.8 with 1 / 2 / 4 / 8, 256-column
    // 27-33; cuBLAS alone 18.
    // A 16-bit product of more rows (GPT-2 and BERT at batch 1: 128 x 768 x 768..3072, 6 to 24
    // tiles of 128x128) is bound by latency rather than by B: 64x64 tiles, one unit each unless
    // K is long, then units of about 12 steps, at most one unit an SM. H200, 2026-12-01, µs, the
    // tuner's times of GPT-2's products at 128 rows (kernels launched back to back), this rule's
    // form with the epilogue in the tail / overlapped / the rule before (128x128, split 2-10):
    // QKV with bias 7.01 / 7.10 / 11.23, proj with residual 7.23 / 7.62 / 11.84, fc with GELU
    // 8.06 / 7.97 / 12.19, fc2 (K = 3072) with residual, split 4, 10.98 / - / 17.47; the tuner
    // found no faster form among the 64/128-row, 64/128-column tiles split 1 to 12 it timed.
    // GPT-2 small at 1x128 then took 392 µs against torch.compile's 639 with CUDA graphs (686
    // the session before). Measured at 128 rows (GPT-2, BERT) and, within ResNet-50 at batch 1,
    // on products of 49 and 196 rows (368 against 588 µs a forward, both without programmatic
    // launches); not alone at 17 to 64 rows. Up to kReadBoundRows rows reading B bounds the
    // product (below).
    // (Tiles of 128x128 outputs: a gated product's hold both products' columns.)
    const bool few_tile_rule = !c.pingpong.value_or(false) && requested.block_n == 0 && g.rows > kReadBoundRows &&
                               Tiles(g, 128, g.gate.empty() ? 128 : 256) * 2 <= c.sm_count;
    c.splits = 1;
    // TF32 products of few tiles take 3xTF32's form too: in the generic one at the end
    // (128-column tiles, units of 4 steps or more) ResNet-50's f32 convolutions at batch 1 under
    // PyTorch's cudnn.allow_tf32 took 680 µs a forward, in this one 406 (3xTF32's 558; H200,
    // 2026-12-02, torch.compile with CUDA graphs 608-612). RULE_NUMBERS
    if (few_tile_rule && g.operand_dtype == DType::kF32) {
      // 3xTF32 (three products a step of half a 16-bit step's K) is bound by its steps: 64
      // columns a tile, 64 or 128 rows, K split into units of at least 6 steps, as many units
      // as SMs at most; the fewest steps on the critical path win, a step of 128 rows (two
      // consumers) costing 1.8 of 64's and each further unit half a step (its partial tile
      // through L2). H200, 2026-12-02, µs, the tuner's times of GPT-2's f32 products at 128
      // rows (A from registers), the best form / 64x64 by the 16-bit rule / PyTorch's exact
      // f32 (F.linear in a CUDA graph): QKV 128x64 split 3 18.72 / 22.56 / 30.24, proj 64x64
      // split 4 13.15 / 16.19 / 26.12, fc 128x64 split 2 28.83 / 31.01 / 27.09, fc2 64x64
      // split 5 23.71 / 23.71 / 54.14. RULE_NUMBERS
      // A gated product's tiles hold 64 columns of both products (128 wide): the LLaMA-style
      // model in f32 at 1x128 took 1023 µs gated, 1144 apart (H200, 2026-12-02).
      const int width = std::max(g.gate.empty() ? 64 : 128, NarrowestTileWidth(g));
      double best = std::numeric_limits<double>::infinity();
      for (int m : {64, 128}) {
        if (m == 128 && g.rows <= 64) continue;
        const int64_t splits = std::max<int64_t>(1, std::min<int64_t>({KSteps(g) / 6, c.sm_count / Tiles(g, m, width), 32}));
        const int units = UnitsWithoutEmpty(g, splits);
        const double cost = static_cast<double>(CeilDiv(KSteps(g), units)) * (m == 128 ? 1.8 : 1.0) + 0.5 * (units - 1);
        if (cost < best) best = cost, c.block_m = m, c.block_n = width, c.splits = units;
      }
    } else if (few_tile_rule && IsHalf(g.operand_dtype)) {
      // Where 64-column tiles would leave a second, partial round (LLaMA-style gate and up
      // projections, 128 x 2048 -> 5632: 176 tiles on 132 SMs), 128-column ones take a single
      // round; both are bound by what the SMs read more than by the tensor cores. H200,
      // 2026-12-01, µs, the tuner's times with every candidate measured: 64x64 17.25, 64x128
      // 13.44 (13.06 in clusters of two sharing B), 128x64 13.73, 128x128 16.13, any split-K
      // slower; cuBLAS 10.0 by Nsight Compute (64-row tiles 88 columns wide, 128 CTAs).
      c.block_m = 64;
      c.block_n = Tiles(g, 64, 64) > c.sm_count && g.n >= 128 && PartsTakeWidth(g, 128) ? 128 : NarrowestTileWidth(g);
      // A gated product's tiles hold both products' columns: 128 or 256 wide, the wider where
      // the narrower would leave a second round (the LLaMA-style gate and up at 128 rows: 88
      // tiles of 64x256 on 132 SMs). H200, 2026-12-02, the tuner's times: 20.83 µs in this form
      // (the best, in clusters of two, 20.13; 64x128 in two rounds 24.93), against 12.70 + 13.92
      // for the two products apart. RULE_NUMBERS
      if (!g.gate.empty()) c.block_n = Tiles(g, 64, 128) > c.sm_count && PartsTakeWidth(g, 256) ? 256 : 128;
      const int64_t splits = std::min<int64_t>({KSteps(g) / 12, c.sm_count / Tiles(g, 64, c.block_n), 32});
      if (splits > 1) c.splits = UnitsWithoutEmpty(g, splits);
      // A tile an SM leaves no next main loop to overlap the epilogue with: it runs in the
      // tail, on the f32 sums (one rounding, as cuBLAS's fused bias does), not on the product
      // held rounded (BERT-base at 1x128 drifted from eager's 0.021 to 0.029 of the output's
      // scale with it, H200, 2026-12-01).
      if (!c.overlap_epilogue && Tiles(g, 64, c.block_n) * c.splits <= c.sm_count) c.overlap_epilogue = false;
      // A deeper ring than the 6 stages elsewhere for a long K a unit (32 steps or more): more
      // of B in flight an SM. H200, 2026-12-02, µs, the tuner's times of the LLaMA-style
      // products at 128 rows, this rule's form at 6 / 8 stages: gate (32 steps) 13.12 / 12.51,
      // down + residual (2 units of 44) 16.54 / 15.52, q (2 of 16) 10.72 / 10.43; 12 stages no
      // faster than 8 (cuBLAS runs 11 of 64x88 tiles). From 16 steps a unit, ResNet-50 bf16 at
      // batch 1 (its products of 49 to 196 rows) took 450 µs, from 32 steps 272. RULE_NUMBERS
      if (c.stages == 0 && c.overlap_epilogue == false && KSteps(g) / c.splits >= 32 && (c.max_stages == 0 || c.max_stages >= 8)) {
        CudaGemmConfig deeper = c;
        deeper.stages = 8;
        if (SharedBytes(deeper, g, StagedStore(g) >= 0, RingedLoad(g, deeper) >= 0) <= kSharedLimit) c.stages = 8;
      }
    } else if (!c.pingpong.value_or(false) && Tiles(g, c.block_m, c.block_n) * 2 <= c.sm_count) {
      if (requested.block_n == 0 && g.n >= 128 && PartsTakeWidth(g, 128)) c.block_n = 128;
      const int64_t splits = std::min<int64_t>({c.sm_count / 2 / Tiles(g, c.block_m, c.block_n), KSteps(g) / 4, 32});
      if (splits > 1) c.splits = UnitsWithoutEmpty(g, splits);
    }
  }
  if (g.row_norm) c.splits = 1;  // (the rows' sums need the whole of K)
  // Stream-K where a partial last round after whole ones would leave SMs idle long enough to
  // pay for the partials' round trip through L2: the critical path in steps (whole rounds of
  // tiles, then the run's share, and about 3 steps a split tile for the partials) at most 70%
  // of the rounds' with the last one whole. Cooperative consumers with the epilogue in the
  // tail. Not for fewer tiles than SMs, which the rules above size (latency-bound products:
  // ResNet-50 at batch 1 took 393 µs with their single-unit tiles streamed, 342 before, H200,
  // 2026-12-01). The arithmetic promises more than stream-K gave:
  // H200, 2026-12-01, µs, the tuner's times, ViT-B's fc2 + residual at 6304 rows (200 tiles of
  // 128x192 on 132 SMs, 48 steps a tile: 96 steps on the critical path against 76 shared)
  // 54.2 against 55.8 whole; 192x128 tiles 52.8 against 55.3; 192x192 tiles in one round 48.6
  // (above). RULE_NUMBERS
  const bool tail_form = !*c.pingpong && !c.overlap_epilogue.value_or(false) && c.splits == 1 && c.cluster_m <= 1;
  if (c.stream_k.value_or(false) && !tail_form) c.stream_k = false;  // asked for wherever it applies
  if (!c.stream_k.has_value()) {
    c.stream_k = false;
    CudaGemmConfig streamed = c;
    streamed.stream_k = true;
    if (tail_form && Tiles(g, c.block_m, c.block_n) > c.sm_count && StreamKTiles(g, streamed) > 0) {
      const int64_t tiles = Tiles(g, c.block_m, c.block_n), steps = KSteps(g);
      const int64_t whole_rounds = CeilDiv(tiles, c.sm_count) * steps;
      const int64_t shared = tiles / c.sm_count * steps + CeilDiv(StreamKTiles(g, streamed) * steps, StreamKCtas(g, streamed)) + 3;
      c.stream_k = shared * 100 <= whole_rounds * 70;
    }
  }
  // As many stages as fit, at most 6. Ping-pong tiles stopped at 4 while 5 (what fits with a
  // staged store) measured 8-13% slower on the 16384x4096x1024 epilogues (H100,
  // 2026-11-24); since the later kernel changes 5 is the faster: the residual there 229-236
  // -> 217 us (H100, 2026-11-28), 213 -> 202 (H200, tuned, 2026-11-28).
  auto fitting_stages = [&](const CudaGemmConfig& x) {
    const bool staged = StagedStore(g) >= 0, ringed = RingedLoad(g, x) >= 0;
    CudaGemmConfig deeper = x;
    int stages = 2;
    const int deepest = x.max_stages > 0 ? std::max(3, std::min(x.max_stages, 6)) : 6;
    for (deeper.stages = 3; deeper.stages <= deepest && SharedBytes(deeper, g, staged, ringed) <= kSharedLimit; ++deeper.stages)
      stages = deeper.stages;
    return stages;
  };
  // The epilogue overlapped with the next tile's main loop wherever it can be (cooperative
  // consumers, one unit per tile, nothing read but vectors and a residual tile): the tensor
  // cores no longer wait for it (H200, 2026-11-27, µs: 16384x4096x1024 bias+ReLU 192 -> 183,
  // bias+GELU 206 -> 193, the MLP block 410 -> 399, the GPT block 835 -> 817). A residual
  // comes by TMA into a ring of its own, chunk by chunk (RingedLoad; numbers above). It is
  // added to the product held rounded to the MatMul's own type, as the graph computes it (an
  // FP8 product, an f32 one of 8-bit floats, holds its sums as they are: fp8_overlap).
  if (!c.overlap_epilogue) {
    c.overlap_epilogue = !*c.pingpong && c.splits == 1 && !c.stream_k.value_or(false) && c.block_m != 192 && ProductMayBeHeld(g) &&
                         (!IsFloat8(g.operand_dtype) || (fp8_overlap && c.block_n <= 128));
    // Except where the residual's ring leaves a long main loop (32 steps or more) fewer than
    // 4 stages and the tail form more: the loads then fall behind. H200, 2026-12-01, µs,
    // overlapped 128x192 at 3 stages / tail at 4: GPT-2's fc2 + residual 4096x3072 -> 768
    // 34.3 / 32.0, ViT-B's at 6304 rows 61.8 / 55.7; at 12 steps (their out-projections)
    // 15.2 / 15.1 and 22.9 / 23.1, and LLaMA-style's down + residual (88 steps, 3 stages
    // either way) is fastest overlapped.
    if (*c.overlap_epilogue && c.stages == 0 && KSteps(g) >= 32) {
      CudaGemmConfig tail = c;
      tail.overlap_epilogue = false;
      const int overlapped = fitting_stages(c);
      if (overlapped < 4 && fitting_stages(tail) > overlapped) c.overlap_epilogue = false;
    }
  }
  // FP8 products hold their sums only promoted, beside 128 columns at most (asked for wherever
  // it applies, as elsewhere).
  if (*c.overlap_epilogue && IsFloat8(g.operand_dtype) && !(fp8_overlap && c.block_n <= 128)) c.overlap_epilogue = false;
  // Single CTAs. Clusters of two sharing B tiles by multicast measured within 3% of them
  // either way (H100, 2026-11-28, us, single / paired: 16384x4096x1024 bias+GELU 196.2 /
  // 190.8, plain 183.1 / 183.9, ping-pong residual 229-236 / 241; 4096^3 175 / 177; 8192^3
  // 1349 / 1366; the MLP block 406.7 / 402.0): the tuner tries them.
  if (c.cluster_m == 0) c.cluster_m = 1;
  if (c.stages == 0) c.stages = fitting_stages(c);
  return c;
}


}  // namespace tilefuse

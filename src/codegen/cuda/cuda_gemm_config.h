// The GEMM template's configuration (tile shape, pipeline depth, consumers, split-K) and
// the rules that resolve it for a problem (measured on an H100; each rule says what), with
// the tile and shared-memory arithmetic the emitter (cuda_gemm_emitter) shares with them.
#pragma once

#include <cstdint>
#include <optional>

#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct CudaGemmConfig {
  // Ping-pong: each of two consumer warpgroups computes whole block_m × block_n tiles,
  // taking turns, so one's epilogue overlaps the other's main loop. Cooperative: the
  // block_m / 64 consumers split each tile's rows and run its epilogue together.
  // Chosen by ResolveGemmConfig when absent.
  std::optional<bool> pingpong;
  // Cooperative consumers without split-K: a tile's epilogue runs in chunks while the next
  // tile's main loop keeps the tensor cores busy, its products held meanwhile as packed
  // pairs of the product's own half-precision type (the MatMul's output as the graph
  // declares it). Chosen by ResolveGemmConfig when absent.
  std::optional<bool> overlap_epilogue;
  // FP8 products: each K step's products summed by the tensor cores on their own, then added
  // into the f32 accumulators in registers (CUTLASS's and DeepGEMM's "promotion"; cuBLAS's
  // default, torch._scaled_mm's use_fast_accum=False), which takes twice the accumulator
  // registers. Off, the tensor cores' own FP8 accumulation (about 14 bits) sums the whole of
  // K. Unset: on for 8-bit operands (--precision high turns it off) and for 3xTF32 (the TF32
  // tensor cores' sums lose digits too).
  std::optional<bool> promote;
  int block_m = 0;    // 64, 128 or 192 (three consumers: 16-bit operands, the epilogue in the tail); 0: the rule
  int block_n = 0;    // 64..256, a multiple of 64; 0: the widest that still fills the GPU
  int stages = 0;     // pipeline depth; 0: as many as fit in shared memory (at most 6)
  // The deepest ring the rule picks where `stages` is 0 (0: 6, and 8 for few tiles' long
  // units); TILEFUSE_GEMM_MAX_STAGES moves it for measurement.
  int max_stages = 0;
  int group_m = 8;    // tile rows swept together (L2 reuse of B)
  // CTAs of a thread-block cluster taking vertically adjacent tiles: each loads its own A
  // tile and half the B tile they share, multicast by TMA to both, so B crosses from L2 to
  // the SMs once for the pair. 1 or 2 (one unit per tile, block_n a multiple of 128, an even
  // number of tile rows); 0: the rule.
  int cluster_m = 0;
  int sm_count = 132; // CTAs of the persistent grid
  int splits = 0;     // split-K units per output tile (cooperative consumers only); 0: enough
                      // to give every SM work when the tiles alone would leave half idle
  // Stream-K: the tiles a persistent grid would leave as a partial last round (all of them
  // where there are fewer than SMs) shared by the SMs as one run of K steps cut evenly, a
  // tile's parts summed by the part with its last step (gemm_sm90.cuh). Cooperative
  // consumers, the epilogue in the main loop's tail, single CTAs, no split-K. Unset: the rule.
  std::optional<bool> stream_k;
};

// Every 0 of `requested` resolved for this problem.
CudaGemmConfig ResolveGemmConfig(const GemmTemplateKernel& gemm, const CudaGemmConfig& requested);

namespace gemm_layout {

constexpr int kBlockK = 64;                   // one 128-byte swizzle row of half-precision values
int BlockK(const GemmTemplateKernel& g);      // one 128-byte swizzle row of the operands' type (32 for TF32, 128 for FP8)
constexpr int64_t kSharedLimit = 227 * 1024;  // opt-in shared memory per block on Hopper

int64_t CeilDiv(int64_t a, int64_t b);
int64_t Tiles(const GemmTemplateKernel& g, int block_m, int block_n);  // output tiles, all batch entries
int64_t StageBytes(const CudaGemmConfig& c);                          // one ring slot: A and B tiles
int Consumers(const CudaGemmConfig& c);      // consumer warpgroups
int ConsumerRows(const CudaGemmConfig& c);   // output rows each computes per tile
// f32 registers a consumer thread holds for its tile: the accumulators, and a step's sums
// beside them when promoted (two half-width sets, gemm_sm90_consumer.cuh). At most 128 fit beside the rest (64 x 256 accumulators a
// warpgroup); promoted, whose main loop holds little else, 192 (64 x 192 twice).
int AccumulatorRegisters(const CudaGemmConfig& c, int block_n);
int MaxAccumulatorRegisters(const CudaGemmConfig& c);
int64_t StagingBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g, bool staged);  // the epilogue's TMA-store tiles
// An overlapped epilogue's residual ring: kResidualSlots chunks of block_m rows.
int64_t ResidualRingBytes(const CudaGemmConfig& c, bool ringed);
// 3xTF32's buffers (gemm_sm90.cuh, kSplitTf32): a slot's worth of small parts per stage, and
// B's big parts K-major where B is MN-major.
int64_t SplitBufferBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g);
// Dynamic shared memory in all: `staged` (a staged store), `ringed` (a ringed residual), and
// 3xTF32's buffers where g is split.
int64_t SharedBytes(const CudaGemmConfig& c, const GemmTemplateKernel& g, bool staged, bool ringed);
int64_t KSteps(const GemmTemplateKernel& g);                          // steps of BlockK along K
// About `splits` split-K units of g's K steps, as many as leave no unit without a step.
int UnitsWithoutEmpty(const GemmTemplateKernel& g, int64_t splits);
// An overlapped epilogue's parts, one per main-loop step: a power of two dividing the tile's
// block_n / 8 column groups, at most 16.
int EpilogueChunks(const CudaGemmConfig& c);
int64_t StepsPerSplit(const GemmTemplateKernel& g, const CudaGemmConfig& c);
int64_t CounterBytes(const GemmTemplateKernel& g, const CudaGemmConfig& c);  // split-K's and stream-K's tile counters
int64_t ScratchBytes(const GemmTemplateKernel& g, const CudaGemmConfig& c);  // counters + partial tiles
// Stream-K (c.stream_k): the tiles shared as one run of K steps (0: none, where the tiles fill
// whole rounds), and the CTAs sharing them: as many as get at least kStreamKMinSteps steps, at
// most one an SM.
constexpr int kStreamKMinSteps = 4;
int64_t StreamKTiles(const GemmTemplateKernel& g, const CudaGemmConfig& c);
int StreamKCtas(const GemmTemplateKernel& g, const CudaGemmConfig& c);
// Up to this many rows (a decode step) reading B bounds a product of few tiles; the few-tile
// rules' small-M forms start past it.
constexpr int64_t kReadBoundRows = 16;
// The CTAs of the persistent grid.
int64_t GridCtas(const GemmTemplateKernel& g, const CudaGemmConfig& c);
// Whether the epilogue may overlap the next tile's main loop, holding the product meanwhile:
// a half-precision product (held rounded to its type) or an FP8 one (its f32 sums held as
// they are, 128 columns a tile at most) whose epilogue reads nothing else of more than N
// elements (bias or scale vectors) but a residual tile that its ring can bring (RingedLoad).
// (Other f32 products held whole would need twice the registers of their wider tiles.)
bool ProductMayBeHeld(const GemmTemplateKernel& g);
int StagedStore(const GemmTemplateKernel& g);  // the store written through shared memory, or -1
int StagedStoreBytes(const GemmTemplateKernel& g);  // its element's bytes: 2, 1 (8-bit floats) or 4 (f32, stage_f32_output)
// Whether the staged store's rows are not 16-byte aligned (a vocabulary of 50257), so that
// the threads write it out of shared memory, each warp its own rows, consecutive columns on
// consecutive lanes, instead of TMA. Written straight from the registers, a pair of columns
// at a time, such an output ran at 234 TF/s (H200, 4096x768x50257). TMA cannot take it by
// row classes either (rows r, r + 8, ... are 16-byte multiples apart, a map per class from the
// 16-byte unit holding row r's first element): a TMA store whose first column is not at a
// 16-byte multiple is an illegal instruction (H200, 2026-11-30; the same maps at aligned
// columns ran).
bool StoreByThreads(const GemmTemplateKernel& g);
int StagedLoad(const GemmTemplateKernel& g, const CudaGemmConfig& c);  // the load TMA brings in, or -1
// The residual an overlapped epilogue reads from a ring of its own in shared memory, or -1:
// the producer brings each epilogue chunk's columns of it by TMA, up to kResidualSlots
// chunks ahead of the consumers (the staging tile still holds the previous tile's output
// while the next is computed, so it cannot take the residual's tile).
int RingedLoad(const GemmTemplateKernel& g, const CudaGemmConfig& c);
constexpr int kResidualSlots = 4;
// Why `c.cluster_m` CTAs cannot share B tiles for `c` (resolved), or OK: clusters of 1 or 2,
// one unit per tile, B's 64-column boxes split evenly among them, the tile rows in whole
// clusters.
Status CheckClusters(const GemmTemplateKernel& g, const CudaGemmConfig& c);
// Whether clusters of `cluster` CTAs can share B tiles for `c` (resolved).
bool ClustersFit(const GemmTemplateKernel& g, const CudaGemmConfig& c, int cluster);

}  // namespace gemm_layout

}  // namespace tilefuse

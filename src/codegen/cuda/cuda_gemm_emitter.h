// The Hopper GEMM template: a GemmTemplateKernel printed as one warp-specialised,
// persistent CUDA kernel over the tile library (tilefuse_tiles.cuh).
//
//   warpgroup 0 (producer)   one thread issues TMA loads of A and B tiles into a ring of
//                            `stages` shared-memory slots, each guarded by a full and an
//                            empty mbarrier
//   warpgroups 1, 2 (consumers) ping-pong: each owns every other tile of its CTA (or,
//                            cooperative: 64 rows of every tile); wgmma m64·block_n·k16
//                            from shared memory, one group in flight while the previous
//                            slot is handed back, f32 accumulators in registers; then the
//                            epilogue's scalar program per element, the output staged in
//                            swizzled shared memory and written by TMA stores that overlap
//                            what comes next
//   CTAs                     one per SM, walking the output tiles in grouped order
//   split-K                  with few output tiles (a decode-like M), each tile's K range is
//                            cut into `splits` units that CTAs take like tiles: each unit
//                            leaves its f32 partial sums in scratch memory, and the unit
//                            that finishes a tile last (a counter per tile) adds the others'
//                            in split order (deterministic) and runs the epilogue
//
// Registers move from the producer (40) to the consumers (232) with setmaxnreg.
#pragma once

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/gemm_template.h"

namespace tilefuse {

// InvalidArgument for configurations the template cannot run.
StatusOr<CudaKernelSource> EmitCudaGemm(const GemmTemplateKernel& gemm, const CudaGemmConfig& config = {});

}  // namespace tilefuse

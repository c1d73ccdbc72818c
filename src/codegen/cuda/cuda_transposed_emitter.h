// The CUDA pointwise template for kernels that read a large operand transposed relative to
// their output ("pointwise transposed 64x64"): a block per 2-D tile over (the output's
// contiguous dim, the dim the transposed loads read contiguously), the other dims in the grid.
//
//   1. load phase: each staged load's tile comes in from global memory as vectors along its
//      own contiguous dim (16 bytes where the index's alignment allows), all of a thread's
//      vectors in flight together, then into a padded shared-memory tile;
//   2. __syncthreads;
//   3. store phase: each thread takes `vector` consecutive outputs along the output's
//      contiguous dim, evaluates the group's scalar program for each — staged loads read from
//      shared memory, operands at the element's own offset as vectors, anything else (a
//      per-channel bias, a gather) at its own index — and stores them as one vector.
//
// Before, the flat template's warp read 32 x `vector` elements one sector each (bf16 relu +
// transpose of [32,56,56,64] ran at 17% of copy on an H100); here both sides move whole
// sectors. Ragged tiles (dims not multiples of the tile) are predicated per vector.
#pragma once

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/transposed_tiles.h"

namespace tilefuse {

// `requested` resolved for the tiled form of `kernel` (tiling.tiled()): the tile edge (64, or
// 32 where 64 would not fit the staged loads in 48 KB of shared memory), the store vector (16
// bytes of the narrowest output, halved until it divides the output's contiguous dim) and the
// block size (256, fewer when a tile has fewer vectors).
CudaKernelConfig ResolveTransposedConfig(const Kernel& kernel, const TransposedTiling& tiling, const CudaKernelConfig& requested);

// The kernel in the tiled form; InvalidArgument for a configuration it cannot run.
StatusOr<CudaKernelSource> EmitTransposedKernel(const Kernel& kernel, const TransposedTiling& tiling, const CudaKernelConfig& config);

}  // namespace tilefuse

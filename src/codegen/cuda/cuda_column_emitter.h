// The CUDA template for column reductions (codegen/column_tiles.h): "column 16x128 x8, 6 splits".
//
//                 tile of `tile` consecutive outputs (columns)
//               ┌──────────────────────────────┐
//   split 0     │ tx →  `vector` outputs each  │  ty ↓ threads along the reduced elements,
//   (blockIdx)  │                              │       each folding every kRowThreads-th one
//               ├──────────────────────────────┤
//   split 1     │  another block, later rows   │
//               └──────────────────────────────┘
//
//   1. each thread folds its slice of the reduced elements for its `vector` outputs in f32
//      registers, the contiguous loads as one vector per element (a warp reads whole sectors:
//      along the outputs, and along the rows where a row of the tile is shorter than a sector);
//   2. the block combines its threads' slices: warp shuffles between the lanes of one column,
//      then the warps' partials through shared memory, in a fixed order;
//   3. with one split, the block finishes its outputs; with several, each block leaves its
//      partials in scratch memory and the last block to arrive for a tile (an atomic counter,
//      reset by that block for the next launch) combines them in split order and finishes;
//   4. the finish: each output's results (mean's division) and the group's epilogue (casts,
//      pointwise ops after the reduction), stored one output per thread.
//
// Reductions that read an earlier one's result (variance after mean) run one after another
// within a block: those kernels take one split, so the block holds whole columns.
#pragma once

#include "codegen/column_tiles.h"
#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {

// `requested` resolved for the column form of `kernel` (tiling.tiled()): vector (the widest the
// contiguous loads allow), tile (64 outputs, fewer where the outputs' innermost dim is shorter;
// more where few reduced elements would idle the threads), threads (up to 256),
// threads_per_row (the block's threads along the reduced elements: threads / (tile / vector))
// and splits (enough blocks to fill an H100 twice, each thread folding four elements at least).
CudaKernelConfig ResolveColumnConfig(const Kernel& kernel, const ColumnTiling& tiling, const CudaKernelConfig& requested);

// The kernel in the column form; InvalidArgument for a configuration it cannot run.
StatusOr<CudaKernelSource> EmitColumnKernel(const Kernel& kernel, const ColumnTiling& tiling, const CudaKernelConfig& config);

}  // namespace tilefuse

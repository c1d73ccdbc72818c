// Rows split over several blocks: the row template's form for a few long rows.
//
// A row kernel gives each row one block (or a cluster of up to 8 CTAs), so a reduction of a
// few long rows runs on a few SMs: ReduceMax(Abs(y)) of 8192² f32 values, one row, took 16 ms
// on an H100 where a full GPU reads them in ~0.1 ms. Split, each row's elements are sliced
// over `splits` blocks (CudaKernelConfig::splits):
//
//   1. each block reduces its slice as the row template does (a strided loop of vectors,
//      then the block's threads combined);
//   2. it leaves its totals in scratch memory, 8 bytes a total, fences, and counts itself in
//      the row's counter;
//   3. the row's last block (the counter's last arrival, which zeroes it for the next launch)
//      combines the totals in split order (its threads a fixed set of splits each, then the
//      block's fixed tree: the same bits whatever the timing), finishes them (a mean's
//      division) and writes the row's outputs.
//
// Only kernels whose outputs are one value a row (no store along the row, which would need
// the row's totals in every block) and whose reductions read no earlier one's result (each
// would need the grid's totals before its pass) split; their sizes must be in the text.
#pragma once

#include <string>

#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {

// Why `kernel`'s rows cannot be split over blocks, or "" where they can.
std::string WhyRowsCannotSplit(const Kernel& kernel);

// The rule's splits for a block-per-row configuration `c` of `kernel` (threads, vector and
// cluster resolved): enough blocks to fill the GPU twice (c.sm_count, 132 where unknown) where
// the rows alone leave it idle, each thread still reading 8 vectors of its slice at least; 1
// where the rows fill it or the kernel cannot split.
int RuleRowSplits(const Kernel& kernel, const CudaKernelConfig& c);

// The elements of each split's slice: the row's length over `splits`, rounded up to whole
// vectors.
int64_t RowSplitSlice(const Kernel& kernel, int splits, int vector);

// The scratch memory a split kernel uses: the counter region, then 8 bytes a total.
int64_t RowSplitScratchBytes(const Kernel& kernel, int splits);

}  // namespace tilefuse

// Independent generated kernels launched as one: each a grid-stride loop over its own work
// (every pointwise kernel the loop emitter writes), each becomes a device function taking its
// block index and grid size as arguments, and one kernel hands each its range of blocks. At
// batch 1 a kernel's launch, ramp and tail weigh as much as its work: the LLaMA-style layer at
// 1x128 ran its rotary embeddings of q and of k as two kernels of 4.5-5 µs each (H200,
// 2026-12-02), both reading only the QKV product's outputs.
#pragma once

#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "tilefuse/status.h"

namespace tilefuse {

// Why `source` cannot be a part of a launch together, or OK: the loop emitter's plain form
// (its signature first, the prior grid awaited first thing, a 1-D grid of 1-D blocks without
// dynamic shared memory, clusters or scratch memory, pointer parameters only).
Status CanLaunchTogether(const CudaKernelSource& source);
// One kernel named `name` running `parts` (2 or more, each CanLaunchTogether, one block size
// and launch bounds): blocks [0, g0) run part 0 as its own grid of g0 blocks, the next g1
// part 1, and so on (g: each part's launch grid). Its arguments are the parts' in order.
StatusOr<CudaKernelSource> LaunchTogether(const std::string& name, const std::vector<CudaKernelSource>& parts);

}  // namespace tilefuse

// The autotuner for the CUDA backend: measured search over each generated kernel's
// configurations, remembered in the tuning cache, and the fallback rule — a fused group
// measured more than 10% slower than its ops unfused is replaced by them.
//
//   compile (default configs) → run once (real data in every buffer)
//   → per kernel: search space (tune/cuda_search_space.h), then tune/tuner_core.h: cache
//     lookup, measure what the cache lacks (all candidates when few, else the default and
//     the cost model's top-k), record, pick the fastest
//   → recompile with the winners → time each fused group against its unfused ops
//   → replan the groups that lose → the final CudaExecutable
#pragma once

#include <memory>

#include "backend/cuda/cuda_executable.h"
#include "tune/tuner_core.h"

namespace tilefuse {

// Tunes `graph` for the GPU; returns the tuned compiled graph and what was done.
StatusOr<std::unique_ptr<CudaExecutable>> TuneForGpu(const Graph& graph, const CudaCompileOptions& options,
                                                       const TuneOptions& tune, TuneReport* report);

}  // namespace tilefuse

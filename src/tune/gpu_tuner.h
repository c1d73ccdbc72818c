// The autotuner for the CUDA backend: measured search over each generated kernel's
// configurations, remembered in the tuning cache, and the fallback rule — a fused group
// measured more than 10% slower than its ops unfused is replaced by them.
//
//   compile (default configs) → run once (real data in every buffer)
//   → per kernel: search space (tune/cuda_search_space.h), cache lookup, measure what the
//     cache lacks (all candidates when few, else the default and the cost model's top-k),
//     record, pick the fastest
//   → recompile with the winners → time each fused group against its unfused ops
//   → replan the groups that lose → the final GpuCompiledGraph
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/gpu_compiled_graph.h"
#include "tune/fallback.h"

namespace tilefuse {

struct TuneOptions {
  double budget_s = 0;        // wall-clock seconds for measuring; 0: 30 s per kernel
  int warmup = 5, repeats = 20;
  int max_measured = 16;      // per kernel; larger spaces measure the default + top-k
  std::string cache_dir;      // empty: $TILEFUSE_CACHE_DIR or ~/.cache/tilefuse
  bool fallback = true;       // apply the fused-vs-unfused rule
  // Called before each kernel is tuned (index, count, name): a progress bar.
  std::function<void(int, int, const std::string&)> progress;
};

struct KernelTuneResult {
  std::string name;
  int candidates = 0, pruned = 0, measured = 0, cache_hits = 0;
  CudaKernelConfig best;
  double best_us = 0, default_us = 0;  // 0 when unknown
  std::vector<VariantTiming> timings;  // every configuration known (cached or measured now)
};

struct TuneReport {
  int64_t measurements = 0;  // configurations timed in this run (0: all from the cache)
  int64_t cache_hits = 0;    // configurations answered by the cache
  double seconds = 0;
  bool budget_exhausted = false;
  std::vector<KernelTuneResult> kernels;
  std::vector<FallbackDecision> fallbacks;
  nlohmann::json ToJson() const;
};

// Tunes `graph` for the GPU; returns the tuned compiled graph and what was done.
StatusOr<std::unique_ptr<GpuCompiledGraph>> TuneForGpu(const Graph& graph, const GpuCompileOptions& options,
                                                       const TuneOptions& tune, TuneReport* report);

}  // namespace tilefuse

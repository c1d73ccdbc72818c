// The backend-neutral part of the autotuner (issue 6), shared by the CUDA tuner
// (tune/gpu_tuner.h) and the CPU tuner (tune/cpu_tuner.h). A backend describes each
// kernel as a KernelSearch — its candidate configurations as JSON (the tuning cache's
// form), the cost model's ranking and a way to measure — and this part does the rest:
//
//   candidates → shortlist (all when few, else the default + the best-ranked)
//   → cache lookup → measure only what the cache lacks → record → fastest wins
//
// A configuration that failed (emit, compile or launch) has no time: infinitely slow.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilefuse/graph.h"
#include "tilefuse/status.h"
#include "tilefuse/tensor.h"
#include "tune/fallback.h"
#include "tune/tuning_cache.h"

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

// One configuration's outcome, its config as JSON (time_us absent: it failed).
struct ConfigTiming {
  nlohmann::json config;
  std::optional<double> time_us;
  std::string error;
};

struct KernelTuneResult {
  std::string name;
  std::string fingerprint;  // the search's
  int candidates = 0, pruned = 0, measured = 0, cache_hits = 0;
  nlohmann::json best;                 // the winner (the default when nothing has a time)
  double best_us = 0, default_us = 0;  // 0 when unknown
  double seconds = 0;                  // spent on this kernel (measuring, compiling variants)
  std::vector<ConfigTiming> timings;   // every configuration known (cached or measured now)
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

// What a backend supplies to tune one kernel.
struct KernelSearch {
  std::string name;
  std::string fingerprint;  // KernelFingerprint: what the result configures
  TuningKey key;
  std::vector<nlohmann::json> candidates;  // the default first
  int pruned = 0;                          // configurations the constraints removed
  // The cost model's preference: lower is measured first when the space is too large
  // (TuneOptions::max_measured). None: every candidate is measured, however many.
  std::function<double(const nlohmann::json&)> rank;
  // Times `configs` (one ConfigTiming each, in order); an error is for the whole batch.
  std::function<StatusOr<std::vector<ConfigTiming>>(const std::vector<nlohmann::json>&)> measure;
};

// The default and the `limit - 1` best-ranked others (all of them when they fit, or when
// there is no rank).
std::vector<nlohmann::json> Shortlist(std::vector<nlohmann::json> all, size_t limit,
                                      const std::function<double(const nlohmann::json&)>& rank);

// The tuning cache both tuners open: `tune.cache_dir` when given (a tuning cache chosen on
// purpose: a benchmark compiling into a fresh kernel cache keeps what tuning learnt), else
// the kernel cache's folder `kernel_cache_dir` when given (a test's private cache keeps its
// tuning beside its kernels), else $TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse. Options
// given beat the environment, which beats the default.
StatusOr<TuningCache> OpenTuningCache(const TuneOptions& tune, const std::string& kernel_cache_dir);

// Cache first, then (when `may_measure`) the missing shortlisted configurations.
StatusOr<KernelTuneResult> TuneKernel(const KernelSearch& search, TuningCache& cache, const TuneOptions& tune,
                                      bool may_measure);

// TuneKernel over every kernel, within the budget counted from `start` (kernels after it
// is spent keep what the cache knows, else their defaults); results appended to `report`.
using TuneClock = std::chrono::steady_clock;
Status TuneKernels(const std::vector<KernelSearch>& kernels, TuningCache& cache, const TuneOptions& tune,
                   TuneClock::time_point start, TuneReport& report);

double SecondsSince(TuneClock::time_point start);

// The inputs both tuners measure on: seeded random values for float inputs, zeros for
// integer ones (token ids: 0 is always valid).
std::vector<Tensor> TuningInputs(const Graph& graph);

// KernelSearch::measure for a backend whose compiled graph times typed configurations:
// `compiled.MeasureVariants(name, configs, warmup, repeats)` returning one timing (with
// `time_us` and `error`) per config; `from_json` reads the cache's JSON form.
template <typename Compiled, typename Config>
std::function<StatusOr<std::vector<ConfigTiming>>(const std::vector<nlohmann::json>&)> MeasureTypedConfigs(
    Compiled& compiled, std::string name, const TuneOptions& tune, Config (*from_json)(const nlohmann::json&)) {
  return [&compiled, name = std::move(name), warmup = tune.warmup, repeats = tune.repeats,
          from_json](const std::vector<nlohmann::json>& configs) -> StatusOr<std::vector<ConfigTiming>> {
    std::vector<Config> typed;
    for (const nlohmann::json& c : configs) typed.push_back(from_json(c));
    ASSIGN_OR_RETURN(auto measured, compiled.MeasureVariants(name, typed, warmup, repeats));
    std::vector<ConfigTiming> out;
    for (size_t i = 0; i < measured.size(); ++i) out.push_back({configs[i], measured[i].time_us, measured[i].error});
    return out;
  };
}

}  // namespace tilefuse

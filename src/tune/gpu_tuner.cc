#include "tune/gpu_tuner.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "support/kernel_cache.h"
#include "tune/cuda_search_space.h"
#include "tune/measured_fallback.h"
#include "tune/tuning_cache.h"

namespace tilefuse {

namespace {

// The kernel's identity across graphs: its default source with its name blanked (the
// same fused group in another model, at the same shapes, hits the same entry).
std::string KernelHash(const CudaLaunchable& k) {
  std::string source = k.source.function;
  for (size_t at = source.find(k.source.name); at != std::string::npos; at = source.find(k.source.name, at))
    source.replace(at, k.source.name.size(), "KERNEL");
  return KernelCache::Key({source, CudaConfigToJson(k.source.config).dump()});
}

// The cost model's order for larger spaces: rows held in registers first, then the
// block sizes nearest the default's.
double CudaRank(const CudaKernelConfig& base, const CudaKernelConfig& c) {
  return (c.cache_row == 1 ? 0.0 : 1.0) + std::abs(std::log2(double(c.threads) / base.threads)) +
         std::abs(std::log2(double(std::max(1, c.threads_per_row)) / std::max(1, base.threads_per_row)));
}

KernelSearch CudaKernelSearch(GpuCompiledGraph& compiled, const CudaLaunchable& k, const TuneOptions& tune) {
  KernelSearch search;
  search.name = k.source.name;
  search.key = {compiled.device_name(), compiled.device_arch(), std::to_string(compiled.driver_version()),
                "nvrtc " + compiled.nvrtc_version(), KernelHash(k), "", ""};
  CudaSearchSpace space = CudaCandidates(k.kernel);
  for (const CudaKernelConfig& c : space.candidates) search.candidates.push_back(CudaConfigToJson(c));
  search.pruned = static_cast<int>(space.pruned.size());
  CudaKernelConfig base = space.candidates.empty() ? CudaKernelConfig{} : space.candidates.front();
  search.rank = [base](const nlohmann::json& c) { return CudaRank(base, CudaConfigFromJson(c)); };
  search.measure = MeasureTypedConfigs<GpuCompiledGraph, CudaKernelConfig>(compiled, k.source.name, tune, CudaConfigFromJson);
  return search;
}

}  // namespace

StatusOr<std::unique_ptr<GpuCompiledGraph>> TuneForGpu(const Graph& graph, const GpuCompileOptions& options,
                                                       const TuneOptions& tune, TuneReport* report) {
  auto start = TuneClock::now();
  TuneReport local;
  TuneReport& r = report ? *report : local;
  ASSIGN_OR_RETURN(TuningCache cache, TuningCache::Open(options.cache_dir.empty() ? tune.cache_dir : options.cache_dir));
  GpuCompileOptions base = options;
  base.poison_outputs = false;
  ASSIGN_OR_RETURN(std::unique_ptr<GpuCompiledGraph> compiled, GpuCompiledGraph::Compile(graph, base));
  std::vector<Tensor> inputs = TuningInputs(compiled->graph());
  ASSIGN_OR_RETURN(std::vector<Tensor> warm, compiled->Run(inputs));  // real data in every buffer
  std::vector<KernelSearch> searches;
  for (const CudaLaunchable* k : compiled->launchables()) searches.push_back(CudaKernelSearch(*compiled, *k, tune));
  RETURN_IF_ERROR(TuneKernels(searches, cache, tune, start, r));
  GpuCompileOptions tuned = options;
  for (const KernelTuneResult& k : r.kernels) tuned.configs[k.name] = CudaConfigFromJson(k.best);
  ASSIGN_OR_RETURN(compiled, GpuCompiledGraph::Compile(graph, tuned));
  if (tune.fallback && options.fuse) {
    ASSIGN_OR_RETURN(compiled, ApplyMeasuredFallbacks(graph, std::move(compiled), tuned, inputs, r.fallbacks));
  }
  r.seconds = SecondsSince(start);
  return compiled;
}

}  // namespace tilefuse

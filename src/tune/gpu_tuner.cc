#include "tune/gpu_tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

#include "fusion/planner.h"
#include "support/kernel_cache.h"
#include "tune/cuda_search_space.h"
#include "tune/tuning_cache.h"

namespace tilefuse {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The kernel's identity across graphs: its default source with its name blanked (the
// same fused group in another model, at the same shapes, hits the same entry).
std::string KernelHash(const CudaLaunchable& k) {
  std::string source = k.source.function;
  for (size_t at = source.find(k.source.name); at != std::string::npos; at = source.find(k.source.name, at))
    source.replace(at, k.source.name.size(), "KERNEL");
  return KernelCache::Key({source, CudaConfigToJson(k.source.config).dump()});
}

// Larger spaces measure the default and the candidates the cost model likes best: rows
// held in registers first, then the block sizes nearest the default's.
std::vector<CudaKernelConfig> Shortlist(std::vector<CudaKernelConfig> all, size_t limit) {
  if (all.size() <= limit) return all;
  const CudaKernelConfig base = all.front();
  auto distance = [&](const CudaKernelConfig& c) {
    return (c.cache_row == 1 ? 0.0 : 1.0) + std::abs(std::log2(double(c.threads) / base.threads)) +
           std::abs(std::log2(double(std::max(1, c.threads_per_row)) / std::max(1, base.threads_per_row)));
  };
  std::stable_sort(all.begin() + 1, all.end(), [&](const auto& a, const auto& b) { return distance(a) < distance(b); });
  all.resize(limit);
  return all;
}

std::vector<Tensor> RandomInputs(const Graph& graph) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(IsFloat(p.dtype) ? Tensor::Random(p.dtype, p.shape, 1234 + i) : Tensor(p.dtype, p.shape));
  }
  return inputs;
}

StatusOr<KernelTuneResult> TuneKernel(GpuCompiledGraph& compiled, const CudaLaunchable& k, TuningCache& cache,
                                      const TuneOptions& tune, bool may_measure) {
  KernelTuneResult result;
  result.name = k.source.name;
  CudaSearchSpace space = CudaCandidates(k.kernel);
  result.candidates = static_cast<int>(space.candidates.size());
  result.pruned = static_cast<int>(space.pruned.size());
  std::vector<CudaKernelConfig> shortlist = Shortlist(space.candidates, static_cast<size_t>(tune.max_measured));
  TuningKey key{compiled.device_name(), compiled.device_arch(), std::to_string(compiled.driver_version()),
                "nvrtc " + compiled.nvrtc_version(), KernelHash(k), "", ""};
  std::optional<TuningRecord> record = cache.Lookup(key);
  std::vector<CudaKernelConfig> missing;
  for (const CudaKernelConfig& c : shortlist) {
    const TuningMeasurement* m = record ? record->Find(CudaConfigToJson(c)) : nullptr;
    if (m) {
      ++result.cache_hits;
      result.timings.push_back({c, m->time_us, m->error});
    } else {
      missing.push_back(c);
    }
  }
  if (!missing.empty() && may_measure) {
    ASSIGN_OR_RETURN(std::vector<VariantTiming> measured, compiled.MeasureVariants(k.source.name, missing, tune.warmup, tune.repeats));
    std::vector<TuningMeasurement> entries;
    for (const VariantTiming& t : measured) {
      entries.push_back({CudaConfigToJson(t.config), t.time_us, t.time_us ? "" : t.error, ""});
      result.timings.push_back(t);
    }
    result.measured = static_cast<int>(measured.size());
    RETURN_IF_ERROR(cache.Record(key, entries));
  }
  result.best = shortlist.front();
  const VariantTiming* best = nullptr;
  for (const VariantTiming& t : result.timings) {
    if (SameCudaConfig(t.config, shortlist.front()) && t.time_us) result.default_us = *t.time_us;
    if (t.time_us && (!best || *t.time_us < *best->time_us)) best = &t;
  }
  if (best) {
    result.best = best->config;
    result.best_us = *best->time_us;
  }
  return result;
}

// Times of each plan group of `compiled`, keyed by group id.
StatusOr<std::vector<GroupTiming>> TimeGroups(GpuCompiledGraph& compiled, const std::vector<Tensor>& inputs) {
  ASSIGN_OR_RETURN(std::vector<double> us, compiled.GroupTimesUs(inputs));
  std::vector<GroupTiming> out;
  for (size_t g = 0; g < us.size() && g < compiled.plan().groups.size(); ++g) out.push_back({compiled.plan().groups[g].id, us[g]});
  return out;
}

}  // namespace

nlohmann::json TuneReport::ToJson() const {
  nlohmann::json j = {{"measurements", measurements}, {"cache_hits", cache_hits}, {"seconds", seconds},
                      {"budget_exhausted", budget_exhausted}, {"all_from_cache", measurements == 0},
                      {"kernels", nlohmann::json::array()}, {"fallbacks", FallbacksToJson(fallbacks)}};
  for (const KernelTuneResult& k : kernels) {
    nlohmann::json tried = nlohmann::json::array();
    for (const VariantTiming& t : k.timings) {
      nlohmann::json row = {{"config", CudaConfigToJson(t.config)}};
      if (t.time_us) row["time_us"] = *t.time_us;
      else row["error"] = t.error;
      tried.push_back(row);
    }
    j["kernels"].push_back({{"name", k.name}, {"candidates", k.candidates}, {"pruned", k.pruned}, {"measured", k.measured},
                            {"cache_hits", k.cache_hits}, {"best", CudaConfigToJson(k.best)}, {"best_us", k.best_us},
                            {"default_us", k.default_us}, {"configs", tried}});
  }
  return j;
}

StatusOr<std::unique_ptr<GpuCompiledGraph>> TuneForGpu(const Graph& graph, const GpuCompileOptions& options,
                                                       const TuneOptions& tune, TuneReport* report) {
  auto start = Clock::now();
  TuneReport local;
  TuneReport& r = report ? *report : local;
  ASSIGN_OR_RETURN(TuningCache cache, TuningCache::Open(options.cache_dir.empty() ? tune.cache_dir : options.cache_dir));
  GpuCompileOptions base = options;
  base.poison_outputs = false;
  ASSIGN_OR_RETURN(std::unique_ptr<GpuCompiledGraph> compiled, GpuCompiledGraph::Compile(graph, base));
  std::vector<Tensor> inputs = RandomInputs(compiled->graph());
  ASSIGN_OR_RETURN(std::vector<Tensor> warm, compiled->Run(inputs));  // real data in every buffer
  std::vector<const CudaLaunchable*> kernels = compiled->launchables();
  double budget = tune.budget_s > 0 ? tune.budget_s : 30.0 * std::max<size_t>(1, kernels.size());
  GpuCompileOptions tuned = options;
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (tune.progress) tune.progress(static_cast<int>(i), static_cast<int>(kernels.size()), kernels[i]->source.name);
    bool may_measure = SecondsSince(start) < budget;
    r.budget_exhausted = r.budget_exhausted || !may_measure;
    ASSIGN_OR_RETURN(KernelTuneResult k, TuneKernel(*compiled, *kernels[i], cache, tune, may_measure));
    r.measurements += k.measured;
    r.cache_hits += k.cache_hits;
    tuned.configs[k.name] = k.best;
    r.kernels.push_back(std::move(k));
  }
  if (tune.progress) tune.progress(static_cast<int>(kernels.size()), static_cast<int>(kernels.size()), "");
  ASSIGN_OR_RETURN(compiled, GpuCompiledGraph::Compile(graph, tuned));
  if (tune.fallback && options.fuse) {
    GpuCompileOptions unfused_options = base;
    unfused_options.fuse = false;
    unfused_options.configs.clear();
    ASSIGN_OR_RETURN(std::unique_ptr<GpuCompiledGraph> unfused, GpuCompiledGraph::Compile(graph, unfused_options));
    ASSIGN_OR_RETURN(std::vector<GroupTiming> fused_times, TimeGroups(*compiled, inputs));
    ASSIGN_OR_RETURN(std::vector<GroupTiming> unfused_times, TimeGroups(*unfused, inputs));
    ASSIGN_OR_RETURN(r.fallbacks, DecideFallbacks(compiled->graph(), compiled->plan(), unfused->plan(), fused_times, unfused_times));
    bool any = std::any_of(r.fallbacks.begin(), r.fallbacks.end(), [](const FallbackDecision& d) { return d.use_unfused; });
    if (any) {
      ASSIGN_OR_RETURN(FusionPlan plan, ApplyFallbacks(compiled->graph(), compiled->plan(), unfused->plan(), r.fallbacks));
      GpuCompileOptions replanned = tuned;
      replanned.plan_override = &plan;
      ASSIGN_OR_RETURN(compiled, GpuCompiledGraph::Compile(graph, replanned));
    }
  }
  r.seconds = SecondsSince(start);
  return compiled;
}

}  // namespace tilefuse

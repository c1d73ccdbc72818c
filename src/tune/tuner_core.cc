#include "tune/tuner_core.h"

#include <algorithm>

namespace tilefuse {

double SecondsSince(TuneClock::time_point start) {
  return std::chrono::duration<double>(TuneClock::now() - start).count();
}

std::vector<nlohmann::json> Shortlist(std::vector<nlohmann::json> all, size_t limit,
                                      const std::function<double(const nlohmann::json&)>& rank) {
  if (!rank || all.size() <= limit || all.empty()) return all;
  std::stable_sort(all.begin() + 1, all.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  all.resize(std::max<size_t>(1, limit));
  return all;
}

StatusOr<KernelTuneResult> TuneKernel(const KernelSearch& search, TuningCache& cache, const TuneOptions& tune,
                                      bool may_measure) {
  auto start = TuneClock::now();
  KernelTuneResult result;
  result.name = search.name;
  result.fingerprint = search.fingerprint;
  result.candidates = static_cast<int>(search.candidates.size());
  result.pruned = search.pruned;
  if (search.candidates.empty()) return result;
  std::vector<nlohmann::json> shortlist = Shortlist(search.candidates, static_cast<size_t>(tune.max_measured), search.rank);
  std::optional<TuningRecord> record = cache.Lookup(search.key);
  std::vector<nlohmann::json> missing;
  for (const nlohmann::json& c : shortlist) {
    const TuningMeasurement* m = record ? record->Find(c) : nullptr;
    if (m) {
      ++result.cache_hits;
      result.timings.push_back({c, m->time_us, m->error});
    } else {
      missing.push_back(c);
    }
  }
  if (!missing.empty() && may_measure) {
    ASSIGN_OR_RETURN(std::vector<ConfigTiming> measured, search.measure(missing));
    std::vector<TuningMeasurement> entries;
    for (const ConfigTiming& t : measured) {
      entries.push_back({t.config, t.time_us, t.time_us ? "" : t.error, ""});
      result.timings.push_back(t);
    }
    result.measured = static_cast<int>(measured.size());
    RETURN_IF_ERROR(cache.Record(search.key, entries));
  }
  result.best = shortlist.front();
  const ConfigTiming* best = nullptr;
  for (const ConfigTiming& t : result.timings) {
    if (t.config == shortlist.front() && t.time_us) result.default_us = *t.time_us;
    if (t.time_us && (!best || *t.time_us < *best->time_us)) best = &t;
  }
  if (best) {
    result.best = best->config;
    result.best_us = *best->time_us;
  }
  result.seconds = SecondsSince(start);
  return result;
}

StatusOr<TuningCache> OpenTuningCache(const TuneOptions& tune, const std::string& kernel_cache_dir) {
  // "" is TuningCache::Open's own default: $TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse.
  return TuningCache::Open(!tune.cache_dir.empty() ? tune.cache_dir : kernel_cache_dir);
}

Status TuneKernels(const std::vector<KernelSearch>& kernels, TuningCache& cache, const TuneOptions& tune,
                   TuneClock::time_point start, TuneReport& r) {
  int count = static_cast<int>(kernels.size());
  double budget = tune.budget_s > 0 ? tune.budget_s : 30.0 * std::max(1, count);
  for (int i = 0; i < count; ++i) {
    if (tune.progress) tune.progress(i, count, kernels[i].name);
    bool may_measure = SecondsSince(start) < budget;
    r.budget_exhausted = r.budget_exhausted || !may_measure;
    ASSIGN_OR_RETURN(KernelTuneResult k, TuneKernel(kernels[i], cache, tune, may_measure));
    r.measurements += k.measured;
    r.cache_hits += k.cache_hits;
    r.kernels.push_back(std::move(k));
  }
  if (tune.progress) tune.progress(count, count, "");
  return Status::Ok();
}

nlohmann::json TuneReport::ToJson() const {
  nlohmann::json j = {{"measurements", measurements}, {"cache_hits", cache_hits}, {"seconds", seconds},
                      {"budget_exhausted", budget_exhausted}, {"all_from_cache", measurements == 0},
                      {"kernels", nlohmann::json::array()}, {"fallbacks", FallbacksToJson(fallbacks)}};
  for (const KernelTuneResult& k : kernels) {
    nlohmann::json tried = nlohmann::json::array();
    for (const ConfigTiming& t : k.timings) {
      nlohmann::json row = {{"config", t.config}};
      if (t.time_us) row["time_us"] = *t.time_us;
      else row["error"] = t.error;
      tried.push_back(row);
    }
    j["kernels"].push_back({{"name", k.name}, {"candidates", k.candidates}, {"pruned", k.pruned}, {"measured", k.measured},
                            {"cache_hits", k.cache_hits}, {"best", k.best}, {"best_us", k.best_us},
                            {"default_us", k.default_us}, {"seconds", k.seconds}, {"configs", tried}});
  }
  return j;
}

std::vector<Tensor> TuningInputs(const Graph& graph) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(IsFloat(p.dtype) ? Tensor::Random(p.dtype, p.shape, 1234 + i) : Tensor(p.dtype, p.shape));
  }
  return inputs;
}

}  // namespace tilefuse

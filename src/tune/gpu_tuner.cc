#include "driver/driver.h"
#include "runtime/measure.h"
#include "tune/gpu_tuner.h"

#include <algorithm>
#include <array>
#include <memory>
#include <fmt/format.h>

#include "codegen/kernel_fingerprint.h"
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

// KernelSearch::measure for kernel `name`: CudaExecutable::MeasureVariants takes the
// configurations in their JSON form, loop kernels' and templates' alike.
std::function<StatusOr<std::vector<ConfigTiming>>(const std::vector<nlohmann::json>&)> MeasureConfigs(CudaExecutable& compiled,
                                                                                                     std::string name,
                                                                                                     const TuneOptions& tune) {
  return [&compiled, name = std::move(name), warmup = tune.warmup,
          repeats = tune.repeats](const std::vector<nlohmann::json>& configs) -> StatusOr<std::vector<ConfigTiming>> {
    ASSIGN_OR_RETURN(std::vector<VariantTiming> measured, compiled.MeasureVariants(name, configs, warmup, repeats));
    std::vector<ConfigTiming> out;
    for (const VariantTiming& m : measured) out.push_back({m.config, m.time_us, m.error});
    return out;
  };
}

KernelSearch CudaKernelSearch(CudaExecutable& compiled, const CudaLaunchable& k, const TuneOptions& tune) {
  KernelSearch search;
  search.name = k.source.name;
  search.fingerprint = KernelFingerprint(k.kernel);
  search.key = {compiled.device_name(), compiled.device_arch(), std::to_string(compiled.driver_version()),
                "nvrtc " + compiled.nvrtc_version(), KernelHash(k), "", ""};
  CudaSearchSpace space = CudaCandidates(k.kernel, k.source.config.clusters);
  for (const CudaKernelConfig& c : space.candidates) search.candidates.push_back(CudaConfigToJson(c));
  search.pruned = static_cast<int>(space.pruned.size());
  CudaKernelConfig base = space.candidates.empty() ? CudaKernelConfig{} : space.candidates.front();
  search.rank = [base](const nlohmann::json& c) { return CudaConfigRank(base, CudaConfigFromJson(c)); };
  search.measure = MeasureConfigs(compiled, k.source.name, tune);
  return search;
}

// A template's configurations (TemplateKernel::SearchSpace: the GEMM's tile width,
// consumers, pipeline depth, ...), measured in place, the rule's first.
KernelSearch TemplateSearch(CudaExecutable& compiled, const CudaLaunchable& k, const TuneOptions& tune) {
  KernelSearch search;
  search.name = k.source.name;
  search.fingerprint = k.template_kernel->Fingerprint();
  search.key = {compiled.device_name(), compiled.device_arch(), std::to_string(compiled.driver_version()),
                "nvrtc " + compiled.nvrtc_version(), KernelHash(k), "", ""};
  search.candidates = k.template_kernel->SearchSpace(compiled.sm_count());
  // No rank: every configuration is measured. A rank of 0 for all had cut the list to its
  // first max_measured (16), so a GEMM's small-M forms and clusters, listed last, were never
  // timed (found 2026-12-01: 16 of a 128-row product's candidates measured).
  search.measure = MeasureConfigs(compiled, k.source.name, tune);
  return search;
}

// Both paths of the gemm groups where the rule chose between cuBLASLt's own epilogue and
// the template, timed group by group in two compiled graphs (the rule's, and one with
// those groups on the other path), once, when the first search misses the cache.
class GemmPathTimes {
 public:
  GemmPathTimes(const Graph& graph, CudaExecutable& rule, CudaCompileOptions flipped, const std::vector<Tensor>& inputs)
      : graph_(graph), rule_(rule), flipped_(std::move(flipped)), inputs_(inputs) {}

  // Microseconds of plan group `index` on the library (0) and template (1) path.
  StatusOr<std::array<double, 2>> Times(size_t index, bool rule_is_library) {
    if (!measured_) {
      measured_ = true;
      status_ = Measure();
    }
    RETURN_IF_ERROR(status_);
    if (index >= rule_us_.size() || index >= flipped_us_.size()) return Internal("gemm path timing: group index out of range");
    return rule_is_library ? std::array<double, 2>{rule_us_[index], flipped_us_[index]}
                           : std::array<double, 2>{flipped_us_[index], rule_us_[index]};
  }

 private:
  Status Measure() {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> other, CompileForCuda(graph_, flipped_));
    ASSIGN_OR_RETURN(rule_us_, GroupTimesUs(rule_, inputs_));
    ASSIGN_OR_RETURN(flipped_us_, GroupTimesUs(*other, inputs_));
    return Status::Ok();
  }

  const Graph& graph_;
  CudaExecutable& rule_;
  CudaCompileOptions flipped_;
  const std::vector<Tensor>& inputs_;
  bool measured_ = false;
  Status status_ = Status::Ok();
  std::vector<double> rule_us_, flipped_us_;
};

// The fallback rule's twin for gemm groups: where cuBLASLt's own epilogue and the template
// both apply (the rule chose one, kLibraryEpilogueRule or library_alternative), both are
// timed and the faster kept (the choice is cached per device and problem; keyed by the
// matmul node it survives replans).
Status TuneGemmPaths(const Graph& graph, CudaExecutable& compiled, CudaCompileOptions& tuned, const std::vector<Tensor>& inputs,
                     TuningCache& cache, const TuneOptions& tune, TuneClock::time_point start, TuneReport& report) {
  CudaCompileOptions flipped = tuned;
  struct Contest {
    size_t index;  // in the plan
    int matmul;
    bool rule_is_library;
  };
  std::vector<Contest> contested;
  const std::vector<CudaGroupProgram>& groups = compiled.program().groups;
  for (size_t i = 0; i < groups.size(); ++i) {
    const CudaGroupProgram& p = groups[i];
    const bool library = p.mode == CudaGroupProgram::Mode::kGemm && p.lt_output >= 0 && p.why_library.rfind(kLibraryEpilogueRule, 0) == 0;
    if (!library && !(p.mode == CudaGroupProgram::Mode::kGemmTemplate && p.library_alternative)) continue;
    contested.push_back({i, p.matmul, library});
    flipped.gemm_path_at[p.matmul] = library ? GemmPath::kTemplate : GemmPath::kLibrary;
  }
  if (contested.empty()) return Status::Ok();
  auto times = std::make_shared<GemmPathTimes>(graph, compiled, flipped, inputs);
  std::vector<KernelSearch> searches;
  for (const auto& [index, matmul, rule_is_library] : contested) {
    const CudaGroupProgram& p = groups[index];
    const Node& mm = compiled.graph().node(matmul);
    const Node& a = compiled.graph().node(mm.inputs[0]);
    KernelSearch search;
    search.name = fmt::format("gemm path at %{}", matmul);
    // The problem as cuBLASLt and the template see it: shapes, dtype and the epilogue.
    search.key = {compiled.device_name(), compiled.device_arch(), std::to_string(compiled.driver_version()),
                  "nvrtc " + compiled.nvrtc_version(),
                  KernelCache::Key({"gemm path", ShapeToString(a.shape), ShapeToString(compiled.graph().node(mm.inputs[1]).shape),
                                    LtEpilogueName(rule_is_library ? p.lt_epilogue : *p.library_alternative)}),
                  ShapeToString(mm.shape), std::string(DTypeName(mm.dtype))};
    search.candidates = {{{"gemm", "library"}}, {{"gemm", "template"}}};
    search.measure = [times, index, rule_is_library](const std::vector<nlohmann::json>& configs) -> StatusOr<std::vector<ConfigTiming>> {
      ASSIGN_OR_RETURN(auto us, times->Times(index, rule_is_library));
      std::vector<ConfigTiming> out;
      for (const nlohmann::json& c : configs) out.push_back({c, us[c.value("gemm", "library") == "template" ? 1 : 0], ""});
      return out;
    };
    searches.push_back(std::move(search));
  }
  const size_t first = report.kernels.size();  // TuneKernels appends one result per search
  RETURN_IF_ERROR(TuneKernels(searches, cache, tune, start, report));
  for (size_t s = 0; s < contested.size() && first + s < report.kernels.size(); ++s)
    tuned.gemm_path_at[contested[s].matmul] =
        report.kernels[first + s].best.value("gemm", "library") == "template" ? GemmPath::kTemplate : GemmPath::kLibrary;
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<CudaExecutable>> TuneForGpu(const Graph& graph, const CudaCompileOptions& options,
                                                       const TuneOptions& tune, TuneReport* report) {
  auto start = TuneClock::now();
  TuneReport local;
  TuneReport& r = report ? *report : local;
  ASSIGN_OR_RETURN(TuningCache cache, OpenTuningCache(tune, options.cache_dir));
  CudaCompileOptions base = options;
  base.poison_outputs = false;
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> compiled, CompileForCuda(graph, base));
  std::vector<Tensor> inputs = TuningInputs(compiled->graph());
  ASSIGN_OR_RETURN(std::vector<Tensor> warm, compiled->Run(inputs));  // real data in every buffer
  std::vector<KernelSearch> searches;
  for (const CudaLaunchable* k : compiled->launchables()) searches.push_back(CudaKernelSearch(*compiled, *k, tune));
  RETURN_IF_ERROR(TuneKernels(searches, cache, tune, start, r));
  CudaCompileOptions tuned = options;
  for (const KernelTuneResult& k : r.kernels) tuned.configs[k.fingerprint] = CudaConfigFromJson(k.best);
  // The templates' own configurations, where a template has more than its rule's to offer.
  std::vector<KernelSearch> template_searches;
  for (const CudaGroupProgram& p : compiled->program().groups)
    if (p.kernel && p.kernel->template_kernel) {
      KernelSearch search = TemplateSearch(*compiled, *p.kernel, tune);
      if (search.candidates.size() > 1) template_searches.push_back(std::move(search));
    }
  const size_t first_template = r.kernels.size();
  RETURN_IF_ERROR(TuneKernels(template_searches, cache, tune, start, r));
  for (size_t i = first_template; i < r.kernels.size(); ++i) tuned.template_configs[r.kernels[i].fingerprint] = r.kernels[i].best;
  if (options.gemm == GemmPath::kAuto) RETURN_IF_ERROR(TuneGemmPaths(graph, *compiled, tuned, inputs, cache, tune, start, r));
  ASSIGN_OR_RETURN(compiled, CompileForCuda(graph, tuned));
  if (tune.fallback && options.fuse) {
    ASSIGN_OR_RETURN(compiled, ApplyMeasuredFallbacks(graph, std::move(compiled), tuned, inputs, r.fallbacks));
  }
  r.seconds = SecondsSince(start);
  return compiled;
}

}  // namespace tilefuse

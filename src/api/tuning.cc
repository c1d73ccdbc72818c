// `tilefuse tune` as a library call (tilefuse/tilefuse.h): the model's kernels tuned on the
// backend a compile with ModelOptions::tune would use, so that the compile finds them cached.
#include <fmt/format.h>

#include "api/backend_setup.h"
#include "api/model_inputs.h"
#include "tilefuse/tilefuse.h"
#include "tune/cpu_tuner.h"
#include "tune/gpu_tuner.h"

namespace tilefuse {
namespace {

// The device tuned; `report` filled in, `note` set when auto fell back to the CPU.
StatusOr<std::string> TuneOnBackend(const TuningOptions& options, MatmulPrecision precision, const Graph& passed,
                                    const TuneOptions& tune, TuneReport& report, std::string& note) {
  if (options.backend != "cpu") {
    CudaCompileOptions defaults;
    defaults.device_ordinal = options.device;
    defaults.precision = precision;
    StatusOr<std::unique_ptr<CudaExecutable>> gpu = TuneForGpu(passed, defaults, tune, &report);
    if (gpu.ok()) return (*gpu)->device_name();
    // Unavailable-style errors (no driver, no GPU) are NotFound: auto tunes the cpu instead.
    if (options.backend == "cuda" || gpu.status().code() != StatusCode::kNotFound) return gpu.status();
    note = gpu.status().message();
    report = TuneReport{};
  }
  const CpuCompileOptions defaults;
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> cpu, TuneForCpu(passed, defaults, tune, &report));
  return CpuTuningDeviceName();
}

TuningReport Summarize(const TuneReport& report) {
  TuningReport summary;
  summary.seconds = report.seconds;
  summary.measurements = report.measurements;
  summary.cache_hits = report.cache_hits;
  summary.budget_exhausted = report.budget_exhausted;
  for (const KernelTuneResult& k : report.kernels)
    summary.kernels.push_back({k.name, k.candidates, k.pruned, k.measured, k.seconds, k.best_us, k.default_us, k.best.dump()});
  if (!report.fallbacks.empty()) summary.fallbacks = DescribeFallbacks(report.fallbacks);
  return summary;
}

}  // namespace

StatusOr<TuningReport> Tune(const std::string& path, const TuningOptions& options) {
  if (options.backend != "auto" && options.backend != "cuda" && options.backend != "cpu")
    return InvalidArgument(fmt::format("backend '{}' is not one of auto, cuda, cpu", options.backend));
  RETURN_IF_ERROR(CheckDeviceForBackend(options.device, options.backend));
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(path, ImportOptions{.dims = options.dims}));
  // The graph the backend compiles (PassOptionsForBackend): what a later compile looks up.
  ASSIGN_OR_RETURN(MatmulPrecision precision, ParseMatmulPrecision(options.precision));
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(imported.graph, PassOptionsForBackend(options.backend, options.device)));
  TuneOptions tune;
  tune.budget_s = options.budget_s;
  tune.fallback = options.fallback;
  tune.progress = options.progress;
  TuneReport report;
  std::string note;
  ASSIGN_OR_RETURN(std::string device, TuneOnBackend(options, precision, passed, tune, report, note));
  TuningReport summary = Summarize(report);
  summary.device = device;
  summary.note = note;
  nlohmann::json j = report.ToJson();
  j["model"] = path;
  j["device"] = device;
  summary.json = j.dump(2);
  return summary;
}

}  // namespace tilefuse

#include "driver/driver.h"
#include "tune/cpu_tuner.h"

#include <thread>

#include "backend/cpu/host_jit.h"
#include "codegen/cpp/cpp_emitter.h"
#include "codegen/kernel_fingerprint.h"
#include "support/cpu_info.h"
#include "support/kernel_cache.h"
#include "tune/cpu_search_space.h"
#include "tune/measured_fallback.h"
#include "tune/tuning_cache.h"

namespace tilefuse {

namespace {

// The kernel's identity across graphs: its default source with its name blanked (the
// same fused group in another model, at the same shapes, hits the same entry).
std::string KernelHash(const Kernel& kernel) {
  Kernel blank = kernel;
  blank.name = "KERNEL";
  return KernelCache::Key({EmitCppFunction(blank), CppConfigToJson(CppKernelConfig{}).dump()});
}

KernelSearch CppKernelSearch(CpuExecutable& compiled, const std::string& name, const Kernel& kernel,
                             const TuningKey& machine, const TuneOptions& tune) {
  KernelSearch search;
  search.name = name;
  search.fingerprint = KernelFingerprint(kernel);
  search.key = machine;
  search.key.kernel_hash = KernelHash(kernel);
  CppSearchSpace space = CppCandidates(kernel, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (const CppKernelConfig& c : space.candidates) search.candidates.push_back(CppConfigToJson(c));
  search.pruned = static_cast<int>(space.pruned.size());
  search.rank = [](const nlohmann::json& c) { return CppConfigRank(CppConfigFromJson(c)); };
  search.measure = MeasureTypedConfigs<CpuExecutable, CppKernelConfig>(compiled, name, tune, CppConfigFromJson);
  return search;
}

}  // namespace

std::string CpuTuningDeviceName() { return "cpu: " + CpuModelName(); }

StatusOr<std::unique_ptr<CpuExecutable>> TuneForCpu(const Graph& graph, const CpuCompileOptions& options,
                                                    const TuneOptions& tune, TuneReport* report) {
  auto start = TuneClock::now();
  TuneReport local;
  TuneReport& r = report ? *report : local;
  ASSIGN_OR_RETURN(TuningCache cache, OpenTuningCache(tune, options.cache_dir));
  HostJitOptions jit_options;
  if (!options.cache_dir.empty()) jit_options.cache_dir = options.cache_dir;
  ASSIGN_OR_RETURN(HostJit jit, HostJit::Create(jit_options));
  TuningKey machine{CpuTuningDeviceName(), CpuIsaLevel(), "", jit.compiler_identity(), "", "", ""};

  CpuCompileOptions base = options;
  base.poison_outputs = false;
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> compiled, CompileForCpu(graph, base));
  std::vector<Tensor> inputs = TuningInputs(compiled->graph());
  ASSIGN_OR_RETURN(std::vector<Tensor> warm, compiled->Run(inputs));  // real data in every buffer
  std::vector<KernelSearch> searches;
  for (const KernelInfo& info : compiled->kernels()) {
    std::vector<std::string> names = info.prologue_kernels;
    names.push_back(info.name);
    for (const std::string& name : names)
      if (const Kernel* kernel = compiled->LoopKernel(name)) searches.push_back(CppKernelSearch(*compiled, name, *kernel, machine, tune));
  }
  RETURN_IF_ERROR(TuneKernels(searches, cache, tune, start, r));
  CpuCompileOptions tuned = options;
  for (const KernelTuneResult& k : r.kernels) tuned.configs[k.fingerprint] = CppConfigFromJson(k.best);
  ASSIGN_OR_RETURN(compiled, CompileForCpu(graph, tuned));
  if (tune.fallback && options.fuse && !options.plan_override) {
    ASSIGN_OR_RETURN(compiled, ApplyMeasuredFallbacks(graph, std::move(compiled), tuned, inputs, r.fallbacks));
  }
  r.seconds = SecondsSince(start);
  return compiled;
}

}  // namespace tilefuse

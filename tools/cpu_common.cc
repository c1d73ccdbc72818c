#include "cpu_common.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_driver.h"
#include "driver/driver.h"
#include "support/check.h"
#include "support/env_switch.h"
#include "support/kernel_cache.h"
#include "tune/cpu_tuner.h"

namespace tilefuse::cli {

StatusOr<std::unique_ptr<CpuExecutable>> CompileModelForCpu(const Graph& passed, bool fuse, const std::string& cache_dir, bool tune) {
  CpuCompileOptions options;
  options.cache_dir = cache_dir;
  options.fuse = fuse;
  options.device = "cpu";
  if (!tune) return CompileForCpu(passed, options);
  TuneOptions tuning;
  tuning.cache_dir = KernelCache::DefaultDirectory();
  return TuneForCpu(passed, options, tuning, nullptr);
}

PassOptions CpuPassOptions() {
  PassOptions options;
  options.library_conv = CpuRunsLibraryConv();
  return options;
}

PassOptions CudaPassOptions() {
  PassOptions options;
  options.channels_last = !SwitchedOff("TILEFUSE_CHANNELS_LAST");
  return options;
}

PassOptions PassOptionsForBackend(const std::string& backend) {
  if (backend == "cpu" || (backend == "auto" && !CudaDevice::Get().ok())) return CpuPassOptions();
  if (backend == "reference") return PassOptions{};
  return CudaPassOptions();
}

const KernelInfo* FindKernel(const CpuExecutable& compiled, const std::string& name) {
  for (const KernelInfo& kernel : compiled.kernels()) {
    if (kernel.name == name) return &kernel;
  }
  return nullptr;
}

std::string DescribeKernelOrigin(const KernelInfo& kernel) {
  if (!kernel.generated) return fmt::format("reference ({})", kernel.why_not);
  // A gemm group whose prologue is partly on the reference kernels says which part.
  std::string origin = kernel.why_not.empty() ? "generated" : fmt::format("generated ({})", kernel.why_not);
  return kernel.library.empty() ? origin : fmt::format("{}: {}", origin, kernel.library);
}

void RecordKernelTrace(const CpuExecutable& compiled, const std::vector<KernelTiming>& timings,
                       TraceRecorder& recorder) {
  recorder.SetTrackName(0, "cpu kernels");
  for (const KernelTiming& timing : timings) {
    TraceEvent event{timing.name, "kernel", timing.start_us, timing.duration_us, 0, {}};
    if (const KernelInfo* kernel = FindKernel(compiled, timing.name)) {
      event.args.emplace_back("kind", std::string(GroupKindName(kernel->kind)));
      event.args.emplace_back("generated", kernel->generated ? "true" : "false");
      event.args.emplace_back("nodes", std::to_string(kernel->num_nodes));
      if (!kernel->generated) event.args.emplace_back("why_not", kernel->why_not);
    }
    recorder.Add(std::move(event));
  }
}

}  // namespace tilefuse::cli

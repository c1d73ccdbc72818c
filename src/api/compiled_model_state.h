// What a CompiledModel (tilefuse/tilefuse.h) holds, for the facade's own files in src/api:
// the graph after the passes and the executable of the backend it runs on (none: the
// reference interpreter).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executable.h"
#include "backend/cuda/cuda_executable.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {

struct CompiledModel::State {
  Graph passed;
  ModelOptions options;
  std::string backend, backend_note;
  std::vector<std::string> warnings;  // groups on the reference interpreter (CompiledModel::warnings)
  std::unique_ptr<CudaExecutable> gpu;
  std::unique_ptr<CpuExecutable> cpu;
  std::vector<KernelSummary> kernels;
  int described_swaps = 0;  // the GPU executable's kernel_swaps() that `kernels` describes
  std::vector<ValueSpec> inputs, outputs;
  double compile_ms = 0;
  double passes_ms = 0;  // FromGraph's graph passes (not FromPassedGraph's caller's)
  std::vector<std::pair<std::string, double>> pass_ms;  // and each pass's, in order
  // A plan from the compiled-model cache (api/model_cache.h), for the backend that made it;
  // the milliseconds the cache took when it answered (else negative).
  std::optional<FusionPlan> cached_plan;
  std::string cached_plan_backend;
  double model_cache_ms = -1;
  double binding_plan_ms = -1;  // finding the plan of a model file's earlier binding (api/binding_plans.h); -1: none
  double import_ms = -1;  // FromModelFile's import of the graph (-1: not imported here)
  std::mutex run_mutex;

  // The compiled executable, whichever backend; null on the reference interpreter.
  Executable* executable() const { return gpu ? static_cast<Executable*>(gpu.get()) : cpu.get(); }
};

// `kernels` and `warnings` from what the executable runs now.
void DescribeKernels(CompiledModel::State& s);
// DescribeKernels where a background compile's kernels have been swapped in since.
void DescribeSwappedKernels(CompiledModel::State& s);

}  // namespace tilefuse

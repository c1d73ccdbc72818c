// The facade's measurements (tilefuse/tilefuse.h): whole runs and each group timed as the
// benchmarks time them, the plan's intermediate memory, and the copy rates that "% of copy"
// compares with. What `tilefuse bench` and `demo` print, measured here.
#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "api/compiled_model_state.h"
#include "api/model_inputs.h"
#include "backend/cuda/copy_bandwidth.h"
#include "backend/cuda/cuda_driver.h"
#include "runtime/measure.h"
#include "runtime/memory_plan.h"

namespace tilefuse {
namespace {

// Enough copies of the inputs that three L2s' worth of data lies between two uses of one.
int GpuInputSets(int device, const std::vector<Tensor>& inputs) {
  StatusOr<CudaDevice*> gpu = CudaDevice::Get(device);
  if (!gpu.ok()) return 1;
  double input_bytes = 0;
  for (const Tensor& t : inputs) input_bytes += static_cast<double>(t.num_bytes());
  return static_cast<int>(std::clamp<double>(3.0 * (*gpu)->l2_bytes() / std::max(1.0, input_bytes) + 1, 1, 8));
}

Status NeedsCompiledKernels(const CompiledModel::State& s, const char* what) {
  if (s.executable()) return Status::Ok();
  return Unimplemented(fmt::format("{} times compiled kernels; this model runs on the reference interpreter", what));
}

}  // namespace

StatusOr<BenchmarkResult> CompiledModel::Benchmark(const std::vector<Tensor>& inputs, const BenchmarkOptions& options) {
  State& s = *state_;
  RETURN_IF_ERROR(NeedsCompiledKernels(s, "a benchmark"));
  RETURN_IF_ERROR(ValidateInputs(s.passed, inputs, "the benchmark"));
  if (options.warmup < 0 || options.repeats < 1 || options.input_sets < 0)
    return InvalidArgument(fmt::format("a benchmark needs warmup >= 0, repeats >= 1 and input_sets >= 0 (got {}, {}, {})",
                                       options.warmup, options.repeats, options.input_sets));
  RETURN_IF_ERROR(FinishCompiles());  // timed: the kernels that run from now on
  BenchmarkResult result;
  result.input_sets = options.input_sets > 0 ? options.input_sets : s.gpu ? GpuInputSets(s.options.device, inputs) : 1;
  std::lock_guard<std::mutex> lock(s.run_mutex);
  ASSIGN_OR_RETURN(result.median_ms, s.executable()->BenchmarkMs(inputs, options.warmup, options.repeats, result.input_sets));
  return result;
}

StatusOr<std::vector<double>> CompiledModel::GroupTimesUs(const std::vector<Tensor>& inputs) {
  State& s = *state_;
  RETURN_IF_ERROR(NeedsCompiledKernels(s, "group timing"));
  RETURN_IF_ERROR(ValidateInputs(s.passed, inputs, "the group timing"));
  RETURN_IF_ERROR(FinishCompiles());
  std::lock_guard<std::mutex> lock(s.run_mutex);
  return tilefuse::GroupTimesUs(*s.executable(), inputs);
}

StatusOr<int64_t> CompiledModel::PlannedIntermediateBytes() const {
  const Executable* executable = state_->executable();
  if (!executable) return int64_t{0};
  ASSIGN_OR_RETURN(MemoryPlan memory, PlanFusionPlanMemory(executable->graph(), executable->plan()));
  return memory.arena_bytes;
}

StatusOr<GpuInfo> DescribeGpu(int device) {
  ASSIGN_OR_RETURN(CudaDevice * gpu, CudaDevice::Get(device));
  return GpuInfo{gpu->name(), gpu->l2_bytes(), gpu->sm_count()};
}

StatusOr<double> MeasureGpuCopyBandwidth(int device) {
  ASSIGN_OR_RETURN(CudaDevice * gpu, CudaDevice::Get(device));
  return MeasureCopyBandwidth(gpu);
}

StatusOr<double> MeasureGpuCopyMicroseconds(int device, double moved_bytes, int repeats) {
  ASSIGN_OR_RETURN(CudaDevice * gpu, CudaDevice::Get(device));
  return MeasureSameSizeCopyMicroseconds(gpu, moved_bytes, repeats);
}

double MeasureHostCopyBandwidth(int64_t bytes) {
  const size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  std::vector<char> from(size, 1), to(size, 0);
  std::vector<double> rates;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), size);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(2.0 * size / s);
  }
  volatile char sink = to[size / 2];  // the copies are used, so they are not elided
  (void)sink;
  std::nth_element(rates.begin(), rates.begin() + 2, rates.end());
  return rates[2];
}

}  // namespace tilefuse

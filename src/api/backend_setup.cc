#include "api/backend_setup.h"

#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_driver.h"
#include "driver/driver.h"
#include "support/env_switch.h"
#include "support/kernel_cache.h"
#include "tune/cpu_tuner.h"

namespace tilefuse {

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

PassOptions PassOptionsForBackend(const std::string& backend, int device) {
  if (backend == "cpu" || (backend == "auto" && !CudaDevice::Get(device).ok())) return CpuPassOptions();
  if (backend == "reference") return PassOptions{};
  return CudaPassOptions();
}

StatusOr<std::unique_ptr<CpuExecutable>> CompileModelForCpu(const Graph& passed, bool fuse, const std::string& cache_dir,
                                                            bool tune) {
  CpuCompileOptions options;
  options.cache_dir = cache_dir;
  options.fuse = fuse;
  options.device = "cpu";
  if (!tune) return CompileForCpu(passed, options);
  TuneOptions tuning;
  tuning.cache_dir = KernelCache::DefaultDirectory();
  return TuneForCpu(passed, options, tuning, nullptr);
}

Status ApplyCudaPathWords(const std::string& gemm, const std::string& attention, const std::string& precision,
                          CudaCompileOptions& options) {
  if (gemm == "auto") options.gemm = GemmPath::kAuto;
  else if (gemm == "template") options.gemm = GemmPath::kTemplate;
  else if (gemm == "library") options.gemm = GemmPath::kLibrary;
  else return InvalidArgument(fmt::format("gemm '{}' is not one of auto, template, library", gemm));
  if (attention == "template") options.attention = AttentionPath::kTemplate;
  else if (attention == "overlap") options.attention = AttentionPath::kOverlap;
  else if (attention == "serial") options.attention = AttentionPath::kSerial;
  else if (attention == "split") options.attention = AttentionPath::kSplit;
  else return InvalidArgument(fmt::format("attention '{}' is not one of template, overlap, serial, split", attention));
  if (precision == "highest") options.precision = MatmulPrecision::kHighest;
  else if (precision == "high") options.precision = MatmulPrecision::kHigh;
  else return InvalidArgument(fmt::format("precision '{}' is not one of highest, high", precision));
  return Status::Ok();
}

Status CheckGpuOrdinal(int device) {
  if (device < 0) return InvalidArgument(fmt::format("device {} is not a GPU ordinal (0, 1, ... in CUDA's numbering)", device));
  StatusOr<int> count = CudaDeviceCount();
  if (!count.ok())
    return NotFound(fmt::format("there is no GPU {}: this machine has 0 usable CUDA GPUs: {}", device, count.status().message()));
  if (device >= *count)
    return NotFound(fmt::format("there is no GPU {}: this machine has {} CUDA GPU(s) (numbered from 0)", device, *count));
  return Status::Ok();
}

Status CheckDeviceForBackend(int device, const std::string& backend) {
  if (device == 0) return Status::Ok();
  if (device > 0 && (backend == "cpu" || backend == "reference"))
    return InvalidArgument(fmt::format("device {} names a GPU, but backend '{}' runs on the host (use backend cuda or auto, "
                                       "or leave device at 0)",
                                       device, backend));
  return CheckGpuOrdinal(device);
}

}  // namespace tilefuse

#include "backend/cuda/cuda_driver.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fmt/format.h>
#include <map>
#include <mutex>

#include "backend/cuda/shared_library.h"

namespace tilefuse {

#define TF_STRINGIFY_NAME(x) #x
#define TF_EXPANDED_NAME(x) TF_STRINGIFY_NAME(x)

StatusOr<CudaDevice*> CudaDevice::Get(int ordinal) {
  // One per ordinal for the process (kernels may run until exit); a failed open is
  // remembered, not retried on every compile.
  static std::mutex mutex;
  static std::map<int, StatusOr<CudaDevice*>> devices;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = devices.find(ordinal);
  if (it == devices.end()) {
    auto* d = new CudaDevice();
    Status status = d->Open(ordinal);
    if (!status.ok()) delete d;
    it = devices.emplace(ordinal, status.ok() ? StatusOr<CudaDevice*>(d) : StatusOr<CudaDevice*>(status)).first;
  }
  return it->second;
}

namespace {

StatusOr<void*> OpenDriverLibrary() {
  StatusOr<void*> opened = OpenFirstLibrary("the CUDA driver (libcuda)", "TILEFUSE_LIBCUDA",
                                           {"libcuda.so.1", "libcuda.so", "/usr/local/nvidia/lib64/libcuda.so.1"});
  if (!opened.ok() && !std::getenv("TILEFUSE_LIBCUDA"))  // the usual case on a machine without a GPU: one short line
    return NotFound("no CUDA driver on this machine (libcuda.so.1 not found; $TILEFUSE_LIBCUDA names it if it is elsewhere)");
  return opened;
}

}  // namespace

StatusOr<int> CudaDeviceCount() {
  ASSIGN_OR_RETURN(void* handle, OpenDriverLibrary());
  // Two entry points only: counting must not retain a context (memory on every GPU).
  auto init = reinterpret_cast<decltype(&::cuInit)>(dlsym(handle, TF_EXPANDED_NAME(cuInit)));
  auto get_count = reinterpret_cast<decltype(&::cuDeviceGetCount)>(dlsym(handle, TF_EXPANDED_NAME(cuDeviceGetCount)));
  if (!init || !get_count) return NotFound("the CUDA driver lacks cuInit or cuDeviceGetCount");
  int count = 0;
  if (CUresult r = init(0); r != CUDA_SUCCESS)
    return r == CUDA_ERROR_NO_DEVICE ? StatusOr<int>(0) : NotFound(fmt::format("cuInit failed: CUresult {}", static_cast<int>(r)));
  if (CUresult r = get_count(&count); r != CUDA_SUCCESS)
    return NotFound(fmt::format("cuDeviceGetCount failed: CUresult {}", static_cast<int>(r)));
  return count;
}

Status CudaDevice::Open(int ordinal) {
  ASSIGN_OR_RETURN(void* handle, OpenDriverLibrary());
#define TF_RESOLVE(name)                                                                        \
  api_.name = reinterpret_cast<decltype(api_.name)>(dlsym(handle, TF_EXPANDED_NAME(name)));     \
  if (!api_.name) return NotFound("the CUDA driver lacks " TF_EXPANDED_NAME(name) "; it is older than CUDA 12");
  TF_CUDA_DRIVER_FUNCTIONS(TF_RESOLVE)
#undef TF_RESOLVE
  RETURN_IF_ERROR(Check(api_.cuInit(0), "cuInit"));
  int count = 0;
  RETURN_IF_ERROR(Check(api_.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return NotFound("the CUDA driver found no GPU");
  if (ordinal < 0 || ordinal >= count)
    return NotFound(fmt::format("there is no GPU {}: the CUDA driver found {} (numbered from 0)", ordinal, count));
  RETURN_IF_ERROR(Check(api_.cuDeviceGet(&device_, ordinal), "cuDeviceGet"));
  char name[256] = {};
  RETURN_IF_ERROR(Check(api_.cuDeviceGetName(name, sizeof(name), device_), "cuDeviceGetName"));
  name_ = name;
  auto attribute = [&](CUdevice_attribute a, int& out) { return Check(api_.cuDeviceGetAttribute(&out, a, device_), "cuDeviceGetAttribute"); };
  int l2 = 0, smem = 0;
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, major_));
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, minor_));
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sm_count_));
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, max_threads_per_sm_));
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, l2));
  RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, smem));
  l2_bytes_ = l2;
  max_shared_optin_ = smem;
  size_t total = 0;
  RETURN_IF_ERROR(Check(api_.cuDeviceTotalMem(&total, device_), "cuDeviceTotalMem"));
  total_memory_ = static_cast<int64_t>(total);
  RETURN_IF_ERROR(Check(api_.cuDriverGetVersion(&driver_version_), "cuDriverGetVersion"));
  RETURN_IF_ERROR(Check(api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(MakeCurrent());
  return Check(api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

Status CudaDevice::MakeCurrent() const { return Check(api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

Status CudaDevice::Check(CUresult result, const std::string& what) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  const char* name = nullptr;
  const char* description = nullptr;
  if (api_.cuGetErrorName) api_.cuGetErrorName(result, &name);
  if (api_.cuGetErrorString) api_.cuGetErrorString(result, &description);
  std::string message = fmt::format("{} failed: {} ({})", what, name ? name : fmt::format("CUresult {}", static_cast<int>(result)),
                                    description ? description : "no description");
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return ResourceExhausted("out of GPU memory: " + message);
  if (result == CUDA_ERROR_NO_DEVICE) return NotFound(message);
  return Internal(message);
}

std::string CudaDevice::arch() const {
  return fmt::format("sm_{}{}{}", major_, minor_, major_ == 9 && minor_ == 0 ? "a" : "");
}

}  // namespace tilefuse

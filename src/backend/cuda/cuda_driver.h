// The CUDA driver API, loaded at run time: libcuda is dlopen()ed on first use, so a
// machine with no GPU or driver runs tilefuse on the CPU instead (CudaDevice::Open says
// why in one line). One CudaDevice per process: the primary context of one GPU, made
// current on the calling thread by every entry point that touches the device.
#pragma once

#include <cuda.h>
#include <string>

#include "tilefuse/status.h"

namespace tilefuse {

// The driver entry points tilefuse uses. cuda.h maps names to their current versions
// (cuMemAlloc → cuMemAlloc_v2), and the same macro expansion names the symbol we look up.
#define TF_CUDA_DRIVER_FUNCTIONS(X)                                                                       \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)              \
  X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute) \
  X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)     \
  X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemsetD32Async)  \
  X(cuMemGetInfo) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamBeginCapture)    \
  X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags) X(cuGraphExecUpdate) X(cuGraphLaunch) X(cuGraphExecDestroy) \
  X(cuGraphDestroy) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)        \
  X(cuEventDestroy) X(cuGetErrorString) X(cuGetErrorName) X(cuLaunchKernelEx) X(cuTensorMapEncodeTiled)       \
  X(cuTensorMapEncodeIm2col) X(cuOccupancyMaxActiveClusters)

struct CudaDriverApi {
#define TF_DECLARE_DRIVER_FUNCTION(name) decltype(&::name) name = nullptr;
  TF_CUDA_DRIVER_FUNCTIONS(TF_DECLARE_DRIVER_FUNCTION)
#undef TF_DECLARE_DRIVER_FUNCTION
};

// How many GPUs the CUDA driver sees (0 when it answers that there are none), without
// opening any; the reason when there is no driver to ask.
StatusOr<int> CudaDeviceCount();

class CudaDevice {
 public:
  // The process's device `ordinal` (CUDA's numbering): loads libcuda, initialises it,
  // retains the device's primary context and creates the stream tilefuse runs on it.
  // NotFound-style errors say what is missing ("no libcuda.so.1", "no CUDA device", an
  // ordinal past the last GPU).
  static StatusOr<CudaDevice*> Get(int ordinal = 0);

  const CudaDriverApi& api() const { return api_; }
  // Makes the context current on this thread (driver calls need it).
  Status MakeCurrent() const;
  // OK, or an error naming `what` (the call and its subject: "cuLaunchKernel tf_group3")
  // and the driver's name and description of `result`. Out of memory → ResourceExhausted.
  Status Check(CUresult result, const std::string& what) const;

  CUdevice device() const { return device_; }
  CUstream stream() const { return stream_; }
  const std::string& name() const { return name_; }
  std::string arch() const;  // "sm_90a" for compute capability 9.0 (Hopper gets the a-variant)
  int compute_major() const { return major_; }
  int compute_minor() const { return minor_; }
  int sm_count() const { return sm_count_; }
  int max_threads_per_sm() const { return max_threads_per_sm_; }
  int64_t l2_bytes() const { return l2_bytes_; }
  int64_t max_shared_per_block_optin() const { return max_shared_optin_; }
  int64_t total_memory() const { return total_memory_; }
  int driver_version() const { return driver_version_; }

 private:
  CudaDevice() = default;
  Status Open(int ordinal);
  CudaDriverApi api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::string name_;
  int major_ = 0, minor_ = 0, sm_count_ = 0, max_threads_per_sm_ = 0, driver_version_ = 0;
  int64_t l2_bytes_ = 0, max_shared_optin_ = 0, total_memory_ = 0;
};

}  // namespace tilefuse

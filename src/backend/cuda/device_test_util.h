// For tests that launch a hand-written kernel on the GPU: device memory freed on every path,
// and a compiled cubin's function loaded.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/nvrtc_compiler.h"

namespace tilefuse {

struct DeviceBuffers {
  const CudaDevice* device;
  std::vector<CUdeviceptr> pointers;  // 0: not allocated
  ~DeviceBuffers() {
    for (CUdeviceptr p : pointers)
      if (p) device->api().cuMemFree(p);
  }
};

// `name` from `cubin`, its module in `module` (the caller unloads it).
inline Status LoadFunction(const CudaDevice& gpu, const CubinResult& cubin, const std::string& name, CUmodule& module,
                           CUfunction& function) {
  RETURN_IF_ERROR(gpu.Check(gpu.api().cuModuleLoadData(&module, cubin.cubin.data()), "cuModuleLoadData"));
  return gpu.Check(gpu.api().cuModuleGetFunction(&function, module, name.c_str()), "cuModuleGetFunction");
}

}  // namespace tilefuse

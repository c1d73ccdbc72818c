// For tests that launch a hand-written kernel on the GPU: device memory freed on every path,
// and a compiled cubin's function loaded.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/kernel_launch.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"

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

// The test kernels' NVRTC cache folder.
inline std::string TestKernelCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

// A hand-written kernel's text, with the device library, compiled for sm_90a.
inline StatusOr<CubinResult> CompileTestKernel(NvrtcCompiler& nvrtc, const char* text) {
  CudaKernelSource source;
  source.function = text;
  return nvrtc.Compile(CudaTranslationUnit({source}), "sm_90a");
}

// A hand-written kernel compiled for sm_90a, no GPU needed (a test's KernelCompilesForSm90a):
// `skip` says why it could not be (no NVRTC), `status` a failure to compile.
struct CompiledTestKernel {
  std::string skip;
  Status status;
};
inline CompiledTestKernel CompileTestKernelForSm90a(const char* text) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) return {"NVRTC not available: " + nvrtc.status().ToString(), Status::Ok()};
  StatusOr<CubinResult> cubin = CompileTestKernel(*nvrtc, text);
  return {"", cubin.ok() ? Status::Ok() : cubin.status()};
}

// A hand-written kernel compiled and loaded on the GPU (LoadTestKernel): `skip` says why it
// could not be (no NVRTC, no GPU), `status` a failure to compile or load; the module is
// unloaded with it.
struct LoadedTestKernel {
  const CudaDevice* gpu = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  std::string skip;
  Status status;
  LoadedTestKernel() = default;
  LoadedTestKernel(const LoadedTestKernel&) = delete;
  LoadedTestKernel& operator=(const LoadedTestKernel&) = delete;
  ~LoadedTestKernel() {
    if (module) gpu->api().cuModuleUnload(module);
  }
};

inline void LoadTestKernel(const char* text, const std::string& name, LoadedTestKernel& out) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) {
    out.skip = "NVRTC not available: " + nvrtc.status().ToString();
    return;
  }
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) {
    out.skip = "no GPU: " + device.status().ToString();
    return;
  }
  out.gpu = *device;
  out.status = out.gpu->MakeCurrent();
  if (!out.status.ok()) return;
  StatusOr<CubinResult> cubin = CompileTestKernel(*nvrtc, text);
  out.status = cubin.ok() ? LoadFunction(*out.gpu, *cubin, name, out.module, out.function) : cubin.status();
}

// `function(buffers..., n)` launched as `grid` blocks of 256 threads on the device's stream,
// waited for.
inline Status LaunchOverElements(const CudaDevice& gpu, CUfunction function, const std::vector<CUdeviceptr>& buffers, int64_t n,
                                 int grid, const std::string& name) {
  LaunchSpec spec;
  spec.grid = {grid, 1, 1};
  spec.block = {256, 1, 1};
  for (size_t i = 0; i < buffers.size(); ++i) {
    LaunchArg buffer;
    buffer.node = static_cast<int>(i);
    spec.args.push_back(buffer);
  }
  LaunchArg count;
  count.kind = LaunchArg::Kind::kScalar;
  count.scalar = n;
  spec.args.push_back(count);
  RETURN_IF_ERROR(PrepareFunction(gpu, function, spec, name));
  RETURN_IF_ERROR(LaunchKernel(gpu, function, spec, buffers, 0, gpu.stream(), name));
  return gpu.Check(gpu.api().cuStreamSynchronize(gpu.stream()), name);
}

}  // namespace tilefuse

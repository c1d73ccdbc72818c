// Launching a generated kernel as its LaunchSpec says: parameters resolved against the
// graph's device addresses (buffers by address, TMA descriptors encoded over them),
// 3-D grid and block, cluster dimensions and dynamic shared memory, through
// cuLaunchKernelEx.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/cuda_driver.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

// The TMA descriptor `map` describes over the tensor at `base`. InvalidArgument when the
// driver refuses it (alignment, strides, box sizes), naming the value.
StatusOr<CUtensorMap> EncodeTensorMap(const CudaDevice& device, CUdeviceptr base, const TensorMapArg& map);

// Raises the function's dynamic shared memory limit to what `spec` asks (needed above 48 KB).
Status PrepareFunction(const CudaDevice& device, CUfunction function, const LaunchSpec& spec, const std::string& name);

// `address[node]` is the device address of graph value `node`; `scratch` that of at least
// `spec.scratch_bytes` of the kernel's scratch memory (LaunchSpec). `programmatic`: the work
// ahead of it in the stream is tilefuse's own (a kernel of the same model), so a kernel that
// awaits the prior grid (LaunchSpec::awaits_prior_grid) may be launched before that work ends
// — it may read the model's weights before its wait, which no kernel of the model writes,
// but which a caller's kernel just ahead of the model's first one may.
Status LaunchKernel(const CudaDevice& device, CUfunction function, const LaunchSpec& spec, const std::vector<CUdeviceptr>& address,
                    CUdeviceptr scratch, CUstream stream, const std::string& name, bool programmatic = false);

}  // namespace tilefuse

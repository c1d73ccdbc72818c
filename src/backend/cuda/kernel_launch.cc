#include "backend/cuda/kernel_launch.h"

#include <algorithm>
#include <fmt/format.h>

#include "support/env_switch.h"

namespace tilefuse {

namespace {

// Hopper and later launch programmatically; TILEFUSE_PDL=0 keeps every launch behind the
// whole of the one before it (for comparison). Read at each launch: a graph captured after
// the switch changes follows it.
bool ProgrammaticLaunches(const CudaDevice& device) { return device.compute_major() >= 9 && !SwitchedOff("TILEFUSE_PDL"); }

CUtensorMapDataType TensorMapType(const TensorMapArg& map) {
  if (map.tf32) return CU_TENSOR_MAP_DATA_TYPE_TFLOAT32;
  switch (map.dtype) {
    case DType::kBF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::kF16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::kF32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
}

}  // namespace

StatusOr<CUtensorMap> EncodeTensorMap(const CudaDevice& device, CUdeviceptr base, const TensorMapArg& map) {
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], element_strides[5];
  for (int d = 0; d < map.rank; ++d) {
    dims[d] = static_cast<cuuint64_t>(map.dims[d]);
    box[d] = static_cast<cuuint32_t>(map.box[d]);
    element_strides[d] = 1;
    if (d + 1 < map.rank) strides[d] = static_cast<cuuint64_t>(map.strides_bytes[d]);
  }
  CUtensorMap out;
  if (map.im2col) {
    // Out-of-bounds pixels (the convolution's padding, rows past the last image) arrive as zeros.
    const Im2colMapArg& m = *map.im2col;
    for (int d = 1; d <= 2; ++d) element_strides[d] = static_cast<cuuint32_t>(m.strides[d - 1]);
    CUresult r = device.api().cuTensorMapEncodeIm2col(
        &out, TensorMapType(map), static_cast<cuuint32_t>(map.rank), reinterpret_cast<void*>(base), dims, strides, m.lower.data(),
        m.upper.data(), static_cast<cuuint32_t>(m.channels), static_cast<cuuint32_t>(m.pixels), element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
      return InvalidArgument(device.Check(r, fmt::format("cuTensorMapEncodeIm2col over %{} (C {} W {} H {} N {}, corners {},{} / {},{}, "
                                                         "strides {},{}, {} channels x {} pixels)",
                                                         map.node, map.dims[0], map.dims[1], map.dims[2], map.dims[3], m.lower[0],
                                                         m.lower[1], m.upper[0], m.upper[1], m.strides[0], m.strides[1], m.channels,
                                                         m.pixels))
                                 .message());
    return out;
  }
  CUresult r = device.api().cuTensorMapEncodeTiled(
      &out, TensorMapType(map), static_cast<cuuint32_t>(map.rank), reinterpret_cast<void*>(base), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, map.swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return InvalidArgument(device.Check(r, fmt::format("cuTensorMapEncodeTiled over %{} (dims {}x{}x{}, box {}x{}x{})", map.node, map.dims[0],
                                                       map.dims[1], map.dims[2], map.box[0], map.box[1], map.box[2]))
                               .message());
  return out;
}

Status PrepareFunction(const CudaDevice& device, CUfunction function, const LaunchSpec& spec, const std::string& name) {
  // Clusters past 8 CTAs (a decode attention's 12 heads) are not portable: the kernel says it takes one.
  if (spec.cluster[0] * spec.cluster[1] * spec.cluster[2] > 8)
    RETURN_IF_ERROR(device.Check(device.api().cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                                 "cuFuncSetAttribute (a non-portable cluster size) " + name));
  if (spec.dynamic_shared_bytes <= 48 * 1024) return Status::Ok();
  return device.Check(device.api().cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                      static_cast<int>(spec.dynamic_shared_bytes)),
                      "cuFuncSetAttribute (dynamic shared memory) " + name);
}

Status LaunchKernel(const CudaDevice& device, CUfunction function, const LaunchSpec& spec, const std::vector<CUdeviceptr>& address,
                    CUdeviceptr scratch, CUstream stream, const std::string& name, bool programmatic) {
  if (spec.scratch_bytes > 0 && scratch == 0)
    return InvalidArgument(fmt::format("{} needs {} bytes of scratch memory and got none", name, spec.scratch_bytes));
  // Parameter storage must not move once its addresses are taken.
  std::vector<CUdeviceptr> pointers;
  std::vector<CUtensorMap> maps;
  std::vector<int64_t> scalars;
  pointers.reserve(spec.args.size());
  maps.reserve(spec.args.size());
  scalars.reserve(spec.args.size());
  std::vector<void*> params;
  for (const LaunchArg& arg : spec.args) {
    switch (arg.kind) {
      case LaunchArg::Kind::kBuffer:
        pointers.push_back(address[arg.node]);
        params.push_back(&pointers.back());
        break;
      case LaunchArg::Kind::kTensorMap: {
        ASSIGN_OR_RETURN(CUtensorMap map, EncodeTensorMap(device, address[arg.map.node] + arg.map.offset_bytes, arg.map));
        maps.push_back(map);
        params.push_back(&maps.back());
        break;
      }
      case LaunchArg::Kind::kScalar:
        scalars.push_back(arg.scalar);
        params.push_back(&scalars.back());
        break;
      case LaunchArg::Kind::kScratch:
        pointers.push_back(scratch + static_cast<CUdeviceptr>(arg.scalar));
        params.push_back(&pointers.back());
        break;
      case LaunchArg::Kind::kBytes:  // the driver copies the struct's bytes at the launch (and a capture)
        params.push_back(const_cast<uint8_t*>(arg.bytes.data()));
        break;
    }
  }
  CUlaunchConfig config = {};
  // Grids past the hardware limit are clamped: the kernels stride over their work.
  config.gridDimX = static_cast<unsigned>(std::min<int64_t>(spec.grid[0], int64_t{1} << 30));
  config.gridDimY = static_cast<unsigned>(spec.grid[1]);
  config.gridDimZ = static_cast<unsigned>(spec.grid[2]);
  config.blockDimX = spec.block[0];
  config.blockDimY = spec.block[1];
  config.blockDimZ = spec.block[2];
  config.sharedMemBytes = static_cast<unsigned>(spec.dynamic_shared_bytes);
  config.hStream = stream;
  CUlaunchAttribute attributes[2] = {};
  config.attrs = attributes;
  if (spec.cluster[0] * spec.cluster[1] * spec.cluster[2] > 1) {
    CUlaunchAttribute& cluster = attributes[config.numAttrs++];
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = spec.cluster[0];
    cluster.value.clusterDim.y = spec.cluster[1];
    cluster.value.clusterDim.z = spec.cluster[2];
    if (spec.persistent_clusters) {
      // As many clusters as can be resident at once, no more.
      int resident = 0;
      RETURN_IF_ERROR(device.Check(device.api().cuOccupancyMaxActiveClusters(&resident, function, &config),
                                   "cuOccupancyMaxActiveClusters " + name));
      if (resident < 1) return ResourceExhausted(fmt::format("{}: no cluster of {} CTAs fits on this GPU", name, spec.cluster[0] * spec.cluster[1] * spec.cluster[2]));
      const int64_t most = int64_t{resident} * spec.cluster[0];
      config.gridDimX = static_cast<unsigned>(std::min<int64_t>(config.gridDimX, most));
    }
  }
  // Programmatic dependent launch: the kernel waits for the grid ahead of it itself
  // (tf_await_prior_grid), so its launch need not. Stream capture keeps it as a programmatic
  // edge of the CUDA graph.
  if (programmatic && spec.awaits_prior_grid && ProgrammaticLaunches(device)) {
    CUlaunchAttribute& programmatic = attributes[config.numAttrs++];
    programmatic.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    programmatic.value.programmaticStreamSerializationAllowed = 1;
  }
  return device.Check(device.api().cuLaunchKernelEx(&config, function, params.data(), nullptr), "cuLaunchKernelEx " + name);
}

}  // namespace tilefuse

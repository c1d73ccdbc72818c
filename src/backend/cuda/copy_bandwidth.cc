#include "backend/cuda/copy_bandwidth.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/device_allocator.h"

namespace tilefuse {

StatusOr<double> MeasureCopyBandwidth(CudaDevice* device, int64_t bytes) {
  DeviceAllocator& alloc = DeviceAllocator::Get(device);
  ASSIGN_OR_RETURN(CUdeviceptr src, alloc.Allocate(bytes, "copy source"));
  ASSIGN_OR_RETURN(CUdeviceptr dst, alloc.Allocate(bytes, "copy destination"));
  DeviceBuffer a(&alloc, src), b(&alloc, dst);
  const CudaDriverApi& api = device->api();
  RETURN_IF_ERROR(device->Check(api.cuMemsetD8Async(src, 1, bytes, device->stream()), "memset"));
  CUevent begin, end;
  api.cuEventCreate(&begin, 0);
  api.cuEventCreate(&end, 0);
  std::vector<double> seconds;
  for (int i = 0; i < 25; ++i) {
    api.cuEventRecord(begin, device->stream());
    RETURN_IF_ERROR(device->Check(api.cuMemcpyDtoDAsync(dst, src, bytes, device->stream()), "copy"));
    api.cuEventRecord(end, device->stream());
    RETURN_IF_ERROR(device->Check(api.cuEventSynchronize(end), "copy"));
    float ms = 0;
    api.cuEventElapsedTime(&ms, begin, end);
    if (i >= 5) seconds.push_back(ms / 1000);
  }
  api.cuEventDestroy(begin);
  api.cuEventDestroy(end);
  std::sort(seconds.begin(), seconds.end());
  return 2.0 * bytes / seconds[seconds.size() / 2];
}

}  // namespace tilefuse

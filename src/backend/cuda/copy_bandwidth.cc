#include "backend/cuda/copy_bandwidth.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/device_allocator.h"
#include "backend/cuda/queued_timing.h"

namespace tilefuse {

StatusOr<double> MeasureCopyMicroseconds(CudaDevice* device, int64_t bytes, int repeats) {
  DeviceAllocator& alloc = DeviceAllocator::Get(device);
  const int sets = static_cast<int>(std::clamp<int64_t>(3 * device->l2_bytes() / std::max<int64_t>(1, bytes) + 1, 1, 8));
  std::vector<DeviceBuffer> buffers;
  std::vector<CUdeviceptr> src, dst;
  for (int i = 0; i < sets; ++i) {
    ASSIGN_OR_RETURN(CUdeviceptr s, alloc.Allocate(bytes, "a copy source"));
    buffers.emplace_back(&alloc, s);
    ASSIGN_OR_RETURN(CUdeviceptr d, alloc.Allocate(bytes, "a copy destination"));
    buffers.emplace_back(&alloc, d);
    RETURN_IF_ERROR(device->Check(device->api().cuMemsetD8Async(s, 1, bytes, device->stream()), "memset"));
    src.push_back(s);
    dst.push_back(d);
  }
  auto copy = [&](int i) { return device->Check(device->api().cuMemcpyDtoDAsync(dst[i % sets], src[i % sets], bytes, device->stream()), "copy"); };
  for (int i = 0; i < 2 * sets; ++i) RETURN_IF_ERROR(copy(i));
  ASSIGN_OR_RETURN(std::vector<double> us, TimeQueuedCalls(*device, repeats, copy));
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

StatusOr<double> MeasureSameSizeCopyMicroseconds(CudaDevice* device, double moved_bytes, int repeats) {
  return MeasureCopyMicroseconds(device, std::max<int64_t>(256, static_cast<int64_t>(moved_bytes / 2)), repeats);
}

StatusOr<double> MeasureCopyBandwidth(CudaDevice* device, int64_t bytes) {
  ASSIGN_OR_RETURN(double us, MeasureCopyMicroseconds(device, bytes, 20));
  return 2.0 * bytes / (us * 1e-6);
}

}  // namespace tilefuse

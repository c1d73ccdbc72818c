#include "backend/cuda/device_allocator.h"

#include <fmt/format.h>
#include <map>
#include <mutex>

namespace tilefuse {

DeviceAllocator& DeviceAllocator::Get(CudaDevice* device) {
  // One per device, living for the process (its blocks may back kernels until exit).
  static std::mutex mutex;
  static std::map<CudaDevice*, DeviceAllocator*> allocators;
  std::lock_guard<std::mutex> lock(mutex);
  DeviceAllocator*& allocator = allocators[device];
  if (!allocator) allocator = new DeviceAllocator(device);
  return *allocator;
}

StatusOr<CUdeviceptr> DeviceAllocator::Allocate(int64_t bytes, const std::string& what) {
  // A size no device holds (or one that overflowed int64 on the way here) is refused
  // before the rounding below could overflow again.
  if (bytes < 0 || bytes > (int64_t{1} << 50))
    return ResourceExhausted(fmt::format("{} would need {} bytes of GPU memory; no device holds that", what,
                                         bytes < 0 ? std::string("more than 2^63") : std::to_string(bytes)));
  int64_t size = std::max<int64_t>(256, (bytes + 255) / 256 * 256);
  std::lock_guard<std::mutex> lock(mutex_);
  // A cached block at most 2x the request: reuse without wasting much.
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    CUdeviceptr p = it->second;
    free_.erase(it);
    return p;
  }
  RETURN_IF_ERROR(device_->MakeCurrent());
  CUdeviceptr p = 0;
  CUresult r = device_->api().cuMemAlloc(&p, static_cast<size_t>(size));
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !free_.empty()) {
    // Give the cache back to the driver and try once more.
    for (auto& [bytes_cached, block] : free_) {
      device_->api().cuMemFree(block);
      sizes_.erase(block);
    }
    free_.clear();
    r = device_->api().cuMemAlloc(&p, static_cast<size_t>(size));
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    size_t free_bytes = 0, total = 0;
    device_->api().cuMemGetInfo(&free_bytes, &total);
    return ResourceExhausted(fmt::format("out of GPU memory allocating {:.1f} MiB for {} ({:.1f} of {:.1f} MiB free on {})",
                                         size / 1048576.0, what, free_bytes / 1048576.0, total / 1048576.0, device_->name()));
  }
  RETURN_IF_ERROR(device_->Check(r, "cuMemAlloc for " + what));
  sizes_[p] = size;
  return p;
}

void DeviceAllocator::Free(CUdeviceptr pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = sizes_.find(pointer);
  if (it == sizes_.end()) return;
  free_.emplace(it->second, pointer);
}

int64_t DeviceAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& [size, block] : free_) total += size;
  return total;
}

}  // namespace tilefuse

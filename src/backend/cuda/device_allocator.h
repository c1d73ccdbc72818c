// A caching allocator over cuMemAlloc: freed blocks go to a free list by size class and
// are handed out again, so compiling and dropping graphs (tuning, fuzzing, benchmarks)
// does not hit the driver's allocator each time. Sizes round up to 256 bytes (a multiple
// of every vector access); blocks are 256-byte aligned. Out of memory is a clear
// ResourceExhausted naming the request and what the device has free.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cuda/cuda_driver.h"

namespace tilefuse {

class DeviceAllocator {
 public:
  static DeviceAllocator& Get(CudaDevice* device);  // one per process
  StatusOr<CUdeviceptr> Allocate(int64_t bytes, const std::string& what);
  void Free(CUdeviceptr pointer);
  int64_t cached_bytes() const;

 private:
  explicit DeviceAllocator(CudaDevice* device) : device_(device) {}
  CudaDevice* device_;
  mutable std::mutex mutex_;
  std::multimap<int64_t, CUdeviceptr> free_;  // size → block
  std::map<CUdeviceptr, int64_t> sizes_;      // every live or cached block
};

// A device buffer returned to the allocator when dropped.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceAllocator* allocator, CUdeviceptr pointer) : allocator_(allocator), pointer_(pointer) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : allocator_(o.allocator_), pointer_(o.pointer_) { o.pointer_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(allocator_, o.allocator_);
    std::swap(pointer_, o.pointer_);
    return *this;
  }
  ~DeviceBuffer() {
    if (pointer_) allocator_->Free(pointer_);
  }
  CUdeviceptr get() const { return pointer_; }

 private:
  DeviceAllocator* allocator_ = nullptr;
  CUdeviceptr pointer_ = 0;
};

}  // namespace tilefuse

// Owners of driver handles that must be released on every path, error returns included:
// events and instantiated CUDA graphs. Movable, not copyable; destroyed through the
// process's CudaDevice (which outlives them).
#pragma once

#include <utility>

#include "backend/cuda/cuda_driver.h"

namespace tilefuse {

template <typename Handle, CUresult (*CudaDriverApi::*Destroy)(Handle)>
class CudaHandle {
 public:
  CudaHandle() = default;
  CudaHandle(const CudaDevice* device, Handle handle) : device_(device), handle_(handle) {}
  CudaHandle(CudaHandle&& other) noexcept : device_(other.device_), handle_(std::exchange(other.handle_, nullptr)) {}
  CudaHandle& operator=(CudaHandle&& other) noexcept {
    std::swap(device_, other.device_);
    std::swap(handle_, other.handle_);
    return *this;
  }
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;
  ~CudaHandle() {
    if (handle_) (device_->api().*Destroy)(handle_);
  }
  Handle get() const { return handle_; }

 private:
  const CudaDevice* device_ = nullptr;
  Handle handle_ = nullptr;
};

using CudaEvent = CudaHandle<CUevent, &CudaDriverApi::cuEventDestroy>;
using CudaGraphExec = CudaHandle<CUgraphExec, &CudaDriverApi::cuGraphExecDestroy>;

// A new event (timing enabled).
inline StatusOr<CudaEvent> CreateCudaEvent(const CudaDevice& device) {
  CUevent event = nullptr;
  RETURN_IF_ERROR(device.Check(device.api().cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate"));
  return CudaEvent(&device, event);
}

}  // namespace tilefuse

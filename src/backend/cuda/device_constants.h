// Constants on the device, shared by every executable that holds the same host bytes. The
// graphs a model file imports per binding of its symbolic dims share their weights' host
// tensors (api: ModelFile), so the bindings a decode loop compiles read one copy of the weights
// on the GPU, uploaded once, instead of one copy each (GPT-2 small: 250 MB a binding).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/device_allocator.h"
#include "tilefuse/tensor.h"

namespace tilefuse {

// A constant's device copy; it keeps its host tensor alive, so that while any executable
// holds it no other tensor can take the host address it is known by.
struct SharedDeviceConstant {
  std::shared_ptr<const Tensor> host;
  DeviceBuffer buffer;
};

class DeviceConstants {
 public:
  static DeviceConstants& Get(CudaDevice* device);  // one per device, as its allocator

  // The device copy of `host`'s bytes, uploaded (and the stream synchronized) now unless an
  // executable holds it already. `what` names the constant in an out-of-memory error.
  StatusOr<std::shared_ptr<const SharedDeviceConstant>> Upload(const std::shared_ptr<const Tensor>& host, DeviceAllocator& allocator,
                                                               const std::string& what);
  int64_t live_bytes();  // of the copies some executable holds

 private:
  explicit DeviceConstants(CudaDevice* device) : device_(device) {}
  CudaDevice* device_;
  std::mutex mutex_;
  // By the host bytes' address and size; expired once no executable holds the copy.
  std::map<std::pair<const std::byte*, size_t>, std::weak_ptr<const SharedDeviceConstant>> copies_;
};

}  // namespace tilefuse

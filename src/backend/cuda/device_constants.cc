#include "backend/cuda/device_constants.h"

#include <fmt/format.h>

namespace tilefuse {

DeviceConstants& DeviceConstants::Get(CudaDevice* device) {
  static std::mutex mutex;
  static std::map<CudaDevice*, DeviceConstants*> per_device;
  std::lock_guard<std::mutex> lock(mutex);
  DeviceConstants*& constants = per_device[device];
  if (!constants) constants = new DeviceConstants(device);
  return *constants;
}

StatusOr<std::shared_ptr<const SharedDeviceConstant>> DeviceConstants::Upload(const std::shared_ptr<const Tensor>& host,
                                                                              DeviceAllocator& allocator, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);  // held over the upload: two compiles of one weight upload it once
  for (auto it = copies_.begin(); it != copies_.end();) it = it->second.expired() ? copies_.erase(it) : std::next(it);
  std::weak_ptr<const SharedDeviceConstant>& known = copies_[{host->data(), host->num_bytes()}];
  if (std::shared_ptr<const SharedDeviceConstant> copy = known.lock()) return copy;
  ASSIGN_OR_RETURN(CUdeviceptr p, allocator.Allocate(static_cast<int64_t>(host->num_bytes()), what));
  auto copy = std::make_shared<SharedDeviceConstant>(SharedDeviceConstant{host, DeviceBuffer(&allocator, p)});
  const CudaDriverApi& api = device_->api();
  RETURN_IF_ERROR(device_->Check(api.cuMemcpyHtoDAsync(p, host->data(), host->num_bytes(), device_->stream()), "uploading a constant"));
  RETURN_IF_ERROR(device_->Check(api.cuStreamSynchronize(device_->stream()), "uploading a constant"));
  known = copy;
  return std::shared_ptr<const SharedDeviceConstant>(std::move(copy));
}

int64_t DeviceConstants::live_bytes() {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t bytes = 0;
  for (const auto& [key, copy] : copies_)
    if (!copy.expired()) bytes += static_cast<int64_t>(key.second);
  return bytes;
}

}  // namespace tilefuse

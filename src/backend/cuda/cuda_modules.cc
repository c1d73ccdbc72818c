#include "backend/cuda/cuda_modules.h"

#include <fmt/format.h>
#include <utility>

namespace tilefuse {

StatusOr<CudaModules> CudaModules::Load(const CudaDevice& device, const CudaCubins& cubins) {
  CudaModules loaded;  // owns each module from its load on: an error below unloads them
  loaded.device_ = &device;
  for (size_t u = 0; u < cubins.units.size(); ++u) {
    const CudaCompileUnit& unit = cubins.units[u];
    CUmodule module = nullptr;
    RETURN_IF_ERROR(device.Check(device.api().cuModuleLoadData(&module, cubins.cubins[u].cubin.data()),
                                 "cuModuleLoadData " + unit.entry));
    loaded.modules_.push_back(module);
    CUfunction function = nullptr;
    RETURN_IF_ERROR(device.Check(device.api().cuModuleGetFunction(&function, module, unit.entry.c_str()),
                                 fmt::format("cuModuleGetFunction {} (kernel {})", unit.entry, unit.kernels.front())));
    for (const std::string& kernel : unit.kernels) loaded.functions_[kernel] = function;
  }
  return loaded;
}

CudaModules::CudaModules(CudaModules&& other) noexcept
    : device_(other.device_), modules_(std::exchange(other.modules_, {})), functions_(std::exchange(other.functions_, {})) {}

CudaModules& CudaModules::operator=(CudaModules&& other) noexcept {
  if (this != &other) {
    Unload();
    device_ = other.device_;
    modules_ = std::exchange(other.modules_, {});
    functions_ = std::exchange(other.functions_, {});
  }
  return *this;
}

CudaModules::~CudaModules() { Unload(); }

void CudaModules::Unload() {
  for (CUmodule module : modules_) device_->api().cuModuleUnload(module);
  modules_.clear();
  functions_.clear();
}

StatusOr<CUfunction> CudaModules::Function(const std::string& name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) return NotFound(fmt::format("no loaded cubin holds kernel {}", name));
  return it->second;
}

}  // namespace tilefuse

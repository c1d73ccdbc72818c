// CudaModules: a build's cubins (backend/cuda/cuda_compile_units.h) loaded into the current
// context, one module per unit, and every kernel's function found by the kernel's own
// name across them. Unloads all its modules when it goes; movable, not copyable. Destroy
// it after anything that launches its functions (captured CUDA graphs).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_driver.h"
#include "tilefuse/status.h"

namespace tilefuse {

class CudaModules {
 public:
  CudaModules() = default;
  // Loads every unit of `cubins` and looks up each kernel's entry in its unit's module.
  static StatusOr<CudaModules> Load(const CudaDevice& device, const CudaCubins& cubins);

  CudaModules(CudaModules&& other) noexcept;
  CudaModules& operator=(CudaModules&& other) noexcept;
  CudaModules(const CudaModules&) = delete;
  CudaModules& operator=(const CudaModules&) = delete;
  ~CudaModules();

  // The function of kernel `name`; NotFound when no loaded unit serves it.
  StatusOr<CUfunction> Function(const std::string& name) const;
  size_t num_modules() const { return modules_.size(); }

 private:
  void Unload();
  const CudaDevice* device_ = nullptr;
  std::vector<CUmodule> modules_;
  std::map<std::string, CUfunction> functions_;  // by kernel name
};

}  // namespace tilefuse

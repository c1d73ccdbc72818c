// The loop templates' configuration (CudaKernelConfig) in the tuning cache's JSON form, which
// is also how the tuner hands a configuration to the backend to measure.
#pragma once

#include <nlohmann/json.hpp>

#include "codegen/cuda/cuda_emitter.h"

namespace tilefuse {

nlohmann::json CudaConfigToJson(const CudaKernelConfig& config);
CudaKernelConfig CudaConfigFromJson(const nlohmann::json& json);

}  // namespace tilefuse

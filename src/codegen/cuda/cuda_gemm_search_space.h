// The GEMM template's search space and its configurations' JSON form (the tuning cache's).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_gemm_config.h"

namespace tilefuse {

// The GEMM template's configurations for `gemm` on `sm_count` SMs: the rule's
// (ResolveGemmConfig) first, then cooperative and ping-pong consumers × tile widths 128
// and 256 × pipeline depths 3 to 5, each resolved; configurations whose shared memory or
// accumulators do not fit, whose tile is wider than the product, or that resolve to one
// already listed are left out (with why). `promote` is the precision asked of an FP8 product
// (CudaGemmConfig::promote), which the tuner keeps: it trades digits, not just time.
struct GemmSearchSpace {
  std::vector<CudaGemmConfig> candidates;
  std::vector<std::string> pruned;
};
GemmSearchSpace GemmCandidates(const GemmTemplateKernel& gemm, int sm_count, std::optional<bool> promote = std::nullopt);
nlohmann::json GemmConfigToJson(const CudaGemmConfig& config);
CudaGemmConfig GemmConfigFromJson(const nlohmann::json& json);

}  // namespace tilefuse

// The search space of the CUDA templates (codegen/cuda_emitter.h): which launch and
// tiling parameters a kernel may take, with the constraints applied before anything is
// compiled (threads a multiple of 32 up to 1024, a vector width dividing the row, rows
// held in registers only within a register budget, no threads idle for lack of work).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/cuda_emitter.h"
#include "codegen/kernel.h"

namespace tilefuse {

struct CudaSearchSpace {
  std::vector<CudaKernelConfig> candidates;  // the default (resolved) configuration first
  std::vector<std::string> pruned;           // "threads_per_row 1024: more threads than chunks", ...
};

CudaSearchSpace CudaCandidates(const Kernel& kernel);

nlohmann::json CudaConfigToJson(const CudaKernelConfig& config);
CudaKernelConfig CudaConfigFromJson(const nlohmann::json& json);
bool SameCudaConfig(const CudaKernelConfig& a, const CudaKernelConfig& b);

}  // namespace tilefuse

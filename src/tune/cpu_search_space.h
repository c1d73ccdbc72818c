// The search space of the generated C++ kernels (codegen/cpp/cpp_kernel_config.h): OpenMP
// team size, the outer loop's schedule and chunk, for row kernels with a row buffer
// (codegen/row_cache_plan.h) whether to use it or recompute, and for row kernels the
// emitter can pipeline whether to (codegen/cpp/cpp_emitter.h). Constraints apply before
// anything is compiled: no team larger than the outer loop or not smaller than the
// machine (0 already means every core), no chunk larger than a thread's share of the
// outer loop or not dividing it, no row-buffer or pipelining choice where the kernel
// has none.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/cpp/cpp_kernel_config.h"
#include "codegen/kernel.h"

namespace tilefuse {

struct CppSearchSpace {
  std::vector<CppKernelConfig> candidates;  // the default configuration first
  std::vector<std::string> pruned;          // "threads 4: not fewer than the 2 cores", ...
};

// `cores`: the team size 0 means (std::thread::hardware_concurrency on the machine).
CppSearchSpace CppCandidates(const Kernel& kernel, int cores);

// The cost model's order when the space is larger than the tuner measures: the default's
// neighbours first (all cores, static schedule, the row buffer as planned), large
// chunks before small ones.
double CppConfigRank(const CppKernelConfig& config);

nlohmann::json CppConfigToJson(const CppKernelConfig& config);
// Missing or unknown fields read as the default's.
CppKernelConfig CppConfigFromJson(const nlohmann::json& json);

}  // namespace tilefuse

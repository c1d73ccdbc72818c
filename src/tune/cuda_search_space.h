// The search space of the CUDA templates (codegen/cuda/cuda_emitter.h): which launch and
// tiling parameters a kernel may take, with the constraints applied before anything is
// compiled (threads a multiple of 32 up to 1024, a vector width dividing the row, rows
// held in registers only within a register budget, no threads idle for lack of work).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/cuda_config_json.h"
#include "codegen/cuda/cuda_gemm_search_space.h"
#include "codegen/kernel.h"

namespace tilefuse {

struct CudaSearchSpace {
  std::vector<CudaKernelConfig> candidates;  // the default (resolved) configuration first
  std::vector<std::string> pruned;           // "threads_per_row 1024: more threads than chunks", ...
};

// `clusters`: the GPU launches thread-block clusters (CudaKernelConfig::clusters), where the
// rule's configuration, the first candidate, may take one.
CudaSearchSpace CudaCandidates(const Kernel& kernel, bool clusters = false);

// The cost model's order when the space is larger than the tuner measures (`base`: the
// rule's configuration, measured first): rows held in registers first, then the block sizes
// nearest the default's; a shape that holds the row-invariant vectors otherwise than the rule
// (or cannot hold them, where the rule does) half a step later.
double CudaConfigRank(const CudaKernelConfig& base, const CudaKernelConfig& config);

bool SameCudaConfig(const CudaKernelConfig& a, const CudaKernelConfig& b);

}  // namespace tilefuse

// The CLI's choices of how gemm and attention groups and f32 matmuls run on the GPU
// (--gemm, --attention, --precision), shared by `run` and `compile` so both take the
// same words with the same help; and --device, the GPU that `run`, `bench` and `demo` use.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "backend/cuda/cuda_executable.h"

namespace tilefuse::cli {

struct CudaPathChoices {
  std::string gemm = "auto";           // template, library or auto (GemmPath)
  std::string attention = "template";  // template, overlap, serial or split (AttentionPath)
  std::string precision = "highest";   // f32 matmuls exact (highest) or TF32 (high)
};

void AddCudaPathOptions(CLI::App& command, CudaPathChoices& choices);

// --device N: the GPU's ordinal (CUDA's numbering). Checked where it is used
// (CheckDeviceForBackend, api/backend_setup.h): an ordinal the machine lacks exits 2.
void AddDeviceOption(CLI::App& command, int& device);

// Sets options' gemm, attention and precision from the (validated) words.
void ApplyCudaPathChoices(const CudaPathChoices& choices, CudaCompileOptions& options);

}  // namespace tilefuse::cli

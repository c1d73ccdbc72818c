// The CLI's choices of how gemm and attention groups and f32 matmuls run on the GPU
// (--gemm, --attention, --precision, and the templates' --gemm-form, --gemm-cluster,
// --depthwise), shared by `run` and `compile` so both take the
// same words with the same help; and --device, the GPU that `run`, `bench` and `demo` use.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {

struct CudaPathChoices {
  std::string gemm = "auto";           // template, library or auto (GemmPath)
  std::string attention = "template";  // template, overlap, serial or split (AttentionPath)
  std::string precision = "highest";   // f32 matmuls exact (highest) or TF32 (high)
  // The templates' own settings, for comparison and diagnosis (TemplateOverrides).
  std::string gemm_form = "rule";  // rule, tail, overlap, pingpong, streamk or skinny
  int gemm_cluster = 0;            // 0: the rule; 1 or 2 CTAs sharing B
  std::string depthwise = "on";    // on (the rule's thread shape), off, or VxP
  bool stand_ins = false;          // template kernels that compile slowly run their quick stand-ins
};

void AddCudaPathOptions(CLI::App& command, CudaPathChoices& choices);

// --device N: the GPU's ordinal (CUDA's numbering). Checked where it is used
// (CheckDeviceForBackend, api/backend_setup.h): an ordinal the machine lacks exits 2.
void AddDeviceOption(CLI::App& command, int& device);

// Sets the facade's words (ModelOptions: gemm, attention, precision and the templates'
// settings) from the flags; the facade checks them when it compiles.
void ApplyCudaPathChoices(const CudaPathChoices& choices, ModelOptions& options);

}  // namespace tilefuse::cli

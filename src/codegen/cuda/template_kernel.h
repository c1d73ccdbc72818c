// TemplateKernel: a compute-bound template's problem (a GEMM, an attention, a depthwise
// convolution) as the CUDA backend, its measurement and the tuner see it, whichever template
// it is. A template is its skeleton in codegen/cuda/device/*.cuh plus one implementation of
// this interface: dispatch, measurement (CudaExecutable::MeasureVariants) and tuning
// (tune/gpu_tuner.cc) are written once against it.
//
// Configurations travel as JSON objects, the tuning cache's form: {} is the configuration the
// template's rule picks (with the compile options' overrides), and each template reads the
// fields it knows.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

class TemplateKernel {
 public:
  virtual ~TemplateKernel() = default;
  // The template's name in reports and tuning records: "gemm template", ...
  virtual std::string Kind() const = 0;
  // The problem's identity, not its name: problems with equal fingerprints share the best
  // configuration (the tuning cache's key).
  virtual std::string Fingerprint() const = 0;
  // The configurations worth measuring on `sm_count` SMs, the rule's first. A template whose
  // alternatives have not been measured lists the rule's alone (nothing to tune).
  virtual std::vector<nlohmann::json> SearchSpace(int sm_count) const = 0;
  // The kernel for `config`, named `name`; InvalidArgument for a configuration the skeleton
  // cannot run.
  virtual StatusOr<CudaKernelSource> Emit(const std::string& name, const nlohmann::json& config, int sm_count) const = 0;
  // A configuration of the same problem whose kernel NVRTC compiles in a fraction of
  // `config`'s time, to run while `config`'s compiles in the background
  // (CudaCompileOptions::background_compile); nothing where `config`'s compiles fast already.
  // Forms whose main-loop step is printed many times, or long, take seconds: the GEMM
  // template's overlapped epilogue (a copy beside each epilogue chunk) and the attention
  // template's ping-pong and overlap loops (a copy with and without a mask).
  virtual std::optional<nlohmann::json> StandIn(const nlohmann::json& config) const {
    (void)config;
    return std::nullopt;
  }
  // The GEMM template's problem (what products grouped over N are made of); null for the
  // other templates, the skinny GEMM's included.
  virtual const GemmTemplateKernel* GemmProblem() const { return nullptr; }
  // The skinny GEMM template's problem (codegen/cuda/cuda_skinny_gemm_emitter.h), or null.
  virtual const GemmTemplateKernel* SkinnyProblem() const { return nullptr; }
};

}  // namespace tilefuse

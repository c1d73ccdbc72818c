// The CPU backend (runtime/backend.h): the driver's stages for the host.
//
//   Plan   PlanFusionForCpu with the host's cost model (attention the flash kernel refuses split)
//   Lower  per group: one loop kernel (LowerGroup → EmitCppFunction); gemm: prologue loop
//          kernels, the product through BLAS, the epilogue as a loop kernel; attention: one
//          flash-attention kernel; anything no template takes: the reference kernels (said
//          so in KernelInfo). The arena is planned here, so a graph too large for the host
//          is refused before anything is compiled.
//   Build  every function of every graph in one translation unit: one host-compiler run
//   Load   the functions linked, the generators reference steps read evaluated once
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_executable.h"
#include "backend/cpu/host_jit.h"
#include "backend/cpu/onednn_conv.h"
#include "fusion/target_capabilities.h"
#include "runtime/backend.h"

namespace tilefuse {

// What the CPU's gemm kernels fuse (fusion/target_capabilities.h): BLAS writes the
// product to memory and the epilogue is a loop kernel of its own, always.
class CpuCapabilities : public TargetCapabilities {
 public:
  FusionDecision FusesGemmEpilogue(const Graph&, const std::vector<int>&, int) const override {
    return FusionDecision::Forbid("BLAS writes the product; the epilogue is a pass of its own");
  }
  // f32 convolutions run on oneDNN with the epilogue as post-ops (backend/cpu/onednn_conv.h);
  // graphs for the CPU keep them (PassOptions::library_conv, CpuRunsLibraryConv).
  bool AnchorsConvolution() const override { return OnednnConvAvailable(); }
};

// Whether graphs for the CPU should keep their f32 Conv nodes (PassOptions::library_conv):
// this build runs them through oneDNN.
inline bool CpuRunsLibraryConv() { return OnednnConvAvailable(); }

// PlanFusion for the CPU: attention groups its flash kernel does not take (LowerAttention
// refuses them) are planned again as their parts (gemm, softmax, gemm: generated kernels, never
// the reference kernels), the reason in the notes and in the plan's missed_attention.
StatusOr<PlannedGraph> PlanFusionForCpu(const Graph& graph, PlannerOptions options);

class CpuBackend : public Backend {
 public:
  static StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuCompileOptions& options);

  std::string_view name() const override { return "cpu"; }
  std::string_view source_file_name() const override { return "kernels.cpp"; }
  const TargetCapabilities& capabilities() const override { return capabilities_; }
  StatusOr<PlannedGraph> Plan(const Graph& graph, PlannerOptions options) override;
  StatusOr<std::unique_ptr<LoweredGraph>> Lower(const Graph& graph, PlannedGraph planned, const std::string& prefix) override;
  StatusOr<std::unique_ptr<ObjectCode>> Build(const std::vector<const LoweredGraph*>& graphs) override;
  StatusOr<std::unique_ptr<Executable>> Load(std::unique_ptr<LoweredGraph> graph, const ObjectCode& code) override;

 private:
  CpuBackend(CpuCompileOptions options, HostJit jit) : options_(std::move(options)), jit_(std::move(jit)) {}
  CpuCompileOptions options_;
  HostJit jit_;
  CpuCapabilities capabilities_;
};

}  // namespace tilefuse

// The CUDA backend (runtime/backend.h): the driver's stages for an NVIDIA GPU.
//
//   Plan   PlanFusionForCuda with the cost model of the GPU it runs on (H100 or H200);
//          attention candidates the template refuses are planned as their parts
//   Lower  BuildCudaProgram: per group a generated kernel, a template (GEMM, attention),
//          cuBLASLt with or without its own epilogue, or host reference steps (said so)
//   Build  one NVRTC run per distinct kernel, on all cores (backend/cuda/cuda_compile_units;
//          each cubin cached on disk on its own)
//   Load   a module per cubin loaded, scratch and cuBLASLt workspace, intermediates in one arena by
//          liveness, constants uploaded, the steps captured as one CUDA graph
//
// A backend made for an architecture only (ForArch) runs every stage but Load: a machine
// without a GPU compiles and reports kernels for sm_90a that way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "runtime/backend.h"

namespace tilefuse {

class CudaDevice;

class CudaBackend : public Backend {
 public:
  // On the GPU `options.device_ordinal`; NotFound when there is no driver, GPU or NVRTC.
  static StatusOr<std::unique_ptr<CudaBackend>> ForDevice(const CudaCompileOptions& options);
  // For `arch` ("sm_90a") with no GPU: Load refuses.
  static StatusOr<std::unique_ptr<CudaBackend>> ForArch(const std::string& arch, const CudaCompileOptions& options);

  std::string_view name() const override { return "cuda"; }
  std::string_view source_file_name() const override { return "kernels.cu"; }
  const TargetCapabilities& capabilities() const override { return capabilities_; }
  StatusOr<PlannedGraph> Plan(const Graph& graph, PlannerOptions options) override;
  StatusOr<std::unique_ptr<LoweredGraph>> Lower(const Graph& graph, PlannedGraph planned, const std::string& prefix) override;
  StatusOr<std::unique_ptr<ObjectCode>> Build(const std::vector<const LoweredGraph*>& graphs) override;
  StatusOr<std::unique_ptr<Executable>> Load(std::unique_ptr<LoweredGraph> graph, const ObjectCode& code) override;

  const std::string& nvrtc_version() const { return nvrtc_version_; }
  // What the stages made, for reports (`tilefuse compile --backend cuda`).
  static const CudaProgram& ProgramOf(const LoweredGraph& graph);
  static const std::vector<std::string>& PlanNotesOf(const LoweredGraph& graph);
  static const CudaCubins& CubinsOf(const ObjectCode& code);
  // The units compiling in the background (CudaCompileOptions::background_compile); null: none.
  static std::shared_ptr<const BackgroundCubins> BackgroundOf(const ObjectCode& code);

 private:
  CudaBackend(CudaCompileOptions options, CudaDevice* device, CudaTarget target, NvrtcCompiler nvrtc);
  CudaCompileOptions options_;
  CudaDevice* device_;  // nullptr: ForArch
  CudaTarget target_;
  CudaCapabilities capabilities_;
  NvrtcCompiler nvrtc_;
  std::string nvrtc_version_;
};

}  // namespace tilefuse

// CudaProgram: how each fusion group of a planned graph runs on the GPU, and the CUDA
// source of every generated kernel (one translation unit per graph: one NVRTC run).
//
//   pointwise / row_reduction / reduction  → one generated kernel
//   gemm                                   → prologue kernels (if any) + cuBLASLt product
//                                            + epilogue kernel (if any)
//   anything else                          → its member ops on the host reference kernels,
//                                            with copies (reported, never silent)
//
// Attention groups are planned away for this backend until the attention template exists
// (CudaPlannerOptions disables them, so the planner emits gemm + row_reduction + gemm).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cuda_emitter.h"
#include "fusion/fusion_plan.h"
#include "fusion/planner.h"
#include "tilefuse/graph.h"

namespace tilefuse {

// A generated kernel and the graph values of its parameters.
struct CudaLaunchable {
  Kernel kernel;                  // the IR it was emitted from (the tuner re-emits it)
  CudaKernelSource source;
  std::vector<int> buffer_nodes;  // Kernel::buffers order
  std::vector<int> outputs;       // the nodes it writes
};

struct CudaGroupProgram {
  enum class Mode { kGenerated, kGemm, kHost };
  int group = -1;
  GroupKind kind = GroupKind::kPointwise;
  Mode mode = Mode::kHost;
  std::optional<CudaLaunchable> kernel;    // generated; gemm: the epilogue
  std::vector<CudaLaunchable> prologue;    // gemm: materialise the product's operands (one per shape)
  int matmul = -1;                         // gemm
  std::vector<int> host_nodes;             // host: the members, in order
  std::string why_host;
};

struct CudaProgram {
  std::vector<CudaGroupProgram> groups;  // plan order
  std::string source;                    // every kernel, one translation unit
};

// The planner options the CUDA backend needs on top of the user's.
PlannerOptions CudaPlannerOptions(PlannerOptions options);

// Lowers and emits every group of `plan`. `prefix` keeps kernel names of several graphs
// in one translation unit apart.
// `configs` (kernel name → configuration, from the tuner) overrides the templates'
// defaults for the kernels it names.
StatusOr<CudaProgram> BuildCudaProgram(const Graph& graph, const FusionPlan& plan, const std::vector<bool>& inlined,
                                       const std::string& prefix = "",
                                       const std::map<std::string, CudaKernelConfig>& configs = {});

}  // namespace tilefuse

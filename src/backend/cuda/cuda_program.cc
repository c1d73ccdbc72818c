#include "backend/cuda/cuda_program.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/lower.h"
#include "runtime/gemm_split.h"

namespace tilefuse {

PlannerOptions CudaPlannerOptions(PlannerOptions options) {
  options.disabled_kinds.insert(GroupKind::kAttention);
  return options;
}

namespace {

StatusOr<CudaLaunchable> LowerAndEmit(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                      const std::string& name) {
  ASSIGN_OR_RETURN(Kernel kernel, LowerGroup(g, group, inlined));
  kernel.name = name;
  CudaLaunchable launchable;
  ASSIGN_OR_RETURN(launchable.source, EmitCudaKernel(kernel));
  for (const KernelBuffer& b : kernel.buffers) launchable.buffer_nodes.push_back(b.node);
  launchable.outputs = group.outputs;
  return launchable;
}

// The prologue of a gemm group as a pointwise group whose outputs are the product's
// operands computed inside the group.
FusionGroup PrologueGroup(const Graph& g, const FusionGroup& group, const GemmSplit& split) {
  FusionGroup prologue;
  prologue.id = group.id;
  prologue.kind = GroupKind::kPointwise;
  prologue.nodes = split.prologue;
  for (int input : g.node(split.matmul).inputs)
    if (std::find(split.prologue.begin(), split.prologue.end(), input) != split.prologue.end()) prologue.outputs.push_back(input);
  return prologue;
}

CudaGroupProgram ProgramForGroup(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined, const std::string& name) {
  CudaGroupProgram p;
  p.group = group.id;
  p.kind = group.kind;
  auto host = [&](std::string why) {
    p.mode = CudaGroupProgram::Mode::kHost;
    p.kernel.reset();
    p.prologue.reset();
    p.matmul = -1;
    p.host_nodes = group.nodes;
    p.why_host = std::move(why);
    return p;
  };
  switch (group.kind) {
    case GroupKind::kPointwise: case GroupKind::kRowReduction: case GroupKind::kReduction: {
      StatusOr<CudaLaunchable> k = LowerAndEmit(g, group, inlined, name);
      if (!k.ok()) return host(k.status().message());
      p.mode = CudaGroupProgram::Mode::kGenerated;
      p.kernel = std::move(*k);
      return p;
    }
    case GroupKind::kGemm: {
      GemmSplit split = SplitGemmGroup(g, group);
      p.mode = CudaGroupProgram::Mode::kGemm;
      p.matmul = split.matmul;
      if (!split.prologue.empty()) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, PrologueGroup(g, group, split), inlined, name + "_prologue");
        if (!k.ok()) return host("prologue: " + k.status().message());
        p.prologue = std::move(*k);
      }
      if (!split.epilogue.nodes.empty()) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, split.epilogue, inlined, name + "_epilogue");
        if (!k.ok()) return host("epilogue: " + k.status().message());
        p.kernel = std::move(*k);
      }
      return p;
    }
    default: return host(fmt::format("no CUDA template for {} groups yet", GroupKindName(group.kind)));
  }
}

}  // namespace

StatusOr<CudaProgram> BuildCudaProgram(const Graph& graph, const FusionPlan& plan, const std::vector<bool>& inlined,
                                       const std::string& prefix) {
  CudaProgram program;
  std::vector<CudaKernelSource> sources;
  for (const FusionGroup& group : plan.groups) {
    std::string name = fmt::format("{}tf_group{}_{}", prefix, group.id, GroupKindName(group.kind));
    program.groups.push_back(ProgramForGroup(graph, group, inlined, name));
    const CudaGroupProgram& p = program.groups.back();
    if (p.prologue) sources.push_back(p.prologue->source);
    if (p.kernel) sources.push_back(p.kernel->source);
  }
  program.source = CudaTranslationUnit(sources);
  return program;
}

}  // namespace tilefuse

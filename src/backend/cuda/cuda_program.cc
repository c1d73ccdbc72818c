#include "backend/cuda/cuda_program.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/attention_template.h"
#include "codegen/cuda_attention_emitter.h"
#include "codegen/lower.h"
#include "codegen/cuda_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "fusion/group_classifier.h"

namespace tilefuse {

namespace {

// A template's kernel as a launchable: its parameters' graph values, the group's outputs,
// and the scalar program printed into it.
CudaLaunchable TemplateLaunchable(CudaKernelSource source, const FusionGroup& group, Kernel program) {
  CudaLaunchable launchable;
  launchable.source = std::move(source);
  for (const LaunchArg& arg : launchable.source.launch.args) launchable.buffer_nodes.push_back(arg.node);
  launchable.outputs = group.outputs;
  launchable.kernel = std::move(program);
  launchable.is_template = true;
  return launchable;
}

// The attention template for an attention group, or why it does not apply.
StatusOr<CudaLaunchable> AttentionTemplate(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                           const std::string& name, const CudaTarget& target) {
  if (target.attention == AttentionPath::kSplit) return Unimplemented("split attention asked for (--attention split)");
  if (target.arch != "sm_90a") return Unimplemented(fmt::format("the attention template needs sm_90a (Hopper), not {}", target.arch));
  ASSIGN_OR_RETURN(AttentionTemplateKernel attention, LowerAttentionTemplate(g, group, inlined));
  attention.name = name;
  CudaAttentionConfig config;
  if (target.overrides.attention_block_n) config.block_n = target.overrides.attention_block_n;
  config.poly_exp_every = target.overrides.attention_poly_exp_every;
  if (target.overrides.attention_lazy_margin) config.lazy_margin = *target.overrides.attention_lazy_margin;
  config.loop = target.attention == AttentionPath::kOverlap  ? AttentionLoop::kOverlap
                : target.attention == AttentionPath::kSerial ? AttentionLoop::kSerial
                                                             : AttentionLoop::kPingPong;
  config.consumers = target.overrides.attention_consumers;
  config = ResolveAttentionConfig(attention, config);
  const AttentionLogits logits{attention.logits, attention.logit, attention.buffers, attention.score_batch_index, attention.nq, attention.nk};
  config.key_blocks = UnmaskedKeyBlocks(g, logits, config.BlockM(), config.block_n);
  config.interior = InteriorKeyBlocks(g, logits, config.BlockM(), config.block_n);
  ASSIGN_OR_RETURN(CudaKernelSource source, EmitCudaAttention(attention, config));
  return TemplateLaunchable(std::move(source), group, std::move(attention.logits));
}

}  // namespace

StatusOr<CudaPlan> PlanFusionForCuda(const Graph& graph, PlannerOptions options, const CudaTarget& target) {
  CudaPlan out;
  ASSIGN_OR_RETURN(out.plan, PlanFusion(graph, options));
  const std::vector<bool> inlined = FindInlinedGenerators(graph);
  for (const FusionGroup& group : out.plan.groups) {
    if (group.kind != GroupKind::kAttention) continue;
    StatusOr<CudaLaunchable> t = AttentionTemplate(graph, group, inlined, "attention", target);
    if (t.ok()) continue;
    options.no_attention_at.insert(group.nodes.front());
    out.split_attention.push_back(fmt::format("attention at %{} split into its parts: {}", group.nodes.front(), t.status().message()));
  }
  if (!out.split_attention.empty()) {
    ASSIGN_OR_RETURN(out.plan, PlanFusion(graph, options));
  }
  return out;
}

namespace {

using ConfigMap = std::map<std::string, CudaKernelConfig>;

StatusOr<CudaLaunchable> LowerAndEmit(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                      const std::string& name, const ConfigMap& configs, const LoweringFault& fault) {
  ASSIGN_OR_RETURN(Kernel kernel, LowerGroup(g, group, inlined, fault));
  kernel.name = name;
  CudaLaunchable launchable;
  auto tuned = configs.find(name);
  ASSIGN_OR_RETURN(launchable.source, EmitCudaKernel(kernel, tuned == configs.end() ? CudaKernelConfig{} : tuned->second));
  for (const KernelBuffer& b : kernel.buffers) launchable.buffer_nodes.push_back(b.node);
  launchable.kernel = std::move(kernel);
  launchable.outputs = group.outputs;
  return launchable;
}

// The GEMM template for a gemm group, or why it does not apply.
StatusOr<CudaLaunchable> GemmTemplate(const Graph& g, const FusionGroup& group, const GemmSplit& split, const std::vector<bool>& inlined,
                                      const std::string& name, const CudaTarget& target) {
  if (target.gemm == GemmPath::kLibrary) return Unimplemented("cuBLASLt asked for (--gemm library)");
  if (target.arch != "sm_90a") return Unimplemented(fmt::format("the GEMM template needs sm_90a (Hopper), not {}", target.arch));
  ASSIGN_OR_RETURN(GemmTemplateKernel gemm, LowerGemmTemplate(g, group, split, inlined));
  gemm.name = name;
  // Without split-K, a product with too few output tiles leaves most SMs idle: 16 x 4096 x
  // 4096 bf16 took 36 us in the template and 18 us in cuBLAS (H100, 2026-11-23).
  const int64_t tiles = (gemm.rows + 127) / 128 * ((gemm.n + 63) / 64) * gemm.batch;
  if (target.gemm == GemmPath::kAuto && tiles < target.sm_count / 2)
    return Unimplemented(fmt::format("{} output tiles for {} SMs: cuBLASLt's split-K is faster until the template has its own", tiles,
                                     target.sm_count));
  CudaGemmConfig config;
  config.sm_count = target.sm_count;
  config.pingpong = target.overrides.gemm_pingpong;
  ASSIGN_OR_RETURN(CudaKernelSource source, EmitCudaGemm(gemm, config));
  return TemplateLaunchable(std::move(source), group, std::move(gemm.epilogue));
}

CudaGroupProgram ProgramForGroup(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined, const std::string& name,
                                 const ConfigMap& configs, const CudaTarget& target) {
  CudaGroupProgram p;
  p.group = group.id;
  p.kind = group.kind;
  auto host = [&](std::string why) {
    p.mode = CudaGroupProgram::Mode::kHost;
    p.kernel.reset();
    p.prologue.clear();
    p.matmul = -1;
    p.host_nodes = group.nodes;
    p.why_host = std::move(why);
    return p;
  };
  switch (group.kind) {
    case GroupKind::kPointwise: case GroupKind::kRowReduction: case GroupKind::kReduction: {
      StatusOr<CudaLaunchable> k = LowerAndEmit(g, group, inlined, name, configs, target.fault);
      if (!k.ok()) return host(k.status().message());
      p.mode = CudaGroupProgram::Mode::kGenerated;
      p.kernel = std::move(*k);
      return p;
    }
    case GroupKind::kGemm: {
      GemmSplit split = SplitGemmGroup(g, group);
      p.mode = CudaGroupProgram::Mode::kGemm;
      p.matmul = split.matmul;
      for (const FusionGroup& prologue : PrologueGroups(g, group, split)) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, prologue, inlined, fmt::format("{}_prologue{}", name, p.prologue.size()), configs, target.fault);
        if (!k.ok()) return host("prologue: " + k.status().message());
        p.prologue.push_back(std::move(*k));
      }
      StatusOr<CudaLaunchable> fused = GemmTemplate(g, group, split, inlined, name, target);
      if (fused.ok()) {
        p.mode = CudaGroupProgram::Mode::kGemmTemplate;
        p.kernel = std::move(*fused);
        return p;
      }
      p.why_library = fused.status().message();
      if (!split.epilogue.nodes.empty()) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, split.epilogue, inlined, name + "_epilogue", configs, target.fault);
        if (!k.ok()) return host("epilogue: " + k.status().message());
        p.kernel = std::move(*k);
      }
      return p;
    }
    case GroupKind::kAttention: {
      StatusOr<CudaLaunchable> fused = AttentionTemplate(g, group, inlined, name, target);
      if (!fused.ok()) return host(fused.status().message());
      p.mode = CudaGroupProgram::Mode::kAttentionTemplate;
      p.kernel = std::move(*fused);
      return p;
    }
    default: return host(fmt::format("no CUDA template for {} groups yet", GroupKindName(group.kind)));
  }
}

}  // namespace

StatusOr<CudaProgram> BuildCudaProgram(const Graph& graph, const FusionPlan& plan, const std::vector<bool>& inlined,
                                       const std::string& prefix, const ConfigMap& configs, const CudaTarget& target) {
  CudaProgram program;
  std::vector<CudaKernelSource> sources;
  for (const FusionGroup& group : plan.groups) {
    std::string name = fmt::format("{}tf_group{}_{}", prefix, group.id, GroupKindName(group.kind));
    program.groups.push_back(ProgramForGroup(graph, group, inlined, name, configs, target));
    const CudaGroupProgram& p = program.groups.back();
    for (const CudaLaunchable& k : p.prologue) sources.push_back(k.source);
    if (p.kernel) sources.push_back(p.kernel->source);
  }
  program.source = CudaTranslationUnit(sources);
  return program;
}

}  // namespace tilefuse

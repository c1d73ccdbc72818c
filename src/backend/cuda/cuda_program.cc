#include "backend/cuda/cuda_program.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <functional>

#include "backend/cuda/cuda_amax_fold.h"
#include "backend/cuda/cuda_attention_backward_program.h"
#include "backend/cuda/cuda_cache_update_fold.h"
#include "backend/cuda/cuda_projection_fold.h"
#include "codegen/kernel_fingerprint.h"
#include "codegen/attention_template.h"
#include "codegen/cuda/cuda_attention_emitter.h"
#include "codegen/cuda/cuda_depthwise_emitter.h"
#include "codegen/depthwise_template.h"
#include "codegen/lower.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_launch_together.h"
#include "codegen/cuda/cuda_skinny_chain_emitter.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/cuda/cuda_template_kernels.h"
#include "support/env_switch.h"
#include "codegen/gemm_library_epilogue.h"
#include "codegen/gemm_gates.h"
#include "codegen/gemm_n_groups.h"
#include "codegen/gemm_row_norms.h"
#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "fusion/group_classifier.h"
#include "support/check.h"

namespace tilefuse {

namespace {

// A template's kernel source as a launchable: its parameters' graph values, the group's
// outputs, and the scalar program printed into it.
CudaLaunchable TemplateSourceLaunchable(CudaKernelSource source, const FusionGroup& group, Kernel program,
                                        std::shared_ptr<const TemplateKernel> templ) {
  CudaLaunchable launchable;
  launchable.source = std::move(source);
  launchable.buffer_nodes = GraphValuesOf(launchable.source.launch);
  launchable.outputs = group.outputs;
  launchable.kernel = std::move(program);
  launchable.is_template = true;
  launchable.template_kernel = std::move(templ);
  return launchable;
}

// A template's kernel as a launchable: emitted through its TemplateKernel with the tuner's
// configuration for the problem where there is one (else the rule's), with its stand-in
// where the target asks for them and the template has one (TemplateKernel::StandIn).
StatusOr<CudaLaunchable> TemplateLaunchable(std::shared_ptr<const TemplateKernel> templ, const std::string& name, const FusionGroup& group,
                                            Kernel program, const CudaTarget& target) {
  // The fingerprint is asked only where the tuner left configurations: a rule-only template's
  // is a second emission of its kernel.
  nlohmann::json config = nlohmann::json::object();
  if (!target.template_configs.empty())
    if (auto tuned = target.template_configs.find(templ->Fingerprint()); tuned != target.template_configs.end()) config = tuned->second;
  ASSIGN_OR_RETURN(CudaKernelSource source, templ->Emit(name, config, target.sm_count));
  const std::optional<nlohmann::json> quick = target.stand_ins || target.stand_ins_only ? templ->StandIn(config) : std::nullopt;
  if (!quick) return TemplateSourceLaunchable(std::move(source), group, std::move(program), templ);
  ASSIGN_OR_RETURN(CudaKernelSource stand_in, templ->Emit(name, *quick, target.sm_count));
  CudaLaunchable quick_launchable = TemplateSourceLaunchable(std::move(stand_in), group, program, templ);
  if (target.stand_ins_only) return quick_launchable;
  CudaLaunchable launchable = TemplateSourceLaunchable(std::move(source), group, std::move(program), templ);
  launchable.stand_in = std::make_shared<const CudaLaunchable>(std::move(quick_launchable));
  return launchable;
}

// The attention template for an attention group, or why it does not apply.
// `adjust`, where given, changes the lowered attention before it is emitted (a fold into it).
StatusOr<CudaLaunchable> AttentionTemplate(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                           const std::string& name, const CudaTarget& target,
                                           const std::function<void(AttentionTemplateKernel&)>& adjust = {}) {
  if (target.attention == AttentionPath::kSplit) return Unimplemented("split attention asked for (--attention split)");
  if (target.arch != "sm_90a") return Unimplemented(fmt::format("the attention template needs sm_90a (Hopper), not {}", target.arch));
  ASSIGN_OR_RETURN(AttentionTemplateKernel attention, LowerAttentionTemplate(g, group, inlined, target.symbolic));
  attention.name = name;
  if (adjust) adjust(attention);
  CudaAttentionConfig config;
  if (target.overrides.attention_block_n) config.block_n = target.overrides.attention_block_n;
  config.poly_exp_every = target.overrides.attention_poly_exp_every;
  if (target.overrides.attention_lazy_margin) config.lazy_margin = *target.overrides.attention_lazy_margin;
  config.loop = target.attention == AttentionPath::kOverlap  ? AttentionLoop::kOverlap
                : target.attention == AttentionPath::kSerial ? AttentionLoop::kSerial
                                                             : AttentionLoop::kPingPong;
  config.consumers = target.overrides.attention_consumers;
  config.tiles = target.overrides.attention_tiles;
  config.q_slots = target.overrides.attention_q_slots;
  config.sm_count = target.sm_count;
  config.decode_prefetch = target.overrides.decode_prefetch;
  config = ResolveAttentionConfigForMask(g, attention, config);
  Kernel logits = attention.logits;
  return TemplateLaunchable(MakeAttentionTemplate(std::move(attention), config), name, group, std::move(logits), target);
}

}  // namespace

StatusOr<CudaPlan> PlanFusionForCuda(const Graph& graph, PlannerOptions options, const CudaTarget& target) {
  CudaCapabilities capabilities(target);
  if (!options.target) options.target = &capabilities;
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

// Whether `arch` ("sm_90a", "sm_100", ...) launches thread-block clusters: Hopper on.
bool LaunchesClusters(const std::string& arch) {
  int major_minor = 0;
  return std::sscanf(arch.c_str(), "sm_%d", &major_minor) == 1 && major_minor >= 90;
}

StatusOr<CudaLaunchable> LowerAndEmit(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                      const std::string& name, const ConfigMap& configs, const CudaTarget& target) {
  ASSIGN_OR_RETURN(Kernel kernel, LowerGroup(g, group, inlined, target.fault, target.symbolic));
  kernel.name = name;
  CudaLaunchable launchable;
  auto tuned = configs.find(KernelFingerprint(kernel));
  CudaKernelConfig config = tuned == configs.end() ? CudaKernelConfig{} : tuned->second;
  if (tuned == configs.end() && target.overrides.row_cluster > 0) config.cluster = target.overrides.row_cluster;
  config.sm_count = target.sm_count;
  config.clusters = LaunchesClusters(target.arch);
  ASSIGN_OR_RETURN(launchable.source, EmitCudaKernel(kernel, config));
  for (const KernelBuffer& b : kernel.buffers) launchable.buffer_nodes.push_back(b.node);
  launchable.kernel = std::move(kernel);
  launchable.outputs = group.outputs;
  return launchable;
}

// The configuration asked of the GEMM template for `gemm` by the overrides (their zeros and
// unset fields resolved by the rule, ResolveGemmConfig). An overlapped epilogue and clusters
// of two are asked for wherever the template can run them (one unit per tile, cooperative
// consumers; ClustersFit), so that one setting can cover a whole model; ping-pong consumers
// keep their epilogue in the main loop's tail.
CudaGemmConfig RequestedGemmConfig(const GemmTemplateKernel& gemm, const CudaTarget& target) {
  const TemplateOverrides& o = target.overrides;
  CudaGemmConfig config;
  config.pingpong = o.gemm_pingpong;
  config.block_n = o.gemm_block_n;
  config.stages = o.gemm_stages;
  config.max_stages = o.gemm_max_stages;
  config.splits = o.gemm_splits;
  config.stream_k = o.gemm_stream_k;
  if (o.gemm_group_m > 0) config.group_m = o.gemm_group_m;
  config.sm_count = target.sm_count;
  if (target.tf32) config.promote = false;  // --precision high: FP8 products in the tensor cores' own accumulation
  if (o.gemm_pingpong.value_or(false)) config.overlap_epilogue = false;
  else if (o.gemm_overlap_epilogue == false) config.overlap_epilogue = false;
  else if (o.gemm_overlap_epilogue == true && gemm_layout::ProductMayBeHeld(gemm)) {
    CudaGemmConfig overlapped = config;
    overlapped.overlap_epilogue = true;
    if (ResolveGemmConfig(gemm, overlapped).splits == 1) config = overlapped;
  }
  // Pairs where they fit (the rule then picks a width the pair can split).
  CudaGemmConfig paired = config;
  paired.cluster_m = o.gemm_cluster_m;
  if (o.gemm_cluster_m == 1 || (o.gemm_cluster_m > 1 && gemm_layout::ClustersFit(gemm, ResolveGemmConfig(gemm, paired), o.gemm_cluster_m)))
    config.cluster_m = o.gemm_cluster_m;
  return config;
}

// The GEMM template for a gemm group, or why it does not apply.
StatusOr<CudaLaunchable> GemmTemplate(const Graph& g, const FusionGroup& group, const GemmSplit& split, const std::vector<bool>& inlined,
                                      const std::string& name, const CudaTarget& target, GemmPath path) {
  if (path == GemmPath::kLibrary) return Unimplemented("cuBLASLt asked for (--gemm library, or measured faster by the tuner)");
  if (target.arch != "sm_90a") return Unimplemented(fmt::format("the GEMM template needs sm_90a (Hopper), not {}", target.arch));
  ASSIGN_OR_RETURN(GemmTemplateKernel gemm, LowerGemmTemplate(g, group, split, inlined, target.tf32, target.symbolic));
  gemm.name = name;
  gemm.stage_f32_output = target.overrides.gemm_f32_staged;
  // 3xTF32 over few tiles (a batch-1 transformer's products) stays on the template, in the
  // few-tile rule's forms (ResolveGemmConfig): GPT-2 small f32 at 1x128 1224 µs, against 1759
  // with them on cuBLASLt's f32 (H200, 2026-12-01/02; 1940 in the 128x128 split tiles before).
  // A decode step's few rows, bound by reading B, stay on cuBLASLt's f32 (the template's forms
  // were measured at 128 rows). RULE_NUMBERS
  if (path == GemmPath::kAuto && gemm.split_f32 && gemm.rows <= gemm_layout::kReadBoundRows &&
      gemm_layout::Tiles(gemm, 128, 128) * 2 <= target.sm_count)
    return Unimplemented(fmt::format("3xTF32 over {} rows (a decode step, bound by reading B): cuBLASLt's f32 runs it", gemm.rows));
  // A few rows (a decode step): the skinny template, which streams B through every SM.
  if (target.overrides.gemm_skinny && SkinnyGemmFits(gemm).ok()) {
    Kernel epilogue = gemm.epilogue;
    return TemplateLaunchable(MakeSkinnyGemmTemplate(std::move(gemm), target.overrides.skinny_clusters, target.overrides.skinny_prefetch), name, group, std::move(epilogue), target);
  }
  // A product with too few output tiles to fill the GPU splits K (CudaGemmConfig::splits);
  // before split-K, 16 x 4096 x 4096 bf16 took 36 us in the template and 18 us in cuBLAS
  // (H100, 2026-11-23).
  const CudaGemmConfig requested = RequestedGemmConfig(gemm, target);
  Kernel epilogue = gemm.epilogue;
  return TemplateLaunchable(MakeGemmTemplate(std::move(gemm), requested), name, group, std::move(epilogue), target);
}

// The depthwise template for a pointwise group, or why it does not apply (or is not asked
// for: TemplateOverrides::depthwise).
StatusOr<CudaLaunchable> DepthwiseTemplate(const Graph& g, const FusionGroup& group, const std::vector<bool>& inlined,
                                           const std::string& name, const CudaTarget& target) {
  if (!target.overrides.depthwise) return Unimplemented("the depthwise template is switched off (--depthwise off)");
  ASSIGN_OR_RETURN(DepthwiseTemplateKernel dw, LowerDepthwiseTemplate(g, group, inlined));
  dw.name = name;
  dw.epilogue.name = name;
  CudaDepthwiseConfig config;
  config.vector = target.overrides.depthwise_vector;
  config.pixels = target.overrides.depthwise_pixels;
  Kernel epilogue = dw.epilogue;
  return TemplateLaunchable(MakeDepthwiseTemplate(std::move(dw), config), name, group, std::move(epilogue), target);
}

// Prologue kernels whose value nothing reads any more: the template reads A through its
// view (GemmOperandView) instead of the prologue's copy, unless the group outputs it.
void DropUnreadPrologues(CudaGroupProgram& p, const FusionGroup& group) {
  auto read = [&](int node) {
    if (std::find(group.outputs.begin(), group.outputs.end(), node) != group.outputs.end()) return true;
    return std::find(p.kernel->buffer_nodes.begin(), p.kernel->buffer_nodes.end(), node) != p.kernel->buffer_nodes.end();
  };
  std::erase_if(p.prologue, [&](const CudaLaunchable& k) {
    return std::none_of(k.outputs.begin(), k.outputs.end(), read);
  });
}

// cuBLASLt reads an operand its prologue only views where it lies, with a leading dimension and a
// batch stride (FindLibraryOperandView), that prologue dropped; where the operand's batch dims
// are the product's (or it has none). `prologues`: the group's, p.prologue's launchables in
// order. TILEFUSE_LT_VIEWS=0: the prologues copy, for comparison.
void ReadOperandViewsInPlace(const Graph& g, const FusionGroup& group, const GemmSplit& split, const std::vector<FusionGroup>& prologues,
                             const std::vector<bool>& inlined, const CudaTarget& target, CudaGroupProgram& p) {
  TF_CHECK(prologues.size() == p.prologue.size());
  if (!target.overrides.lt_views) return;
  const Node& mm = g.node(split.matmul);
  const int64_t batches = NumElements(mm.shape) / std::max<int64_t>(1, mm.shape[mm.rank() - 2] * mm.shape.back());
  std::vector<bool> dropped(prologues.size(), false);
  for (int side = 0; side < 2; ++side) {
    const Node& operand = g.node(mm.inputs[side]);
    const int64_t own_batches = NumElements(operand.shape) / std::max<int64_t>(1, operand.shape[operand.rank() - 2] * operand.shape.back());
    if (operand.rank() < 2 || (own_batches != batches && own_batches != 1)) continue;
    // (An operand the group also outputs is still computed by its prologue.)
    if (std::find(group.outputs.begin(), group.outputs.end(), operand.id) != group.outputs.end()) continue;
    for (size_t i = 0; i < prologues.size(); ++i) {
      if (dropped[i] || prologues[i].outputs != std::vector<int>{operand.id}) continue;
      std::optional<LibraryOperandView> view = FindLibraryOperandView(g, prologues[i], inlined, operand.id);
      if (!view) continue;
      if (own_batches == 1) view->batch_stride = 0;
      (side == 0 ? p.lt_a : p.lt_b) = view;
      dropped[i] = true;
    }
  }
  for (size_t i = prologues.size(); i-- > 0;)
    if (dropped[i]) p.prologue.erase(p.prologue.begin() + static_cast<std::ptrdiff_t>(i));
}

// cuBLASLt's fused epilogue for a gemm group, or why it has none.
StatusOr<LibraryEpilogue> LibraryEpilogueFor(const Graph& g, const FusionGroup& group, const GemmSplit& split,
                                             const std::vector<bool>& inlined) {
  const DType d = g.node(split.matmul).dtype;
  if (d != DType::kF32 && d != DType::kF16 && d != DType::kBF16) return Unimplemented(fmt::format("cuBLASLt has no {} matmul", DTypeName(d)));
  ASSIGN_OR_RETURN(GemmTemplateKernel problem, LowerGemmProblem(g, group, split, inlined));
  // cuBLASLt takes no empty dimension; the product's own path writes zeros over K = 0.
  if (problem.k == 0 || problem.n == 0 || problem.rows * problem.batch == 0) return Unimplemented("an empty product");
  return MatchLibraryEpilogue(problem);
}

LtEpilogue ToLtEpilogue(const LibraryEpilogue& e) {
  const bool bias = e.bias >= 0;
  switch (e.activation) {
    case LibraryActivation::kRelu: return bias ? LtEpilogue::kBiasRelu : LtEpilogue::kRelu;
    case LibraryActivation::kGeluTanh: return bias ? LtEpilogue::kBiasGelu : LtEpilogue::kGelu;
    case LibraryActivation::kNone: break;
  }
  return bias ? LtEpilogue::kBias : LtEpilogue::kNone;
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
      if (group.kind == GroupKind::kPointwise)
        if (StatusOr<CudaLaunchable> dw = DepthwiseTemplate(g, group, inlined, name, target); dw.ok()) {
          p.mode = CudaGroupProgram::Mode::kGenerated;
          p.kernel = std::move(*dw);
          return p;
        }
      StatusOr<CudaLaunchable> k = LowerAndEmit(g, group, inlined, name, configs, target);
      if (!k.ok()) return host(k.status().message());
      p.mode = CudaGroupProgram::Mode::kGenerated;
      p.kernel = std::move(*k);
      return p;
    }
    case GroupKind::kGemm: {
      GemmSplit split = SplitGemmGroup(g, group);
      p.mode = CudaGroupProgram::Mode::kGemm;
      p.matmul = split.matmul;
      const std::vector<FusionGroup> prologues = PrologueGroups(g, group, split);
      for (const FusionGroup& prologue : prologues) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, prologue, inlined, fmt::format("{}_prologue{}", name, p.prologue.size()), configs, target);
        if (!k.ok()) return host("prologue: " + k.status().message());
        p.prologue.push_back(std::move(*k));
      }
      // Under --gemm auto, a group cuBLASLt's own epilogue fuses (bias, ReLU, GELU) goes to
      // the template where the template has output tiles enough to fill the GPU without
      // splitting K (an implicit convolution always: the library would need im2col's copy
      // of A first), else to cuBLASLt: a decode-like product is bound by reading B, and
      // cuBLASLt reads it faster than this template (16x4096x4096 bias, H100, 2026-11-24:
      // 18.7 against 20.7 µs) — the skinny template's few rows excepted (below). RULE_NUMBERS
      // The tuner measures both where both apply (tune/gpu_tuner.cc) and says which won.
      const auto measured = target.gemm_path_at.find(split.matmul);
      const GemmPath path = measured != target.gemm_path_at.end() ? measured->second : target.gemm;
      StatusOr<LibraryEpilogue> library = LibraryEpilogueFor(g, group, split, inlined);
      // The skinny template up to 16 rows reads B faster than cuBLASLt; at 64 it did not
      // (H200, 2026-11-29: bias 16x4096x4096 14.5 against 15.2 µs, 1x4096x4096 14.2 against
      // 16.5; 64x4096x4096 16.4 against 13.5). RULE_NUMBERS
      auto library_by_rule = [&] {
        StatusOr<GemmTemplateKernel> problem = LowerGemmTemplate(g, group, split, inlined, target.tf32, target.symbolic);
        if (!problem.ok()) return true;
        if (target.overrides.gemm_skinny && SkinnyGemmFits(*problem).ok()) return problem->rows > kSkinnyOverLibraryRows;
        // TF32: cuBLASLt's own bias epilogue ran ahead of the template (H200, 2026-11-29, µs,
        // template / cuBLASLt: bias 4096^3 413 / 336, 8192x3072x768 175 / 121); with an
        // activation after the bias the template did (bias+GELU 16384x4096x1024 505 / 556).
        // RULE_NUMBERS
        // 3xTF32 (exact f32) against cuBLASLt's f32 kernels, which run on the CUDA cores: the
        // template as for half-precision products (below).
        // Not where cuBLASLt would need the operands' copies first (a weight's transpose, A's
        // view) that the template reads where they lie.
        if (problem->dtype == DType::kF32 && !problem->split_f32) return library->activation == LibraryActivation::kNone && p.prologue.empty();
        // Only a decode-like product (few rows: bound by reading B) that splits K: a weight's
        // gradient also splits K (256 x 768 from 4096 rows: 12 output tiles), and cuBLASLt took
        // 94-168 µs for it where 1.6 GFLOP predict 5 (LLaMA-style training step, H200,
        // 2026-11-30). RULE_NUMBERS
        return !problem->a_conv.has_value() && problem->rows <= kDecodeLikeRows &&
               ResolveGemmConfig(*problem, RequestedGemmConfig(*problem, target)).splits > 1;
      };
      const bool contested = path == GemmPath::kAuto && library.ok();
      StatusOr<CudaLaunchable> fused =
          contested && library_by_rule()
              ? StatusOr<CudaLaunchable>(Unimplemented(fmt::format("{} ({})", kLibraryEpilogueRule, DescribeLibraryEpilogue(*library))))
              : GemmTemplate(g, group, split, inlined, name, target, path);
      if (contested && fused.ok()) p.library_alternative = ToLtEpilogue(*library);
      if (fused.ok()) {
        p.mode = CudaGroupProgram::Mode::kGemmTemplate;
        p.kernel = std::move(*fused);
        DropUnreadPrologues(p, group);
        // The prologues write their own values, the template the rest: a launch poisons only
        // what it writes (--check), not a prologue's result just computed (MobileNetV3's
        // residual, TF32: every output NaN).
        for (const CudaLaunchable& k : p.prologue)
          std::erase_if(p.kernel->outputs, [&](int node) { return std::find(k.outputs.begin(), k.outputs.end(), node) != k.outputs.end(); });
        return p;
      }
      p.why_library = fused.status().message();
      ReadOperandViewsInPlace(g, group, split, prologues, inlined, target, p);
      // cuBLASLt's FP8 and int8 products (scales, K-major operands) are not wired: such a
      // product off the template runs on the host, and says so.
      if (const DType operands = g.node(g.node(split.matmul).inputs[0]).dtype; IsFloat8(operands) || operands == DType::kI8)
        return host(fmt::format("an {} product the GEMM template does not take: {}", operands == DType::kI8 ? "int8" : "FP8", p.why_library));
      if (library.ok()) {
        p.lt_epilogue = ToLtEpilogue(*library);
        p.lt_bias = library->bias;
        p.lt_output = library->output;
        return p;
      }
      if (!split.epilogue.nodes.empty()) {
        StatusOr<CudaLaunchable> k = LowerAndEmit(g, split.epilogue, inlined, name + "_epilogue", configs, target);
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

// The plan's step computing each node (-1: none, an input, a constant or an inlined generator).
std::vector<int> StepOfEachNode(const Graph& g, const FusionPlan& plan) {
  std::vector<int> step_of(g.num_nodes(), -1);
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (int out : plan.groups[i].outputs) step_of[out] = static_cast<int>(i);
  return step_of;
}

// The template a gemm template group's program was emitted from (a kernel of its own, no
// prologue kernels), or null.
const TemplateKernel* ProductTemplateOf(const CudaGroupProgram& p) {
  if (p.mode != CudaGroupProgram::Mode::kGemmTemplate || !p.prologue.empty() || !p.kernel) return nullptr;
  return p.kernel->template_kernel.get();
}

// The GEMM template's problem as such a program was emitted from, or null.
const GemmTemplateKernel* TemplateProblemOf(const CudaGroupProgram& p) {
  const TemplateKernel* t = ProductTemplateOf(p);
  return t ? t->GemmProblem() : nullptr;
}

// The skinny template's problem as such a program was emitted from, or null.
const GemmTemplateKernel* SkinnyProblemOf(const CudaGroupProgram& p) {
  const TemplateKernel* t = ProductTemplateOf(p);
  return t ? t->SkinnyProblem() : nullptr;
}

// Products grouped over N (codegen/gemm_n_groups.h): gemm template groups of few output tiles
// each, reading one A by different weights, become one kernel at the first one's step, where
// every input of the others is already computed (A and the weights; an epilogue's vector). The
// others keep no kernel (grouped_into) and their outputs are written at that step.
// A skinny product (a decode step's) joins such a group where another member is on the GEMM
// template already (a LLaMA-style layer's v beside q and k, whose rotary epilogues the skinny
// template does not take): its columns add a few units to that kernel and save a launch. Skinny
// products alone stay apart (the skinny template streams B faster than the GEMM template's
// grouped form would; it has no grouped form).
void GroupProductsOverN(const Graph& g, const FusionPlan& plan, const CudaTarget& target, CudaProgram& program) {
  if (!target.overrides.gemm_group_n || target.arch != "sm_90a") return;
  const std::vector<int> step_of = StepOfEachNode(g, plan);
  // Few output tiles (of 128x128; groupable products have one batch entry) for `n` columns.
  auto few_tiles = [&](int64_t rows, int64_t n) {
    if (target.overrides.gemm_group_n_any) return true;
    return gemm_layout::CeilDiv(rows, 128) * gemm_layout::CeilDiv(n, 128) * 2 <= target.sm_count;
  };
  // Candidates by what they must share, in plan order: the GEMM template's problems as their
  // programs were emitted from.
  std::map<std::string, std::vector<std::pair<size_t, GemmTemplateKernel>>> by_a;
  std::vector<bool> skinny(program.groups.size(), false);
  for (size_t i = 0; i < program.groups.size(); ++i) {
    const GemmTemplateKernel* gemm = TemplateProblemOf(program.groups[i]);
    if (!gemm && (gemm = SkinnyProblemOf(program.groups[i]))) skinny[i] = true;
    if (!gemm || !GroupableOverN(*gemm).ok() || !few_tiles(gemm->rows, gemm->n)) continue;
    by_a[GroupOverNKey(*gemm)].push_back({i, *gemm});
  }
  for (auto& [key, candidates] : by_a) {
    std::vector<bool> taken(candidates.size(), false);
    for (size_t first = 0; first < candidates.size(); ++first) {
      if (taken[first]) continue;
      const size_t step = candidates[first].first;
      std::vector<size_t> members = {first};
      int64_t n = candidates[first].second.n;
      for (size_t j = first + 1; j < candidates.size() && members.size() < static_cast<size_t>(kMaxGemmNParts); ++j) {
        if (taken[j]) continue;
        const FusionGroup& later = plan.groups[candidates[j].first];
        if (!std::all_of(later.inputs.begin(), later.inputs.end(), [&](int in) { return step_of[in] < static_cast<int>(step); })) continue;
        if (!few_tiles(candidates[first].second.rows, n + candidates[j].second.n)) continue;
        members.push_back(j);
        n += candidates[j].second.n;
      }
      if (members.size() < 2 || std::all_of(members.begin(), members.end(), [&](size_t m) { return skinny[candidates[m].first]; })) continue;
      std::vector<GemmTemplateKernel> parts;
      for (size_t m : members) parts.push_back(candidates[m].second);
      StatusOr<GemmTemplateKernel> grouped = GroupOverN(std::move(parts));
      if (!grouped.ok()) continue;
      CudaGroupProgram& head = program.groups[step];
      const std::string name = head.kernel->source.name;
      grouped->name = name;
      Kernel epilogue = grouped->n_parts.front().epilogue;
      const CudaGemmConfig requested = RequestedGemmConfig(*grouped, target);
      StatusOr<CudaLaunchable> kernel =
          TemplateLaunchable(MakeGemmTemplate(std::move(*grouped), requested), name, plan.groups[step], std::move(epilogue), target);
      if (!kernel.ok() || kernel->stand_in) continue;  // (no stand-in: the grouped form has no overlapped epilogue)
      for (size_t m : members) {
        taken[m] = true;
        CudaGroupProgram& p = program.groups[candidates[m].first];
        p.library_alternative.reset();  // (the tuner's contest is one product against one library call)
        if (m == first) continue;
        kernel->outputs.insert(kernel->outputs.end(), p.kernel->outputs.begin(), p.kernel->outputs.end());
        p.kernel.reset();
        p.grouped_into = head.group;
      }
      head.kernel = std::move(*kernel);
    }
  }
}

// Gated products (codegen/gemm_gates.h): a gemm group whose only output only one gemm template
// group's epilogue reads, element by element, both of one A, becomes that group's gate,
// computed in its tiles at its step; it keeps no kernel (gated_into) and its output no memory.
// The gate may be a product the rule gave cuBLASLt (a plain one, LLaMA's gate at 8x512), unless
// cuBLASLt was asked for or measured faster.
void GateProducts(const Graph& g, const FusionPlan& plan, const std::vector<bool>& inlined, const CudaTarget& target,
                  CudaProgram& program) {
  if (!target.overrides.gemm_gates || target.arch != "sm_90a") return;
  // The group computing each node, and how many groups read it (a graph output counts as one more).
  const std::vector<int> group_of = StepOfEachNode(g, plan);
  std::vector<int> readers(g.num_nodes(), 0);
  for (const FusionGroup& group : plan.groups)
    for (int in : group.inputs) ++readers[in];
  for (const Graph::Output& o : g.outputs()) ++readers[o.node];
  auto gate_of = [&](size_t i) -> std::optional<GemmTemplateKernel> {
    const CudaGroupProgram& p = program.groups[i];
    if (const GemmTemplateKernel* t = TemplateProblemOf(p)) return *t;
    if (p.mode != CudaGroupProgram::Mode::kGemm) return std::nullopt;
    const auto measured = target.gemm_path_at.find(p.matmul);
    if ((measured != target.gemm_path_at.end() ? measured->second : target.gemm) == GemmPath::kLibrary) return std::nullopt;
    const FusionGroup& group = plan.groups[i];
    StatusOr<GemmTemplateKernel> t = LowerGemmTemplate(g, group, SplitGemmGroup(g, group), inlined, target.tf32, target.symbolic);
    if (!t.ok()) return std::nullopt;
    return std::move(*t);
  };
  for (size_t q = 0; q < program.groups.size(); ++q) {
    CudaGroupProgram& own = program.groups[q];
    const GemmTemplateKernel* product = TemplateProblemOf(own);
    if (!product) continue;
    for (int in : plan.groups[q].inputs) {
      const int p = group_of[in];
      if (p < 0 || readers[in] != 1 || program.groups[p].gated_into >= 0) continue;
      const std::optional<GemmTemplateKernel> gate = gate_of(p);
      if (!gate || !Gateable(*gate, *product, in).ok()) continue;
      StatusOr<GemmTemplateKernel> gated = GateProduct(*gate, *product, in);
      if (!gated.ok()) continue;
      const std::string name = own.kernel->source.name;
      gated->name = name;
      Kernel epilogue = gated->epilogue;
      const CudaGemmConfig requested = RequestedGemmConfig(*gated, target);
      StatusOr<CudaLaunchable> kernel =
          TemplateLaunchable(MakeGemmTemplate(std::move(*gated), requested), name, plan.groups[q], std::move(epilogue), target);
      if (!kernel.ok()) continue;
      CudaGroupProgram& gate_program = program.groups[p];
      gate_program.mode = CudaGroupProgram::Mode::kGemmTemplate;  // (it was cuBLASLt's, or already the template's)
      gate_program.kernel.reset();
      gate_program.prologue.clear();
      gate_program.library_alternative.reset();
      gate_program.lt_epilogue = LtEpilogue::kNone;
      gate_program.lt_a.reset();
      gate_program.lt_b.reset();
      gate_program.gated_into = own.group;
      own.library_alternative.reset();  // (the tuner's contest is one product against one library call)
      own.kernel = std::move(*kernel);
      break;
    }
  }
}

// The groups reading each node, in plan order (a graph output: -1).
std::vector<std::vector<int>> GroupsReadingEachNode(const Graph& g, const FusionPlan& plan) {
  std::vector<std::vector<int>> readers(g.num_nodes());
  for (size_t i = 0; i < plan.groups.size(); ++i)
    for (int in : plan.groups[i].inputs) readers[in].push_back(static_cast<int>(i));
  for (const Graph::Output& o : g.outputs()) readers[o.node].push_back(-1);
  return readers;
}

// RMS norms in their products (codegen/gemm_row_norms.h): a generated row-reduction group whose
// one output is an RMS norm that only one GEMM template kernel reads, as its A (the q, k and v
// products grouped over N, a gated product's two), becomes part of that kernel; it keeps no
// kernel (normed_into) and its output no memory. Products of few output tiles only (batch 1),
// where the norm's launch is a part of the time worth saving (a product of many tiles would
// read and scale its A once a tile column; not measured).
void FoldRowNormsIntoProducts(const Graph& g, const FusionPlan& plan, const CudaTarget& target, CudaProgram& program) {
  if (!target.overrides.gemm_row_norms || target.arch != "sm_90a") return;
  const std::vector<int> group_of = StepOfEachNode(g, plan);
  const std::vector<std::vector<int>> readers = GroupsReadingEachNode(g, plan);
  for (size_t q = 0; q < program.groups.size(); ++q) {
    CudaGroupProgram& own = program.groups[q];
    const GemmTemplateKernel* product = TemplateProblemOf(own);
    // (Of 128x128 outputs: a gated product's 256-wide tiles hold 128 columns of each.)
    if (!product || !RowNormFoldable(*product).ok() || gemm_layout::Tiles(*product, 128, product->gate.empty() ? 128 : 256) * 2 > target.sm_count)
      continue;
    const int normed = product->a;
    const int n = group_of[normed];
    if (n < 0 || plan.groups[n].kind != GroupKind::kRowReduction || plan.groups[n].outputs != std::vector<int>{normed}) continue;
    CudaGroupProgram& norm_program = program.groups[n];
    if (norm_program.mode != CudaGroupProgram::Mode::kGenerated || !norm_program.kernel || norm_program.launched_with >= 0) continue;
    // Read by this kernel alone: this group, or one grouped or gated into it.
    const bool only_here = std::all_of(readers[normed].begin(), readers[normed].end(), [&](int r) {
      return r >= 0 && (r == static_cast<int>(q) || program.groups[r].grouped_into == own.group || program.groups[r].gated_into == own.group);
    });
    if (!only_here) continue;
    std::vector<bool> member(g.num_nodes(), false);
    for (int id : plan.groups[n].nodes) member[id] = true;
    const std::optional<RmsNormMatch> norm = MatchRmsNorm(g, normed, member);
    if (!norm || g.node(norm->input).dtype != product->operand_dtype || NumElements(g.node(norm->input).shape) != product->rows * product->k) continue;
    GemmTemplateKernel folded = FoldRowNorm(*product, normed, *norm);
    const std::string name = own.kernel->source.name;
    const CudaGemmConfig requested = RequestedGemmConfig(folded, target);
    StatusOr<CudaLaunchable> kernel =
        TemplateLaunchable(MakeGemmTemplate(std::move(folded), requested), name, plan.groups[q], own.kernel->kernel, target);
    if (!kernel.ok() || kernel->stand_in) continue;
    kernel->outputs = own.kernel->outputs;  // (a grouped product's include its parts')
    own.kernel = std::move(*kernel);
    norm_program.kernel.reset();
    norm_program.normed_into = own.group;
  }
}

// Norms in the skinny products (gemm_skinny_sm90.cuh's kNormA): a generated row-reduction
// group whose one output is a layer norm or an RMS norm that only skinny products read, each as
// its A (a decode step's norms before GPT-2's QKV, first MLP and LM-head products; a LLaMA-style
// layer's before its gate and up products, both computing it), becomes part of those kernels:
// each reads the norm's input and its producer's second warp writes A's tiles normed. The norm
// keeps no kernel (normed_into: the first reader) and its output no memory: at batch 1 each is a
// one-CTA launch and a dependency edge on the step's path, 25 of GPT-2's 99. Off unless asked
// (TILEFUSE_SKINNY_NORMS=1): GPT-2's decode 0.590 -> 0.525 ms a token on an H100, 0.502 -> 0.488
// on the H200 (within run-to-run spread), the LLaMA-style one unchanged (2026-12-05); computing
// the norm in every CTA costs about what its kernel did.
void FoldNormsIntoSkinnyProducts(const Graph& g, const FusionPlan& plan, const CudaTarget& target, CudaProgram& program) {
  if (!target.overrides.skinny_norms || target.arch != "sm_90a") return;
  const std::vector<std::vector<int>> readers = GroupsReadingEachNode(g, plan);
  const std::vector<int> written_at = StepOfEachNode(g, plan);
  for (size_t n = 0; n < program.groups.size(); ++n) {
    CudaGroupProgram& norm_program = program.groups[n];
    if (plan.groups[n].kind != GroupKind::kRowReduction || plan.groups[n].outputs.size() != 1) continue;
    if (norm_program.mode != CudaGroupProgram::Mode::kGenerated || !norm_program.kernel || norm_program.launched_with >= 0) continue;
    const int normed = plan.groups[n].outputs.front();
    // Read only by skinny products, each as its A (checked before the norm is matched).
    const bool skinny_readers = std::all_of(readers[normed].begin(), readers[normed].end(), [&](int r) {
      const GemmTemplateKernel* product = r >= 0 ? SkinnyProblemOf(program.groups[r]) : nullptr;
      return product && !product->layer_norm && product->a == normed;
    });
    if (readers[normed].empty() || !skinny_readers) continue;
    std::vector<bool> member(g.num_nodes(), false);
    for (int id : plan.groups[n].nodes) member[id] = true;
    GemmLayerNorm folded_norm;
    int input = -1;
    if (const std::optional<LayerNormMatch> ln = MatchLayerNorm(g, normed, member)) {
      input = ln->input;
      folded_norm = GemmLayerNorm{normed, ln->scale, ln->bias, static_cast<float>(ln->epsilon)};
    } else if (const std::optional<RmsNormMatch> rms = MatchRmsNorm(g, normed, member)) {
      input = rms->input;
      folded_norm = GemmLayerNorm{normed, rms->scale, -1, static_cast<float>(rms->epsilon), /*rms=*/true};
    } else {
      continue;
    }
    // x read from memory: the graph's or a group's output (the matchers check it too).
    const Node& x = g.node(input);
    if (x.op != OpCode::kParameter && x.op != OpCode::kConstant && written_at[input] < 0) continue;
    // Each reader (a group of its own) able to compute it.
    std::vector<std::pair<int, CudaLaunchable>> folded;
    for (int r : readers[normed]) {
      if (std::count(readers[normed].begin(), readers[normed].end(), r) > 1) break;
      const CudaGroupProgram& own = program.groups[r];
      const GemmTemplateKernel* product = SkinnyProblemOf(own);
      if (g.node(input).dtype != product->dtype || NumElements(g.node(input).shape) != product->rows * product->k) break;
      GemmTemplateKernel with_norm = *product;
      with_norm.a = input;
      with_norm.layer_norm = folded_norm;
      if (!SkinnyGemmFits(with_norm).ok()) break;
      StatusOr<CudaLaunchable> kernel =
          TemplateLaunchable(MakeSkinnyGemmTemplate(std::move(with_norm), target.overrides.skinny_clusters, target.overrides.skinny_prefetch), own.kernel->source.name, plan.groups[r], own.kernel->kernel, target);
      if (!kernel.ok() || kernel->stand_in) break;
      kernel->outputs = own.kernel->outputs;
      folded.emplace_back(r, std::move(*kernel));
    }
    if (folded.empty() || folded.size() != readers[normed].size()) continue;
    for (auto& [r, kernel] : folded) program.groups[r].kernel = std::move(kernel);
    norm_program.kernel.reset();
    norm_program.normed_into = program.groups[folded.front().first].group;
  }
}

// Amaxes in their products' epilogues (backend/cuda/cuda_amax_fold.h): the reduction group
// keeps no kernel (grouped_into) and its outputs are written at the product's step; the
// product's outputs only it read are no longer stored (unstored_outputs). The tuner's library
// alternative goes (cuBLASLt's call would not compute the amax).
void FoldAmaxesIntoProducts(const Graph& g, const FusionPlan& plan, const std::vector<bool>& inlined, const CudaTarget& target,
                            CudaProgram& program) {
  if (!target.overrides.amax_in_epilogue || target.arch != "sm_90a") return;
  AmaxFolds folds(g, plan, inlined, target.tf32, target.symbolic);
  for (size_t r = 0; r < program.groups.size(); ++r) {
    CudaGroupProgram& reduction = program.groups[r];
    if (reduction.mode != CudaGroupProgram::Mode::kGenerated || !reduction.kernel || reduction.launched_with >= 0 || reduction.grouped_into >= 0)
      continue;
    std::optional<AmaxFold> fold = folds.Fold(static_cast<int>(r), [&](int q) -> const GemmTemplateKernel* {
      const CudaGroupProgram& own = program.groups[static_cast<size_t>(q)];
      return own.grouped_into >= 0 || own.gated_into >= 0 || own.normed_into >= 0 ? nullptr : TemplateProblemOf(own);
    });
    if (!fold) continue;
    CudaGroupProgram& own = program.groups[static_cast<size_t>(fold->product_group)];
    const std::vector<int> outputs = fold->folded.outputs;
    Kernel epilogue = fold->folded.epilogue;
    fold->folded.name = own.kernel->source.name;
    const CudaGemmConfig requested = RequestedGemmConfig(fold->folded, target);
    StatusOr<CudaLaunchable> kernel = TemplateLaunchable(MakeGemmTemplate(std::move(fold->folded), requested), own.kernel->source.name,
                                                         fold->merged, std::move(epilogue), target);
    if (!kernel.ok() || kernel->stand_in) continue;
    kernel->outputs = outputs;
    for (int out : plan.groups[static_cast<size_t>(fold->product_group)].outputs)
      if (std::find(outputs.begin(), outputs.end(), out) == outputs.end()) own.unstored_outputs.push_back(out);
    own.kernel = std::move(*kernel);
    own.library_alternative.reset();
    reduction.kernel.reset();
    reduction.grouped_into = own.group;
  }
}

// Two skinny products in one kernel (codegen/cuda/cuda_skinny_chain_emitter.h): a skinny
// product whose one output only another skinny product reads, as its A (a decode step's MLP:
// the GELU of the first product is the second's A), becomes the chain's kernel at the first's
// step; the second keeps no kernel (grouped_into the first) and its outputs are written there,
// where every other value it reads is already written. The first's output is never stored.
// Expected: one launch and its dependency edge fewer a layer (GPT-2 small on an H100: the two
// products 4.5 + 3.9 µs of the step's critical path, their weights ~1.4 µs each of bandwidth);
// measured slower (TemplateOverrides::skinny_chains says why), so off unless asked.
void ChainSkinnyProducts(const Graph& g, const FusionPlan& plan, const CudaTarget& target, CudaProgram& program) {
  if (!target.overrides.skinny_chains || target.arch != "sm_90a") return;
  const std::vector<std::vector<int>> readers = GroupsReadingEachNode(g, plan);
  const std::vector<int> written_at = StepOfEachNode(g, plan);
  for (size_t q = 0; q < program.groups.size(); ++q) {
    CudaGroupProgram& own = program.groups[q];
    const GemmTemplateKernel* first = SkinnyProblemOf(own);
    if (!first || own.grouped_into >= 0 || plan.groups[q].outputs.size() != 1) continue;
    const int h = plan.groups[q].outputs.front();
    if (readers[h].size() != 1 || readers[h].front() < 0) continue;  // (-1: a graph output)
    const size_t r = static_cast<size_t>(readers[h].front());
    CudaGroupProgram& next = program.groups[r];
    const GemmTemplateKernel* second = r > q ? SkinnyProblemOf(next) : nullptr;
    if (!second || next.grouped_into >= 0 || next.launched_with >= 0 || !SkinnyChainFits(*first, *second).ok()) continue;
    // Everything else the second reads written before the first's step.
    const bool ready = std::all_of(plan.groups[r].inputs.begin(), plan.groups[r].inputs.end(),
                                   [&](int input) { return input == h || written_at[input] < static_cast<int>(q); });
    if (!ready) continue;
    StatusOr<CudaLaunchable> kernel =
        TemplateLaunchable(MakeSkinnyChainTemplate(*first, *second), own.kernel->source.name, plan.groups[q], own.kernel->kernel, target);
    if (!kernel.ok() || kernel->stand_in) continue;
    kernel->outputs = next.kernel->outputs;
    own.kernel = std::move(*kernel);
    own.output_unstored = true;
    next.kernel.reset();
    next.grouped_into = own.group;
  }
}

// A KV cache's update at one position written by the decode attention that reads it
// (cuda_cache_update_fold.h), and the attention's output projection computed in its kernel
// (cuda_projection_fold.h): the attention emitted again with what folds, each folded group left
// without a kernel, grouped into the attention (its outputs written at that step). A projection
// the emitter refuses leaves the update's fold alone.
void FoldIntoDecodeAttention(const Graph& g, const FusionPlan& plan, const std::vector<bool>& inlined, const CudaTarget& target,
                             CudaProgram& program) {
  const bool updates = target.overrides.cache_updates_in_attention, projections = target.overrides.projection_in_attention;
  if ((!updates && !projections) || target.arch != "sm_90a") return;
  const std::vector<std::vector<int>> readers = GroupsReadingEachNode(g, plan);
  for (CudaGroupProgram& attention : program.groups) {
    if (attention.mode != CudaGroupProgram::Mode::kAttentionTemplate || !attention.kernel) continue;
    const bool may_update = updates && MayFoldCacheUpdate(plan, program, attention.group);
    // The one group reading the attention's output, a skinny product.
    int product_group = -1;
    const std::vector<int>& outputs = plan.groups[attention.group].outputs;
    if (projections && outputs.size() == 1 && readers[outputs.front()].size() == 1 && readers[outputs.front()].front() > attention.group) {
      const int r = readers[outputs.front()].front();
      if (program.groups[r].grouped_into < 0 && program.groups[r].launched_with < 0 && SkinnyProblemOf(program.groups[r])) product_group = r;
    }
    if (!may_update && product_group < 0) continue;
    int update = -1;
    bool projected = false;
    auto emit = [&](bool with_projection) {
      update = -1;
      projected = false;
      return AttentionTemplate(g, plan.groups[attention.group], inlined, attention.kernel->source.name, target, [&](AttentionTemplateKernel& t) {
        if (may_update) update = FoldCacheUpdate(g, plan, program, attention.group, t);
        if (with_projection) projected = FoldProjection(g, *SkinnyProblemOf(program.groups[product_group]), t);
      });
    };
    StatusOr<CudaLaunchable> folded = emit(product_group >= 0);
    if (projected && (!folded.ok() || folded->stand_in)) folded = emit(false);  // (the projection refused: the update alone)
    if (!folded.ok() || (update < 0 && !projected)) continue;  // (the fold's emit refused: the groups keep their kernels)
    if (update >= 0) {
      const std::vector<int>& written = plan.groups[update].outputs;
      folded->outputs.insert(folded->outputs.end(), written.begin(), written.end());
      program.groups[update].kernel.reset();
      program.groups[update].grouped_into = attention.group;
    }
    if (projected) {
      CudaGroupProgram& product = program.groups[product_group];
      folded->outputs.erase(std::remove(folded->outputs.begin(), folded->outputs.end(), outputs.front()), folded->outputs.end());
      folded->outputs.insert(folded->outputs.end(), product.kernel->outputs.begin(), product.kernel->outputs.end());
      attention.output_unstored = true;
      product.kernel.reset();
      product.grouped_into = attention.group;
    }
    attention.kernel = std::move(*folded);
  }
}

// Independent pointwise kernels launched together (codegen/cuda/cuda_launch_together.h): a
// generated pointwise group's kernel takes the kernels of the next groups (a few steps on) whose
// inputs are all written before it runs (a LLaMA-style layer's rotary embeddings of q and of k,
// both reading the QKV product's outputs); those keep no kernel (launched_with) and their
// outputs are written at its step. Beyond those few steps it takes one-block kernels (a few
// scalars) that read only the graph's inputs and constants, from anywhere later: a static KV
// cache's decode step updates each layer's counter and position in a kernel of one element a
// layer, twelve launches of GPT-2's 110 that all fit in the first.
void LaunchIndependentKernelsTogether(const Graph& g, const FusionPlan& plan, const CudaTarget& target, CudaProgram& program) {
  if (!target.overrides.launch_together) return;
  // Scalar parts up to one a layer of a 22-layer decode step's two (its counters, its position);
  // the arguments (8-byte pointers) within the 4 KB every launch takes.
  constexpr size_t kLookAhead = 6, kMaxParts = 4, kMaxPartsWithScalars = 48, kMaxArgs = 4096 / 8;
  // The step whose kernel writes each node: its group's, or the one it is grouped into.
  std::vector<int> written_at = StepOfEachNode(g, plan);
  for (int& step : written_at)
    if (step >= 0 && program.groups[step].grouped_into >= 0) step = program.groups[step].grouped_into;
  // Each group's kernel as a part of a launch together, decided once. Not one that divides
  // floats: the division's slow path is a call, and beside another part the call's saved
  // registers spilled (a softmax's division with a transposing copy: 4 bytes, sm_90a).
  auto divides_floats = [](const Kernel& k) {
    return std::any_of(k.values.begin(), k.values.end(), [](const ScalarValue& v) {
      return v.kind == ScalarValue::Kind::kOp && v.op == OpCode::kDiv && IsFloat(v.dtype);
    });
  };
  std::vector<bool> joinable(program.groups.size(), false);
  for (size_t i = 0; i < program.groups.size(); ++i) {
    const CudaGroupProgram& p = program.groups[i];
    joinable[i] = p.mode == CudaGroupProgram::Mode::kGenerated && p.kind == GroupKind::kPointwise && p.kernel && p.prologue.empty() &&
                  !p.kernel->is_template && !divides_floats(p.kernel->kernel) && CanLaunchTogether(p.kernel->source).ok();
  }
  for (size_t i = 0; i < program.groups.size(); ++i) {
    if (!joinable[i]) continue;
    std::vector<size_t> members = {i};
    size_t near = 1;  // members within kLookAhead steps
    size_t args = program.groups[i].kernel->source.launch.args.size();
    for (size_t j = i + 1; j < program.groups.size() && members.size() < kMaxPartsWithScalars; ++j) {
      if (!joinable[j] || program.groups[j].kernel->source.launch.block != program.groups[i].kernel->source.launch.block) continue;
      const std::vector<int>& inputs = plan.groups[j].inputs;
      const bool scalars_from_inputs = program.groups[j].kernel->source.launch.grid == std::array<int64_t, 3>{1, 1, 1} &&
                                       std::all_of(inputs.begin(), inputs.end(), [&](int in) { return written_at[in] < 0; });
      if (!scalars_from_inputs && (j > i + kLookAhead || near == kMaxParts)) continue;
      if (args + program.groups[j].kernel->source.launch.args.size() > kMaxArgs) continue;
      if (std::all_of(inputs.begin(), inputs.end(), [&](int in) { return written_at[in] < static_cast<int>(i); })) {
        members.push_back(j);
        near += scalars_from_inputs ? 0 : 1;
        args += program.groups[j].kernel->source.launch.args.size();
      }
    }
    if (members.size() < 2) continue;
    std::vector<CudaKernelSource> parts;
    for (size_t m : members) parts.push_back(program.groups[m].kernel->source);
    CudaGroupProgram& head = program.groups[i];
    StatusOr<CudaKernelSource> together = LaunchTogether(head.kernel->source.name, parts);
    if (!together.ok()) continue;
    CudaLaunchable launchable = *head.kernel;
    launchable.source = std::move(*together);
    launchable.buffer_nodes.clear();
    for (const LaunchArg& arg : launchable.source.launch.args) launchable.buffer_nodes.push_back(arg.node);
    for (size_t m = 1; m < members.size(); ++m) {
      CudaGroupProgram& joined = program.groups[members[m]];
      launchable.outputs.insert(launchable.outputs.end(), joined.kernel->outputs.begin(), joined.kernel->outputs.end());
      launchable.launched_with_it.push_back(std::move(joined.kernel->kernel));
      joined.kernel.reset();
      joined.launched_with = head.group;
      joinable[members[m]] = false;
      for (int out : plan.groups[members[m]].outputs) written_at[out] = static_cast<int>(i);
    }
    head.kernel = std::move(launchable);
  }
}

// TemplateOverrides::trigger_before_wait: every kernel's unit defines TF_TRIGGER_BEFORE_WAIT, and
// its text says so (the unit's entry, a hash of the text, differs from the default's).
void ReleaseTheKernelBehindFirst(CudaProgram& program) {
  auto mark = [](CudaLaunchable& k) {
    if (k.source.trigger_before_wait) return;
    k.source.trigger_before_wait = true;
    k.source.function = "// the kernel behind released before this one's wait (TF_TRIGGER_BEFORE_WAIT)\n" + k.source.function;
  };
  for (CudaGroupProgram& p : program.groups) {
    for (CudaLaunchable& k : p.prologue) mark(k);
    if (p.kernel) mark(*p.kernel);
  }
}

}  // namespace

StatusOr<CudaProgram> BuildCudaProgram(const Graph& graph, const FusionPlan& plan, const std::vector<bool>& inlined,
                                       const std::string& prefix, const ConfigMap& configs, const CudaTarget& given) {
  // TILEFUSE_SYMBOLIC_SIZES=0: every size written into the kernels (for comparison).
  const SymbolicShapes symbolic = SwitchedOff("TILEFUSE_SYMBOLIC_SIZES") ? SymbolicShapes{} : InferSymbolicShapes(graph);
  CudaTarget target = given;
  target.symbolic = symbolic.empty() ? nullptr : &symbolic;
  CudaProgram program;
  for (const FusionGroup& group : plan.groups) {
    std::string name = fmt::format("{}tf_group{}_{}", prefix, group.id, GroupKindName(group.kind));
    program.groups.push_back(ProgramForGroup(graph, group, inlined, name, configs, target));
  }
  GateProducts(graph, plan, inlined, target, program);
  GroupProductsOverN(graph, plan, target, program);
  FoldRowNormsIntoProducts(graph, plan, target, program);
  FoldNormsIntoSkinnyProducts(graph, plan, target, program);
  ChainSkinnyProducts(graph, plan, target, program);
  FoldAmaxesIntoProducts(graph, plan, inlined, target, program);
  FoldIntoDecodeAttention(graph, plan, inlined, target, program);
  LowerAttentionGradients(graph, plan, prefix, target, program);
  LaunchIndependentKernelsTogether(graph, plan, target, program);
  if (target.overrides.trigger_before_wait) ReleaseTheKernelBehindFirst(program);
  program.source = CudaTranslationUnit(KernelSources(program));
  return program;
}

void WriteGroupedOutputsAtTheirKernel(const CudaProgram& program, Schedule& schedule) {
  for (const CudaGroupProgram& p : program.groups) {
    // (Read only by the kernel that computes it; the groups come in plan order, so a chain's
    // first product drops its output before the second's reads move to its step.)
    if (p.gated_into >= 0 || p.normed_into >= 0 || p.output_unstored) {
      std::vector<int>& dropped = schedule.steps.at(p.group).writes;
      for (ScheduleStep& step : schedule.steps)
        for (int b : dropped) std::erase(step.reads, b);
      dropped.clear();
    }
    for (int node : p.unstored_outputs)  // (an amax's u: its reader's ops run in this kernel)
      for (size_t b = 0; b < schedule.buffers.size(); ++b) {
        if (schedule.buffers[b].node != node) continue;
        std::erase(schedule.steps.at(p.group).writes, static_cast<int>(b));
        for (ScheduleStep& step : schedule.steps) std::erase(step.reads, static_cast<int>(b));
      }
    if (p.grouped_into >= 0 || p.launched_with >= 0) {
      ScheduleStep& own = schedule.steps.at(p.group);
      ScheduleStep& into = schedule.steps.at(p.grouped_into >= 0 ? p.grouped_into : p.launched_with);
      into.writes.insert(into.writes.end(), own.writes.begin(), own.writes.end());
      own.writes.clear();
      // Read there too (a cache update computed later, by the attention: its inputs live on).
      into.reads.insert(into.reads.end(), own.reads.begin(), own.reads.end());
    }
  }
}

FusionDecision CudaCapabilities::FusesGemmEpilogue(const Graph& graph, const std::vector<int>& members, int matmul) const {
  if (graph_ != &graph) {
    graph_ = &graph;
    users_ = graph.ComputeUsers();
    inlined_ = FindInlinedGenerators(graph);
    answers_.clear();
  }
  auto known = answers_.find(members);
  if (known != answers_.end()) return known->second;
  // The group as the planner would record it.
  FusionGroup group;
  group.kind = GroupKind::kGemm;
  group.nodes = members;
  std::vector<bool> member(graph.num_nodes(), false), is_output(graph.num_nodes(), false);
  for (int id : members) member[id] = true;
  for (const Graph::Output& o : graph.outputs()) is_output[o.node] = true;
  for (int id : members) {
    for (int input : graph.node(id).inputs)
      if (!member[input]) group.inputs.push_back(input);
    if (is_output[id] || std::any_of(users_[id].begin(), users_[id].end(), [&](int u) { return !member[u]; })) group.outputs.push_back(id);
  }
  std::sort(group.inputs.begin(), group.inputs.end());
  group.inputs.erase(std::unique(group.inputs.begin(), group.inputs.end()), group.inputs.end());
  GemmSplit split = SplitGemmGroup(graph, group);
  const auto measured = target_.gemm_path_at.find(matmul);
  const GemmPath path = measured != target_.gemm_path_at.end() ? measured->second : target_.gemm;
  // As ProgramForGroup runs it: cuBLASLt's own epilogue, on any path, or the template where
  // the path allows it.
  FusionDecision answer = FusionDecision::Allow();
  if (!LibraryEpilogueFor(graph, group, split, inlined_).ok()) {
    StatusOr<GemmTemplateKernel> fused =
        path == GemmPath::kLibrary   ? StatusOr<GemmTemplateKernel>(Unimplemented("cuBLASLt asked for"))
        : target_.arch != "sm_90a"   ? StatusOr<GemmTemplateKernel>(Unimplemented("the GEMM template needs sm_90a"))
                                     : LowerGemmTemplate(graph, group, split, inlined_, target_.tf32);
    if (!fused.ok()) answer = FusionDecision::Forbid("cuBLASLt's product, no GEMM template: " + fused.status().message());
  }
  answers_.emplace(members, answer);
  return answer;
}

std::vector<int> GraphValuesOf(const LaunchSpec& launch) {
  std::vector<int> nodes;
  for (const LaunchArg& arg : launch.args)
    if (arg.kind == LaunchArg::Kind::kBuffer) nodes.push_back(arg.node);
    else if (arg.kind == LaunchArg::Kind::kTensorMap) nodes.push_back(arg.map.node);
  return nodes;
}

std::vector<const CudaLaunchable*> Launchables(const CudaGroupProgram& p) {
  std::vector<const CudaLaunchable*> out;
  for (const CudaLaunchable& k : p.prologue) out.push_back(&k);
  if (p.kernel) out.push_back(&*p.kernel);
  return out;
}

std::vector<CudaKernelSource> KernelSources(const CudaProgram& program) {
  std::vector<CudaKernelSource> sources;
  for (const CudaGroupProgram& p : program.groups)
    for (const CudaLaunchable* k : Launchables(p)) sources.push_back(k->source);
  return sources;
}

}  // namespace tilefuse

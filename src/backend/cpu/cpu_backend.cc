#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <fmt/format.h>

#include "backend/cpu/conv_epilogue.h"
#include "backend/cpu/cpu_executable_state.h"
#include "backend/cpu/onednn_conv.h"
#include "reference/interpreter.h"
#include "codegen/attention_lower.h"
#include "codegen/cpp/cpp_attention_emitter.h"
#include "codegen/cpp/cpp_emitter.h"
#include "codegen/cpp/cpp_prelude.h"
#include "codegen/gemm_split.h"
#include "codegen/kernel_fingerprint.h"
#include "codegen/lower.h"
#include "codegen/split_rows.h"
#include "fusion/group_classifier.h"
#include "runtime/memory_plan.h"
#include "support/check.h"
#include "support/env_switch.h"
#include "support/host_memory.h"

namespace tilefuse {

namespace {

using cpu_executable_internal::GeneratedCall;
using cpu_executable_internal::Step;
using ConfigMap = std::map<std::string, CppKernelConfig>;

// Constants, and the inlined generators that `readers` (nodes run on the reference
// kernels or BLAS) read (generated kernels recompute generators inline, so a causal mask
// the size of the scores is only materialised when a reference step needs it).
Status EvaluateGenerators(const Graph& g, const std::vector<bool>& inlined, const std::vector<int>& readers,
                          std::vector<Tensor>& values) {
  std::vector<bool> needed(g.num_nodes(), false);
  for (int id : readers)
    for (int input : g.node(id).inputs) needed[input] = inlined[input];
  for (int id = g.num_nodes() - 1; id >= 0; --id)
    if (needed[id])
      for (int input : g.node(id).inputs) needed[input] = needed[input] || inlined[input];
  values.assign(g.num_nodes(), Tensor());
  for (const Node& n : g.nodes()) {
    if (n.op == OpCode::kConstant) values[n.id] = *n.attrs.value;
    if (!needed[n.id]) continue;
    std::vector<const Tensor*> inputs;
    for (int input : n.inputs) inputs.push_back(&values[input]);
    ASSIGN_OR_RETURN(values[n.id], EvaluateNode(n, inputs));
  }
  return Status::Ok();
}

// The nodes whose inputs a run must hold in memory, generators included: those on the
// reference kernels (whole groups without a generated kernel, prologue parts), and the
// products, which BLAS reads where they are.
std::vector<int> NodesReadingMemory(const CpuExecutable::State& state) {
  std::vector<int> nodes;
  for (const Step& step : state.steps) {
    if (step.matmul >= 0) {
      nodes.insert(nodes.end(), step.reference_prologue.begin(), step.reference_prologue.end());
      nodes.push_back(step.matmul);
    } else if (!step.kernel) {
      const std::vector<int>& members = state.plan.groups[step.group].nodes;
      nodes.insert(nodes.end(), members.begin(), members.end());
    }
  }
  return nodes;
}

// Whether the host holds a run's memory, refused with the largest value named before
// anything is allocated: the arena, and what a run holds outside it — inputs, values
// steps write outside the arena (outputs), the members of steps on the reference kernels
// and the generators they read (each as a tensor, plus its f64 copy while EvaluateNode
// computes it). Values fused into a kernel are never materialised and do not count.
Status CheckGraphFitsHost(const CpuExecutable::State& state) {
  const Graph& graph = state.graph;
  std::vector<int> held(graph.inputs().begin(), graph.inputs().end());
  std::vector<int> on_reference = NodesReadingMemory(state);
  for (const Step& step : state.steps) {
    for (const GeneratedCall& call : step.prologue) held.insert(held.end(), call.outputs.begin(), call.outputs.end());
    if (step.kernel) held.insert(held.end(), step.kernel->outputs.begin(), step.kernel->outputs.end());
    if (step.matmul >= 0 && (!step.conv || step.conv_output == step.matmul)) held.push_back(step.matmul);
  }
  for (int id : on_reference) {
    held.push_back(id);
    for (int input : graph.node(id).inputs)
      if (state.inlined[input]) held.push_back(input);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  auto bytes_of = [&](int id) { return SaturatingBytes(NumElements(graph.node(id).shape), DTypeSize(graph.node(id).dtype)); };
  auto add = [](int64_t a, int64_t b) { return b > INT64_MAX - a ? INT64_MAX : a + b; };
  int64_t total = state.memory.arena_bytes, largest_f64 = 0;
  int largest = -1;
  for (int id : held) {
    if (graph.node(id).op == OpCode::kConstant) continue;  // the graph holds it already
    if (largest < 0 || bytes_of(id) > bytes_of(largest)) largest = id;
    if (state.arena_offset[id] < 0) total = add(total, bytes_of(id));
  }
  for (int id : on_reference) largest_f64 = std::max(largest_f64, SaturatingBytes(NumElements(graph.node(id).shape), 8));
  total = add(total, largest_f64);
  if (largest < 0) return Status::Ok();
  const Node& n = graph.node(largest);
  return CheckHostMemory(total, fmt::format("running the graph (its largest value: node %{} '{}' ({}) {}{}, {:.2f} GiB)", n.id,
                                            n.name, OpName(n.op), DTypeName(n.dtype), ShapeToString(n.shape),
                                            static_cast<double>(bytes_of(largest)) / (1ll << 30)));
}

// What each step reads: its generated kernels' buffers, and what its library calls (BLAS,
// oneDNN) take, so that the arena keeps every value until the last step that reads it, group
// inputs or not (CudaBackend's memory plan does the same with its kernels).
std::vector<std::vector<int>> StepReads(const CpuExecutable::State& state) {
  const Graph& g = state.graph;
  std::vector<std::vector<int>> reads(state.steps.size());
  for (size_t i = 0; i < state.steps.size(); ++i) {
    const Step& step = state.steps[i];
    std::vector<int>& r = reads[i];
    if (step.kernel) r.insert(r.end(), step.kernel->buffer_nodes.begin(), step.kernel->buffer_nodes.end());
    for (const GeneratedCall& call : step.prologue) r.insert(r.end(), call.buffer_nodes.begin(), call.buffer_nodes.end());
    if (step.matmul >= 0) r.insert(r.end(), g.node(step.matmul).inputs.begin(), g.node(step.matmul).inputs.end());
    if (step.pool_node >= 0) r.insert(r.end(), g.node(step.pool_node).inputs.begin(), g.node(step.pool_node).inputs.end());
    for (int node : {step.conv_residual, step.se_input, step.se_scale})
      if (node >= 0) r.push_back(node);
  }
  return reads;
}

// Intermediates share one arena by liveness: the plan's, and the values gemm steps
// materialise inside their group (prologue outputs, the product), live during their own
// step only. Allocated once here, so a run page-faults nothing.
Status PlanArena(CpuExecutable::State& state) {
  Schedule schedule = ScheduleFromFusionPlan(state.graph, state.plan);
  std::vector<std::vector<int>> local_values(state.steps.size());
  for (size_t i = 0; i < state.steps.size(); ++i) {
    const Step& step = state.steps[i];
    if (step.matmul < 0) continue;
    for (const GeneratedCall& call : step.prologue)
      local_values[i].insert(local_values[i].end(), call.outputs.begin(), call.outputs.end());
    if (!step.conv || step.conv_output == step.matmul) local_values[i].push_back(step.matmul);
  }
  AddStepLocalBuffers(state.graph, local_values, schedule);
  AddStepReads(StepReads(state), schedule);
  ASSIGN_OR_RETURN(state.memory, PlanMemory(schedule));
  state.arena_offset.assign(state.graph.num_nodes(), -1);
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (state.memory.offsets[b] >= 0) state.arena_offset[schedule.buffers[b].node] = state.memory.offsets[b];
  RETURN_IF_ERROR(CheckGraphFitsHost(state));
  state.arena.resize(state.memory.arena_bytes);
  return Status::Ok();
}

// A loop kernel's flops (one per op of its scalar program per element) and bytes.
struct LoopWork {
  double flops = 0, bytes = 0;
};
LoopWork WorkOf(const Kernel& kernel) {
  LoopWork w;
  for (const KernelBuffer& b : kernel.buffers) w.bytes += static_cast<double>(b.elements) * DTypeSize(b.dtype);
  double ops = 0;
  for (const ScalarValue& v : kernel.values) ops += v.kind == ScalarValue::Kind::kOp;
  w.flops = ops * static_cast<double>(kernel.outer) * static_cast<double>(kernel.inner);
  return w;
}

// The untuned configuration: the run's team, or the calling thread alone for a kernel whose
// flops and bytes are under the threshold.
CppKernelConfig UntunedConfig(const Kernel& kernel) {
  const LoopWork w = WorkOf(kernel);
  CppKernelConfig config;
  if (RunsOnCallingThread(w.flops, w.bytes)) config.threads = 1;
  return config;
}

// One team size for every parallel region of a run. libgomp re-docks its threads whenever a
// region's team differs from the last one's, and a team far larger than the work waits on its
// slowest thread: on the 16-core host (2026-11-29), examples/matmul_bias_relu ran in 0.18 ms on
// 16 threads, 0.04 ms on 8, and 0.45 ms with its product on 8 and its epilogue on 16. A run's
// team is one thread per kProductFlopsPerThread of its largest product, or per kCallingThreadWork
// of flops + bytes of its largest loop kernel (an attention kernel counts as its products), up to
// OpenMP's default; steps whose work is not counted here (convolutions and pools on oneDNN,
// whose teams oneDNN fixes) keep the default.
constexpr double kProductFlopsPerThread = 1 << 21;

int RunTeamSize(const CpuExecutable::State& s) {
  double threads = 1;
  auto count = [&](const GeneratedCall& call) {  // false: a kernel whose work is not known here
    if (call.product_flops > 0) {
      threads = std::max(threads, std::ceil(call.product_flops / kProductFlopsPerThread));
      return true;
    }
    if (!call.loop_kernel) return false;
    const LoopWork w = WorkOf(*call.loop_kernel);
    threads = std::max(threads, std::ceil((w.flops + w.bytes) / kCallingThreadWork));
    return true;
  };
  for (const Step& step : s.steps) {
    if (step.conv || step.pool || step.channel_mean || step.channel_scale) return 0;
    if (step.kernel && !count(*step.kernel)) return 0;
    for (const GeneratedCall& call : step.prologue)
      if (!count(call)) return 0;
    if (step.matmul >= 0) {
      const Node& mm = s.graph.node(step.matmul);
      const double flops = 2.0 * static_cast<double>(NumElements(mm.shape)) * static_cast<double>(s.graph.node(mm.inputs[0]).shape.back());
      threads = std::max(threads, std::ceil(flops / kProductFlopsPerThread));
    } else if (!step.kernel) {
      return 0;  // on the reference kernels
    }
  }
  return threads >= omp_get_max_threads() ? 0 : static_cast<int>(threads);
}

// A lowered loop kernel under `name`, emitted (with its tuned configuration, if any)
// into the group's source.
GeneratedCall EmitLoopKernel(Kernel kernel, const std::string& name, const std::vector<int>& outputs, const ConfigMap& configs,
                             KernelInfo& info) {
  kernel = SplitPointwiseRows(std::move(kernel));
  kernel.name = name;
  auto config = configs.find(KernelFingerprint(kernel));
  info.source += EmitCppFunction(kernel, config == configs.end() ? UntunedConfig(kernel) : config->second);
  GeneratedCall call;
  call.symbol = name;
  for (const KernelBuffer& b : kernel.buffers) call.buffer_nodes.push_back(b.node);
  call.outputs = outputs;
  if (!CppPrintedSymbols(kernel).empty()) call.symbols = kernel.symbols;
  call.loop_kernel = std::move(kernel);
  return call;
}

// The graph's symbolic sizes for the lowering (the kernels print sizes over them), or none.
const SymbolicShapes* Symbolic(const CpuExecutable::State& state) { return state.symbolic.empty() ? nullptr : &state.symbolic; }

// Pointwise and reduction groups: one loop kernel, or the reference kernels and why not.
void GenerateLoop(const CpuExecutable::State& state, const FusionGroup& group, const std::string& prefix, const ConfigMap& configs,
                  Step& step, KernelInfo& info) {
  StatusOr<Kernel> kernel = LowerGroup(state.graph, group, state.inlined, state.fault, Symbolic(state));
  if (!kernel.ok()) {
    info.why_not = kernel.status().message();
    return;
  }
  std::string name = prefix + kernel->name;
  step.kernel = EmitLoopKernel(std::move(*kernel), name, group.outputs, configs, info);
  info.name = name;
  info.generated = true;
}

// Attention groups: one flash-attention kernel, or the reference kernels and why not.
void GenerateAttention(const CpuExecutable::State& state, const FusionGroup& group, const std::string& prefix, Step& step,
                       KernelInfo& info) {
  StatusOr<AttentionKernel> attention = LowerAttention(state.graph, group, state.inlined, Symbolic(state));
  if (!attention.ok()) {
    info.why_not = attention.status().message();
    return;
  }
  attention->name = prefix + attention->name;
  const AttentionKernel& a = *attention;
  std::vector<int> symbols;
  info.source = EmitCppAttention(a, UnmaskedKeyBlocks(state.graph, {a.logits, a.logit, a.buffers, a.score_batch_index, a.nq, a.nk},
                                                      kCppAttentionQueryBlock, kCppAttentionKeyBlock),
                                 &symbols);
  GeneratedCall call;
  if (!symbols.empty()) call.symbols = a.symbols;
  for (const KernelBuffer& b : attention->buffers) call.buffer_nodes.push_back(b.node);
  call.outputs = group.outputs;
  call.symbol = info.name = attention->name;
  call.product_flops = 2.0 * static_cast<double>(a.batch) * static_cast<double>(a.nq) * static_cast<double>(a.nk) *
                       static_cast<double>(a.d + a.dv);
  step.kernel = std::move(call);
  info.generated = true;
}

// A gemm group's prologue as loop kernels, one per value it materialises (PrologueGroups).
// A part no loop template takes runs on the reference kernels, as before there were
// prologue kernels, and why_not says why.
void GeneratePrologue(const CpuExecutable::State& state, const FusionGroup& group, const GemmSplit& split, const std::string& prefix,
                      const ConfigMap& configs, Step& step, KernelInfo& info) {
  std::vector<bool> on_reference(state.graph.num_nodes(), false);
  for (const FusionGroup& part : PrologueGroups(state.graph, group, split)) {
    StatusOr<Kernel> kernel = LowerGroup(state.graph, part, state.inlined, state.fault, Symbolic(state));
    if (!kernel.ok()) {
      for (int id : part.nodes) on_reference[id] = true;
      info.why_not += fmt::format("{}prologue %{} on the reference kernels: {}", info.why_not.empty() ? "" : "; ", part.outputs[0],
                                  kernel.status().message());
      continue;
    }
    std::string name = fmt::format("{}tf_group{}_prologue{}", prefix, group.id, step.prologue.size());
    step.prologue.push_back(EmitLoopKernel(std::move(*kernel), name, part.outputs, configs, info));
    info.prologue_kernels.push_back(name);
  }
  for (int id : split.prologue)
    if (on_reference[id]) step.reference_prologue.push_back(id);
}

bool IsGroupOnConv(const Graph& g, const FusionGroup& group) {
  return std::any_of(group.nodes.begin(), group.nodes.end(), [&](int id) { return g.node(id).op == OpCode::kConv; });
}

// Gemm groups: prologue kernels, the product through BLAS, the epilogue as a loop kernel.
// An epilogue no loop template takes leaves the whole group to the reference kernels.
void GenerateGemm(const CpuExecutable::State& state, const FusionGroup& group, const std::string& prefix, const ConfigMap& configs,
                  Step& step, KernelInfo& info) {
  GemmSplit split = SplitGemmGroup(state.graph, group);
  std::optional<Kernel> epilogue;
  if (!split.epilogue.nodes.empty()) {
    StatusOr<Kernel> kernel = LowerGroup(state.graph, split.epilogue, state.inlined, state.fault, Symbolic(state));
    if (!kernel.ok()) {
      info.why_not = kernel.status().message();
      return;
    }
    epilogue = std::move(*kernel);
  }
  step.matmul = split.matmul;
  info.generated = true;
  GeneratePrologue(state, group, split, prefix, configs, step, info);
  if (epilogue) {
    std::string name = prefix + epilogue->name;
    step.kernel = EmitLoopKernel(std::move(*epilogue), name, split.epilogue.outputs, configs, info);
    info.name = name;
  }
}

// A constant or inlined generator's value, evaluated once (the Conv's weights and bias, the
// epilogue's per-channel constants).
class ConstantValues {
 public:
  explicit ConstantValues(const CpuExecutable::State& state) : state_(state), values_(state.graph.num_nodes()) {}
  bool IsConstant(int id) const { return state_.graph.node(id).op == OpCode::kConstant || state_.inlined[id]; }
  StatusOr<Tensor> Get(int id) {
    const Node& n = state_.graph.node(id);
    if (n.op == OpCode::kConstant) return *n.attrs.value;
    if (values_[id]) return *values_[id];
    std::vector<Tensor> inputs;
    for (int input : n.inputs) {
      ASSIGN_OR_RETURN(Tensor value, Get(input));
      inputs.push_back(std::move(value));
    }
    std::vector<const Tensor*> args;
    for (const Tensor& t : inputs) args.push_back(&t);
    ASSIGN_OR_RETURN(Tensor value, EvaluateNode(n, args));
    values_[id] = value;
    return value;
  }

 private:
  const CpuExecutable::State& state_;
  std::vector<std::optional<Tensor>> values_;
};

// Gemm groups anchored on a Conv: the prologue as loop kernels, the convolution through
// oneDNN, and the epilogue as its post-ops where it is one of theirs (conv_epilogue.h), else
// as a loop kernel reading the convolution's output. A convolution oneDNN refuses leaves the
// group to the reference kernels, with the reason.
void GenerateConv(const CpuExecutable::State& state, const FusionGroup& group, const std::string& prefix, const ConfigMap& configs,
                  Step& step, KernelInfo& info) {
  GemmSplit split = SplitGemmGroup(state.graph, group);
  const Node& conv = state.graph.node(split.matmul);
  ConstantValues constants(state);
  std::vector<bool> is_constant(state.graph.num_nodes());
  for (int id = 0; id < state.graph.num_nodes(); ++id) is_constant[id] = constants.IsConstant(id);
  const bool constant_weights = is_constant[conv.inputs[1]];
  const bool constant_bias = conv.inputs.size() < 3 || is_constant[conv.inputs[2]];
  StatusOr<ConvEpilogue> post = MatchConvEpilogue(state.graph, conv.id, split.epilogue, is_constant,
                                                  [&](int id) { return constants.Get(id); });
  if (post.ok() && !post->scale.empty() && !(constant_weights && constant_bias))
    post = Unimplemented("the per-channel scale and shift fold only into constant weights and bias");
  ConvEpilogue chosen = post.ok() ? *post : ConvEpilogue{};
  std::optional<Tensor> weights, bias;
  auto load = [&](std::optional<Tensor>& into, int id) -> Status {
    if (!is_constant[id]) return Status::Ok();
    ASSIGN_OR_RETURN(Tensor value, constants.Get(id));
    into = std::move(value);
    return Status::Ok();
  };
  Status loaded = load(weights, conv.inputs[1]);
  if (loaded.ok() && conv.inputs.size() > 2) loaded = load(bias, conv.inputs[2]);
  StatusOr<std::unique_ptr<OnednnConv>> primitive =
      loaded.ok() ? OnednnConv::Create(state.graph, conv, weights ? &*weights : nullptr, bias ? &*bias : nullptr, chosen)
                  : StatusOr<std::unique_ptr<OnednnConv>>(loaded);
  if (!primitive.ok()) {
    info.why_not = primitive.status().message();
    return;
  }
  std::optional<Kernel> epilogue;
  if (!post.ok()) {
    StatusOr<Kernel> kernel = LowerGroup(state.graph, split.epilogue, state.inlined, state.fault, Symbolic(state));
    if (!kernel.ok()) {
      info.why_not = kernel.status().message();
      return;
    }
    epilogue = std::move(*kernel);
  }
  step.matmul = conv.id;
  step.conv = std::move(*primitive);
  step.conv_output = post.ok() ? chosen.output : conv.id;
  step.conv_residual = chosen.residual;
  info.generated = true;
  info.library = step.conv->description();
  if (!post.ok()) info.library += fmt::format("; epilogue as a generated kernel: {}", post.status().message());
  GeneratePrologue(state, group, split, prefix, configs, step, info);
  if (epilogue) {
    std::string name = prefix + epilogue->name;
    step.kernel = EmitLoopKernel(std::move(*epilogue), name, split.epilogue.outputs, configs, info);
    info.name = name;
  }
}

// An opaque group of one f32 pool the passes kept (WindowOpsOptions::keep_f32_pool): a oneDNN
// pooling primitive; one oneDNN refuses stays on the reference kernels, with the reason.
bool IsPoolGroup(const Graph& g, const FusionGroup& group) {
  if (group.kind != GroupKind::kOpaque || group.nodes.size() != 1) return false;
  const Node& n = g.node(group.nodes[0]);
  return (n.op == OpCode::kMaxPool || n.op == OpCode::kAveragePool) && n.dtype == DType::kF32;
}

void GeneratePool(const CpuExecutable::State& state, const FusionGroup& group, Step& step, KernelInfo& info) {
  const Node& pool = state.graph.node(group.nodes[0]);
  StatusOr<std::unique_ptr<OnednnPool>> primitive = OnednnPool::Create(state.graph, pool);
  if (!primitive.ok()) {
    info.why_not = primitive.status().message();
    return;
  }
  step.pool = std::move(*primitive);
  step.pool_node = pool.id;
  info.generated = true;
  info.library = step.pool->description();
}

// Consecutive convolutions keep oneDNN's blocked layout between them instead of reordering
// to NCHW and back: a value a convolution's post-ops write (no epilogue kernel), which is no
// graph output and whose every reader is another oneDNN convolution with its epilogue as
// post-ops, reading it as its input or adding it as its residual, in the same blocked
// layout (OnednnConv::BlockedOutputFeeds). TILEFUSE_ONEDNN_CONV_CHAIN=0 turns it off, for
// the measurement (docs/design-notes.md).
void KeepBlockedBetweenConvolutions(CpuExecutable::State& state) {
  if (SwitchedOff("TILEFUSE_ONEDNN_CONV_CHAIN")) return;
  const Graph& g = state.graph;
  std::vector<std::vector<int>> users = g.ComputeUsers();
  std::vector<bool> is_output(g.num_nodes(), false);
  for (const Graph::Output& o : g.outputs()) is_output[o.node] = true;
  std::vector<int> step_of_group(state.plan.groups.size(), -1);
  for (size_t i = 0; i < state.steps.size(); ++i) step_of_group[state.steps[i].group] = static_cast<int>(i);
  auto post_ops_only = [](const Step& step) { return step.conv && !step.kernel && step.prologue.empty() && step.reference_prologue.empty(); };
  std::vector<bool> changed(state.steps.size(), false);
  const bool squeeze_excitation = !SwitchedOff("TILEFUSE_ONEDNN_SE");
  // The one reader of `value` when it is a post-ops-only convolution reading it as its input
  // in a blocked layout that fits the value's buffer, else nullptr.
  auto conv_reading_blocked = [&](int value) -> Step* {
    if (is_output[value] || users[value].size() != 1) return nullptr;
    const int u = users[value][0];
    const int group = state.plan.group_of[u];
    const int c = group >= 0 ? step_of_group[group] : -1;
    if (c < 0 || !post_ops_only(state.steps[c]) || u != state.steps[c].matmul || g.node(u).inputs[0] != value ||
        std::count(g.node(u).inputs.begin(), g.node(u).inputs.end(), value) != 1 ||
        !OnednnChannelScale::BlockedInputFits(*state.steps[c].conv))
      return nullptr;
    return &state.steps[c];
  };
  for (size_t i = 0; i < state.steps.size(); ++i) {
    Step& producer = state.steps[i];
    if (!post_ops_only(producer)) continue;
    const int value = producer.conv_output;
    if (is_output[value] || users[value].empty()) continue;
    std::vector<std::pair<int, bool>> readers;  // (step, as residual)
    // Squeeze-excitation readers: (step, its oneDNN replacement, the convolution reading its product blocked).
    std::vector<std::tuple<int, std::shared_ptr<const OnednnChannelMean>, std::shared_ptr<const OnednnChannelScale>, Step*>> se;
    bool all = true;
    for (int u : users[value]) {
      const int group = state.plan.group_of[u];
      const int c = group >= 0 ? step_of_group[group] : -1;
      if (squeeze_excitation && c >= 0 && c != static_cast<int>(i) && !state.steps[c].conv && state.steps[c].kernel) {
        const FusionGroup& fg = state.plan.groups[group];
        const Node& reader = g.node(u);
        if (fg.nodes.size() == 1 && reader.op == OpCode::kReduceMean && fg.outputs == std::vector<int>{u}) {
          StatusOr<std::unique_ptr<OnednnChannelMean>> mean = OnednnChannelMean::Create(g, reader, *producer.conv);
          if (mean.ok()) {
            se.emplace_back(c, std::move(*mean), nullptr, nullptr);
            continue;
          }
        }
        if (fg.nodes.size() == 2 && reader.op == OpCode::kMul && fg.outputs == std::vector<int>{u} && reader.inputs.size() == 2 &&
            std::count(reader.inputs.begin(), reader.inputs.end(), value) == 1) {
          const int other = reader.inputs[0] == value ? reader.inputs[1] : reader.inputs[0];
          const Node& bcast = g.node(other);
          const Shape& x = g.node(value).shape;
          if (bcast.op == OpCode::kBroadcast && state.plan.group_of[other] == group && x.size() == 4 &&
              g.node(bcast.inputs[0]).shape == Shape{x[0], x[1], 1, 1} && reader.shape == x) {
            Step* next = conv_reading_blocked(u);
            StatusOr<std::unique_ptr<OnednnChannelScale>> scale =
                OnednnChannelScale::Create(g, reader, *producer.conv, next ? next->conv.get() : nullptr);
            if (scale.ok()) {
              se.emplace_back(c, nullptr, std::move(*scale), next);
              continue;
            }
          }
        }
      }
      if (c < 0 || c == static_cast<int>(i) || !post_ops_only(state.steps[c])) {
        all = false;
        break;
      }
      const Step& consumer = state.steps[c];
      const Node& reader = g.node(u);
      const bool as_src = u == consumer.matmul && reader.inputs[0] == value &&
                          std::count(reader.inputs.begin(), reader.inputs.end(), value) == 1;
      const bool as_residual = u != consumer.matmul && consumer.conv_residual == value && reader.op == OpCode::kAdd;
      if (!(as_src || as_residual) || !producer.conv->BlockedOutputFeeds(*consumer.conv, as_residual)) {
        all = false;
        break;
      }
      readers.push_back({c, as_residual});
    }
    if (!all) continue;
    producer.conv->KeepBlockedOutput();
    changed[i] = true;
    for (auto [c, as_residual] : readers) {
      if (as_residual) state.steps[c].conv->KeepBlockedResidual();
      else state.steps[c].conv->KeepBlockedInput();
      changed[c] = true;
    }
    for (auto& [c, mean, scale, next] : se) {
      Step& step = state.steps[c];
      const FusionGroup& fg = state.plan.groups[step.group];
      step.kernel.reset();
      step.se_node = fg.outputs[0];
      step.se_input = value;
      step.channel_mean = mean;
      step.channel_scale = scale;
      if (scale) {
        const Node& mul = g.node(step.se_node);
        step.se_scale = g.node(mul.inputs[0] == value ? mul.inputs[1] : mul.inputs[0]).inputs[0];  // under the broadcast
      }
      state.kernels[c].library = mean ? mean->description() : scale->description();
      if (next) {
        next->conv->KeepBlockedInput();
        changed[next - state.steps.data()] = true;
      }
    }
  }
  for (size_t i = 0; i < state.steps.size(); ++i)
    if (changed[i]) state.kernels[i].library = state.steps[i].conv->description();
}

// Lowers every group and appends the generated functions (named with `prefix`) to
// `source`; groups no template expresses keep the reference kernels.
void GenerateKernels(CpuExecutable::State& state, const std::string& prefix, const ConfigMap& configs) {
  for (const FusionGroup& group : state.plan.groups) {
    Step step;
    step.group = group.id;
    KernelInfo info;
    info.kind = group.kind;
    info.num_nodes = static_cast<int>(group.nodes.size());
    info.name = fmt::format("group{}_{}", group.id, GroupKindName(group.kind));
    if (group.kind == GroupKind::kAttention) GenerateAttention(state, group, prefix, step, info);
    else if (group.kind == GroupKind::kGemm && IsGroupOnConv(state.graph, group)) GenerateConv(state, group, prefix, configs, step, info);
    else if (group.kind == GroupKind::kGemm) GenerateGemm(state, group, prefix, configs, step, info);
    else if (IsPoolGroup(state.graph, group)) GeneratePool(state, group, step, info);
    else GenerateLoop(state, group, prefix, configs, step, info);
    info.num_reference_nodes = info.generated ? static_cast<int>(step.reference_prologue.size()) : info.num_nodes;
    state.source += info.source;
    state.steps.push_back(std::move(step));
    state.kernels.push_back(std::move(info));
  }
  KeepBlockedBetweenConvolutions(state);
}

Status Link(CpuExecutable::State& state, const std::shared_ptr<const JitLibrary>& library) {
  auto link = [&](GeneratedCall& call) -> Status {
    ASSIGN_OR_RETURN(call.function, library->Function<void(void* const*)>(call.symbol));
    return Status::Ok();
  };
  for (Step& step : state.steps) {
    for (GeneratedCall& call : step.prologue) RETURN_IF_ERROR(link(call));
    if (step.kernel) RETURN_IF_ERROR(link(*step.kernel));
  }
  state.libraries.push_back(library);
  return Status::Ok();
}

// One graph lowered for the CPU: the executable's state before linking.
class CpuLoweredGraph : public LoweredGraph {
 public:
  explicit CpuLoweredGraph(std::unique_ptr<CpuExecutable::State> state) : state_(std::move(state)) {}
  const FusionPlan& plan() const override { return state_->plan; }
  std::vector<LoweredKernel> Kernels() const override {
    std::vector<LoweredKernel> kernels;
    for (const Step& step : state_->steps) {
      for (const GeneratedCall& call : step.prologue) kernels.push_back({&*call.loop_kernel, false});
      if (step.kernel && step.kernel->loop_kernel) kernels.push_back({&*step.kernel->loop_kernel, false});
    }
    return kernels;
  }
  std::string SourceText() const override { return state_->source; }
  CpuExecutable::State& state() { return *state_; }
  std::unique_ptr<CpuExecutable::State> Release() { return std::move(state_); }

 private:
  std::unique_ptr<CpuExecutable::State> state_;
};

// One host-compiler run's shared object.
struct CpuObjectCode : ObjectCode {
  std::shared_ptr<const JitLibrary> library;
  int64_t compiles = 0;  // how many of the JIT's compiles were not cache hits
};

}  // namespace

StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuCompileOptions& options) {
  HostJitOptions jit_options;
  if (!options.cache_dir.empty()) jit_options.cache_dir = options.cache_dir;
  ASSIGN_OR_RETURN(HostJit jit, HostJit::Create(jit_options));
  return std::unique_ptr<CpuBackend>(new CpuBackend(options, std::move(jit)));
}

StatusOr<PlannedGraph> PlanFusionForCpu(const Graph& graph, PlannerOptions options) {
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(graph, options));
  const std::vector<bool> inlined = FindInlinedGenerators(graph);
  std::vector<std::string> notes;
  for (const FusionGroup& group : plan.groups) {
    if (group.kind != GroupKind::kAttention) continue;
    StatusOr<AttentionKernel> attention = LowerAttention(graph, group, inlined);
    if (attention.ok()) continue;
    options.no_attention_at.insert(group.nodes.front());
    notes.push_back(fmt::format("%{}: the CPU flash-attention kernel does not take it, planned as its parts: {}", group.nodes.front(),
                                attention.status().message()));
  }
  if (notes.empty()) return PlannedGraph{std::move(plan), {}};
  ASSIGN_OR_RETURN(plan, PlanFusion(graph, options));
  plan.missed_attention.insert(plan.missed_attention.end(), notes.begin(), notes.end());
  return PlannedGraph{std::move(plan), std::move(notes)};
}

StatusOr<PlannedGraph> CpuBackend::Plan(const Graph& graph, PlannerOptions options) {
  options.device = options_.device;
  return PlanFusionForCpu(graph, options);
}

StatusOr<std::unique_ptr<LoweredGraph>> CpuBackend::Lower(const Graph& graph, PlannedGraph planned, const std::string& prefix) {
  auto state = std::make_unique<CpuExecutable::State>();
  state->graph = graph;
  state->plan = std::move(planned.plan);
  state->plan_notes = std::move(planned.notes);
  state->inlined = FindInlinedGenerators(state->graph);
  if (!SwitchedOff("TILEFUSE_SYMBOLIC_SIZES")) state->symbolic = InferSymbolicShapes(state->graph);
  state->poison_outputs = options_.poison_outputs;
  state->fault = options_.fault;
  state->cache_dir = options_.cache_dir;
  GenerateKernels(*state, prefix, options_.configs);
  state->team_size = RunTeamSize(*state);
  RETURN_IF_ERROR(PlanArena(*state));
  return std::unique_ptr<LoweredGraph>(new CpuLoweredGraph(std::move(state)));
}

StatusOr<std::unique_ptr<ObjectCode>> CpuBackend::Build(const std::vector<const LoweredGraph*>& graphs) {
  std::string source = CppPrelude();
  for (const LoweredGraph* g : graphs) source += g->SourceText();
  auto code = std::make_unique<CpuObjectCode>();
  int64_t before = jit_.compiles();
  ASSIGN_OR_RETURN(code->library, jit_.Compile(source));
  code->compiles = jit_.compiles() - before;
  return std::unique_ptr<ObjectCode>(std::move(code));
}

StatusOr<std::unique_ptr<Executable>> CpuBackend::Load(std::unique_ptr<LoweredGraph> graph, const ObjectCode& code) {
  auto* lowered = dynamic_cast<CpuLoweredGraph*>(graph.get());
  auto* object = dynamic_cast<const CpuObjectCode*>(&code);
  TF_CHECK(lowered && object);
  std::unique_ptr<CpuExecutable::State> state = lowered->Release();
  RETURN_IF_ERROR(Link(*state, object->library));
  RETURN_IF_ERROR(EvaluateGenerators(state->graph, state->inlined, NodesReadingMemory(*state), state->generator_values));
  state->jit_compiles = object->compiles;
  return std::unique_ptr<Executable>(new CpuExecutable(std::move(state)));
}

}  // namespace tilefuse

#include "runtime/compiled_graph.h"
#include "runtime/compiled_graph_state.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <fmt/format.h>

#include "backend/cpu/blas_matmul.h"
#include "backend/cpu/host_jit.h"
#include "backend/cpu/interpreter.h"
#include "codegen/attention_lower.h"
#include "codegen/cpp_attention_emitter.h"
#include "codegen/cpp_emitter.h"
#include "codegen/cpp_prelude.h"
#include "codegen/lower.h"
#include "codegen/split_rows.h"
#include "fusion/group_classifier.h"
#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "codegen/gemm_split.h"
#include "runtime/memory_plan.h"
#include "support/host_memory.h"

namespace tilefuse {

namespace {

using Clock = std::chrono::steady_clock;

double MicrosecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

using compiled_graph_internal::GeneratedCall;
using compiled_graph_internal::KernelFunction;
using compiled_graph_internal::Step;
using ConfigMap = std::map<std::string, CppKernelConfig>;

}  // namespace

CompiledGraph::CompiledGraph(std::unique_ptr<State> state) : state_(std::move(state)) {}
CompiledGraph::~CompiledGraph() = default;
const Graph& CompiledGraph::graph() const { return state_->graph; }
const FusionPlan& CompiledGraph::plan() const { return state_->plan; }
const std::vector<KernelInfo>& CompiledGraph::kernels() const { return state_->kernels; }
double CompiledGraph::compile_ms() const { return state_->compile_ms; }
int64_t CompiledGraph::jit_compiles() const { return state_->jit_compiles; }
int64_t CompiledGraph::arena_bytes() const { return state_->memory.arena_bytes; }

namespace {

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

}  // namespace

namespace {

// Plans fusion for one graph; kernels and memory come later.
StatusOr<std::unique_ptr<CompiledGraph::State>> PlanGraph(const Graph& graph, const CompileOptions& options) {
  auto state = std::make_unique<CompiledGraph::State>();
  state->graph = graph;
  state->poison_outputs = options.poison_outputs;
  state->fault = options.fault;
  if (options.plan_override) {
    if (options.plan_override->group_of.size() != static_cast<size_t>(graph.num_nodes()))
      return InvalidArgument("the plan to compile was made for another graph");
    RETURN_IF_ERROR(VerifyPlan(graph, *options.plan_override));
    state->plan = *options.plan_override;
  } else {
    PlannerOptions planner;
    planner.device = options.device;
    planner.fuse = options.fuse;
    planner.disabled_kinds = options.disabled_kinds;
    ASSIGN_OR_RETURN(state->plan, PlanFusion(state->graph, planner));
  }
  state->inlined = FindInlinedGenerators(state->graph);
  return state;
}

// The nodes whose inputs a run must hold in memory, generators included: those on the
// reference kernels (whole groups without a generated kernel, prologue parts), and the
// products, which BLAS reads where they are.
std::vector<int> NodesReadingMemory(const CompiledGraph::State& state) {
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
Status CheckGraphFitsHost(const CompiledGraph::State& state) {
  const Graph& graph = state.graph;
  std::vector<int> held(graph.inputs().begin(), graph.inputs().end());
  std::vector<int> on_reference = NodesReadingMemory(state);
  for (const Step& step : state.steps) {
    for (const GeneratedCall& call : step.prologue) held.insert(held.end(), call.outputs.begin(), call.outputs.end());
    if (step.kernel) held.insert(held.end(), step.kernel->outputs.begin(), step.kernel->outputs.end());
    if (step.matmul >= 0) held.push_back(step.matmul);
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

// Intermediates share one arena by liveness: the plan's, and the values gemm steps
// materialise inside their group (prologue outputs, the product), live during their own
// step only. Allocated once here, so a run page-faults nothing.
Status PlanArena(CompiledGraph::State& state) {
  Schedule schedule = ScheduleFromFusionPlan(state.graph, state.plan);
  std::vector<std::vector<int>> local_values(state.steps.size());
  for (size_t i = 0; i < state.steps.size(); ++i) {
    const Step& step = state.steps[i];
    if (step.matmul < 0) continue;
    for (const GeneratedCall& call : step.prologue)
      local_values[i].insert(local_values[i].end(), call.outputs.begin(), call.outputs.end());
    local_values[i].push_back(step.matmul);
  }
  AddStepLocalBuffers(state.graph, local_values, schedule);
  ASSIGN_OR_RETURN(state.memory, PlanMemory(schedule));
  state.arena_offset.assign(state.graph.num_nodes(), -1);
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (state.memory.offsets[b] >= 0) state.arena_offset[schedule.buffers[b].node] = state.memory.offsets[b];
  RETURN_IF_ERROR(CheckGraphFitsHost(state));
  state.arena.resize(state.memory.arena_bytes);
  return Status::Ok();
}

// A lowered loop kernel under `name`, emitted (with its tuned configuration, if any)
// into the group's source.
GeneratedCall EmitLoopKernel(Kernel kernel, const std::string& name, const std::vector<int>& outputs, const ConfigMap& configs,
                             KernelInfo& info) {
  kernel = SplitPointwiseRows(std::move(kernel));
  kernel.name = name;
  auto config = configs.find(name);
  info.source += EmitCppFunction(kernel, config == configs.end() ? CppKernelConfig{} : config->second);
  GeneratedCall call;
  call.symbol = name;
  for (const KernelBuffer& b : kernel.buffers) call.buffer_nodes.push_back(b.node);
  call.outputs = outputs;
  call.loop_kernel = std::move(kernel);
  return call;
}

// Pointwise and reduction groups: one loop kernel, or the reference kernels and why not.
void GenerateLoop(const CompiledGraph::State& state, const FusionGroup& group, const std::string& prefix, const ConfigMap& configs,
                  Step& step, KernelInfo& info) {
  StatusOr<Kernel> kernel = LowerGroup(state.graph, group, state.inlined, state.fault);
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
void GenerateAttention(const CompiledGraph::State& state, const FusionGroup& group, const std::string& prefix, Step& step,
                       KernelInfo& info) {
  StatusOr<AttentionKernel> attention = LowerAttention(state.graph, group, state.inlined);
  if (!attention.ok()) {
    info.why_not = attention.status().message();
    return;
  }
  attention->name = prefix + attention->name;
  const AttentionKernel& a = *attention;
  info.source = EmitCppAttention(a, UnmaskedKeyBlocks(state.graph, {a.logits, a.logit, a.buffers, a.score_batch_index, a.nq, a.nk},
                                                      kCppAttentionQueryBlock, kCppAttentionKeyBlock));
  GeneratedCall call;
  for (const KernelBuffer& b : attention->buffers) call.buffer_nodes.push_back(b.node);
  call.outputs = group.outputs;
  call.symbol = info.name = attention->name;
  step.kernel = std::move(call);
  info.generated = true;
}

// A gemm group's prologue as loop kernels, one per value it materialises (PrologueGroups).
// A part no loop template takes runs on the reference kernels, as before there were
// prologue kernels, and why_not says why.
void GeneratePrologue(const CompiledGraph::State& state, const FusionGroup& group, const GemmSplit& split, const std::string& prefix,
                      const ConfigMap& configs, Step& step, KernelInfo& info) {
  std::vector<bool> on_reference(state.graph.num_nodes(), false);
  for (const FusionGroup& part : PrologueGroups(state.graph, group, split)) {
    StatusOr<Kernel> kernel = LowerGroup(state.graph, part, state.inlined, state.fault);
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

// Gemm groups: prologue kernels, the product through BLAS, the epilogue as a loop kernel.
// An epilogue no loop template takes leaves the whole group to the reference kernels.
void GenerateGemm(const CompiledGraph::State& state, const FusionGroup& group, const std::string& prefix, const ConfigMap& configs,
                  Step& step, KernelInfo& info) {
  GemmSplit split = SplitGemmGroup(state.graph, group);
  std::optional<Kernel> epilogue;
  if (!split.epilogue.nodes.empty()) {
    StatusOr<Kernel> kernel = LowerGroup(state.graph, split.epilogue, state.inlined, state.fault);
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

// Lowers every group and appends the generated functions (named with `prefix`) to
// `source`; groups no template expresses keep the reference kernels.
void GenerateKernels(CompiledGraph::State& state, const std::string& prefix, const ConfigMap& configs, std::string& source) {
  for (const FusionGroup& group : state.plan.groups) {
    Step step;
    step.group = group.id;
    KernelInfo info;
    info.kind = group.kind;
    info.num_nodes = static_cast<int>(group.nodes.size());
    info.name = fmt::format("group{}_{}", group.id, GroupKindName(group.kind));
    if (group.kind == GroupKind::kAttention) GenerateAttention(state, group, prefix, step, info);
    else if (group.kind == GroupKind::kGemm) GenerateGemm(state, group, prefix, configs, step, info);
    else GenerateLoop(state, group, prefix, configs, step, info);
    info.num_reference_nodes = info.generated ? static_cast<int>(step.reference_prologue.size()) : info.num_nodes;
    source += info.source;
    state.steps.push_back(std::move(step));
    state.kernels.push_back(std::move(info));
  }
}

Status Link(CompiledGraph::State& state, const std::shared_ptr<const JitLibrary>& library) {
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

}  // namespace

StatusOr<std::unique_ptr<CompiledGraph>> CompiledGraph::Compile(const Graph& graph, const CompileOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<CompiledGraph>> compiled, CompileBatch({graph}, options));
  return std::move(compiled[0]);
}

StatusOr<std::vector<std::unique_ptr<CompiledGraph>>> CompiledGraph::CompileBatch(const std::vector<Graph>& graphs,
                                                                                  const CompileOptions& options) {
  auto start = Clock::now();
  HostJitOptions jit_options;
  if (!options.cache_dir.empty()) jit_options.cache_dir = options.cache_dir;
  ASSIGN_OR_RETURN(HostJit jit, HostJit::Create(jit_options));
  // Every kernel of every graph goes into one translation unit: one compiler run.
  std::string source = CppPrelude();
  std::vector<std::unique_ptr<State>> states;
  for (size_t i = 0; i < graphs.size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<State> state, PlanGraph(graphs[i], options));
    state->cache_dir = options.cache_dir;
    GenerateKernels(*state, graphs.size() > 1 ? fmt::format("g{}_", i) : "", options.configs, source);
    RETURN_IF_ERROR(PlanArena(*state));
    states.push_back(std::move(state));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const JitLibrary> library, jit.Compile(source));
  std::vector<std::unique_ptr<CompiledGraph>> compiled;
  for (std::unique_ptr<State>& state : states) {
    RETURN_IF_ERROR(Link(*state, library));
    RETURN_IF_ERROR(EvaluateGenerators(state->graph, state->inlined, NodesReadingMemory(*state), state->generator_values));
    state->jit_compiles = jit.compiles();
    state->compile_ms = MicrosecondsBetween(start, Clock::now()) / 1000;
    compiled.push_back(std::unique_ptr<CompiledGraph>(new CompiledGraph(std::move(state))));
  }
  return compiled;
}

namespace {

// A tensor's bytes copied out of raw memory (arena intermediates read by a reference step).
Tensor CopyToTensor(const Node& n, const void* data) {
  Tensor t = Tensor::Uninitialized(n.dtype, n.shape);
  std::memcpy(t.data(), data, t.num_bytes());
  return t;
}

// A run's values live either as tensors (inputs, constants, graph outputs, reference-step
// results) or as raw arena memory (where `memory` is non-null).
void* Address(int node, std::vector<Tensor>& tensors, const std::vector<void*>& memory) {
  return memory[node] ? memory[node] : tensors[node].data();
}

// A node's value as a tensor (copied out of the arena when it lives there).
Tensor TensorOf(const Graph& g, int node, const std::vector<Tensor>& tensors, const std::vector<void*>& memory) {
  return memory[node] ? CopyToTensor(g.node(node), memory[node]) : tensors[node];
}

// Runs `nodes` one by one on the reference kernels.
Status RunReferenceNodes(const Graph& g, const std::vector<int>& nodes, std::vector<Tensor>& tensors, const std::vector<void*>& memory) {
  for (int id : nodes) {
    std::vector<Tensor> copies;  // arena values this reference step reads
    copies.reserve(g.node(id).inputs.size());
    std::vector<const Tensor*> args;
    for (int input : g.node(id).inputs) {
      copies.push_back(TensorOf(g, input, tensors, memory));
      args.push_back(&copies.back());
    }
    ASSIGN_OR_RETURN(tensors[id], EvaluateNode(g.node(id), args));
  }
  return Status::Ok();
}

// Where a step is about to write `node`: its arena bytes, or a fresh tensor (graph
// outputs). The step writes every element; the poisoned-output mode fills them with NaN
// bits first so the tests hold it to that.
void* PlaceOutput(CompiledGraph::State& s, int node, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
  const Node& n = s.graph.node(node);
  if (int64_t offset = s.arena_offset[node]; offset >= 0) {
    memory[node] = s.arena.data() + offset;
  } else {
    tensors[node] = Tensor::Uninitialized(n.dtype, n.shape);
  }
  void* at = Address(node, tensors, memory);
  if (s.poison_outputs) std::memset(at, 0xFF, NumElements(n.shape) * DTypeSize(n.dtype));
  return at;
}

void Call(CompiledGraph::State& s, const GeneratedCall& call, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
  for (int out : call.outputs) PlaceOutput(s, out, tensors, memory);
  std::vector<void*> buffers;
  buffers.reserve(call.buffer_nodes.size());
  for (int node : call.buffer_nodes) buffers.push_back(Address(node, tensors, memory));
  call.function(buffers.data());
}

// A gemm step up to its epilogue: the prologue materialises the operands computed in the
// group, then BLAS reads every operand where it lives and writes the product in place.
Status RunPrologueAndProduct(CompiledGraph::State& s, const Step& step, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
  RETURN_IF_ERROR(RunReferenceNodes(s.graph, step.reference_prologue, tensors, memory));
  for (const GeneratedCall& call : step.prologue) Call(s, call, tensors, memory);
  const Node& mm = s.graph.node(step.matmul);
  void* product = PlaceOutput(s, mm.id, tensors, memory);
  BlasMatmul(s.graph, mm, Address(mm.inputs[0], tensors, memory), Address(mm.inputs[1], tensors, memory), product);
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<Tensor>> CompiledGraph::Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings) {
  const Graph& g = state_->graph;
  if (inputs.size() != g.inputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs, got {}", g.inputs().size(), inputs.size()));
  state_->last_tensors.clear();  // the previous run's values, freed before this one allocates
  state_->last_memory.clear();
  std::vector<Tensor> tensors = state_->generator_values;  // shares the constants' bytes
  std::vector<void*> memory(g.num_nodes(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& p = g.node(g.inputs()[i]);
    if (inputs[i].dtype() != p.dtype || inputs[i].shape() != p.shape)
      return InvalidArgument(fmt::format("input '{}' expects {}{}, got {}{}", p.name, DTypeName(p.dtype),
                                         ShapeToString(p.shape), DTypeName(inputs[i].dtype()), ShapeToString(inputs[i].shape())));
    tensors[p.id] = inputs[i];
  }
  for (const Step& step : state_->steps) {
    auto begin = Clock::now();
    if (step.matmul >= 0) RETURN_IF_ERROR(RunPrologueAndProduct(*state_, step, tensors, memory));
    if (step.kernel) Call(*state_, *step.kernel, tensors, memory);
    else if (step.matmul < 0) RETURN_IF_ERROR(RunReferenceNodes(g, state_->plan.groups[step.group].nodes, tensors, memory));
    if (timings) timings->push_back({state_->kernels[step.group].name, 0, MicrosecondsBetween(begin, Clock::now())});
  }
  std::vector<Tensor> outputs;
  for (const Graph::Output& o : g.outputs())
    outputs.push_back(memory[o.node] ? CopyToTensor(g.node(o.node), memory[o.node]) : tensors[o.node]);
  state_->last_tensors = std::move(tensors);
  state_->last_memory = std::move(memory);
  return outputs;
}

const GeneratedCall* compiled_graph_internal::FindLoopKernel(const std::vector<Step>& steps, const std::string& name) {
  for (const Step& step : steps) {
    for (const GeneratedCall& call : step.prologue)
      if (call.symbol == name) return &call;
    if (step.kernel && step.kernel->loop_kernel && step.kernel->symbol == name) return &*step.kernel;
  }
  return nullptr;
}

const Kernel* CompiledGraph::LoopKernel(const std::string& name) const {
  const GeneratedCall* call = compiled_graph_internal::FindLoopKernel(state_->steps, name);
  return call ? &*call->loop_kernel : nullptr;
}

StatusOr<std::vector<double>> CompiledGraph::GroupTimesUs(const std::vector<Tensor>& inputs) {
  // Per group, the median over a few runs (the first one warms up).
  constexpr int kRuns = 6;
  std::vector<std::vector<double>> samples(state_->steps.size());
  for (int run = 0; run < kRuns; ++run) {
    std::vector<KernelTiming> timings;
    ASSIGN_OR_RETURN(std::vector<Tensor> unused, Run(inputs, &timings));
    if (run == 0) continue;
    for (size_t g = 0; g < timings.size() && g < samples.size(); ++g) samples[g].push_back(timings[g].duration_us);
  }
  std::vector<double> out;
  for (std::vector<double>& v : samples) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

}  // namespace tilefuse

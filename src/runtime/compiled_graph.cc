#include "runtime/compiled_graph.h"
#include "runtime/compiled_graph_state.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <fmt/format.h>

#include "backend/cpu/blas_matmul.h"
#include "backend/cpu/host_jit.h"
#include "backend/cpu/interpreter.h"
#include "codegen/attention_lower.h"
#include "codegen/cpp_attention_emitter.h"
#include "codegen/cpp_emitter.h"
#include "codegen/cpp_prelude.h"
#include "codegen/lower.h"
#include "fusion/group_classifier.h"
#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "codegen/gemm_split.h"
#include "runtime/memory_plan.h"

namespace tilefuse {

namespace {

using Clock = std::chrono::steady_clock;

double MicrosecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

using compiled_graph_internal::KernelFunction;
using compiled_graph_internal::Step;

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

// Constants, and the inlined generators that nodes run on the reference kernels read
// (generated kernels recompute generators inline, so a causal mask the size of the
// scores is only materialised when a reference step needs it).
Status EvaluateGenerators(const Graph& g, const std::vector<bool>& inlined, const std::vector<int>& reference_nodes,
                          std::vector<Tensor>& values) {
  std::vector<bool> needed(g.num_nodes(), false);
  for (int id : reference_nodes)
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

// Plans fusion and memory for one graph; kernels come later.
StatusOr<std::unique_ptr<CompiledGraph::State>> PlanGraph(const Graph& graph, const CompileOptions& options) {
  auto state = std::make_unique<CompiledGraph::State>();
  state->graph = graph;
  state->poison_outputs = options.poison_outputs;
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
  Schedule schedule = ScheduleFromFusionPlan(state->graph, state->plan);
  ASSIGN_OR_RETURN(state->memory, PlanMemory(schedule));
  state->arena_offset.assign(state->graph.num_nodes(), -1);
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (state->memory.offsets[b] >= 0) state->arena_offset[schedule.buffers[b].node] = state->memory.offsets[b];
  state->arena.resize(state->memory.arena_bytes);
  return state;
}

// Attention groups: one flash-attention kernel, or the reference kernels and why not.
void GenerateAttention(const CompiledGraph::State& state, const FusionGroup& group, const std::string& prefix, Step& step,
                       KernelInfo& info, std::string& source) {
  StatusOr<AttentionKernel> attention = LowerAttention(state.graph, group, state.inlined);
  if (!attention.ok()) {
    info.why_not = attention.status().message();
    return;
  }
  attention->name = prefix + attention->name;
  const AttentionKernel& a = *attention;
  info.source = EmitCppAttention(a, UnmaskedKeyBlocks(state.graph, {a.logits, a.logit, a.buffers, a.score_batch_index, a.nq, a.nk},
                                                      kCppAttentionQueryBlock, kCppAttentionKeyBlock));
  source += info.source;
  for (const KernelBuffer& b : attention->buffers) step.buffer_nodes.push_back(b.node);
  step.outputs = group.outputs;
  step.symbol = info.name = attention->name;
  info.generated = true;
}

// Lowers every group and appends the generated functions (named with `prefix`) to
// `source`; groups no loop template expresses keep the reference kernels.
void GenerateKernels(CompiledGraph::State& state, const std::string& prefix, const std::map<std::string, CppKernelConfig>& configs,
                     std::string& source) {
  for (const FusionGroup& group : state.plan.groups) {
    Step step;
    step.group = group.id;
    KernelInfo info;
    info.kind = group.kind;
    info.num_nodes = static_cast<int>(group.nodes.size());
    info.name = fmt::format("group{}_{}", group.id, GroupKindName(group.kind));
    if (group.kind == GroupKind::kAttention) {
      GenerateAttention(state, group, prefix, step, info, source);
      state.steps.push_back(std::move(step));
      state.kernels.push_back(std::move(info));
      continue;
    }
    FusionGroup loop_group = group;
    if (group.kind == GroupKind::kGemm) {
      GemmSplit split = SplitGemmGroup(state.graph, group);
      step.matmul = split.matmul;
      step.prologue = split.prologue;
      loop_group = split.epilogue;
    }
    StatusOr<Kernel> kernel = loop_group.nodes.empty() ? StatusOr<Kernel>(Unimplemented("no epilogue"))
                                                       : LowerGroup(state.graph, loop_group, state.inlined);
    if (group.kind == GroupKind::kGemm) {
      info.generated = kernel.ok() || loop_group.nodes.empty();
      info.why_not = info.generated ? "" : kernel.status().message();
      if (!info.generated) step.matmul = -1;  // the whole group on the reference kernels
    }
    if (kernel.ok() && (group.kind != GroupKind::kGemm || step.matmul >= 0)) {
      kernel->name = prefix + kernel->name;
      auto config = configs.find(kernel->name);
      info.source = EmitCppFunction(*kernel, config == configs.end() ? CppKernelConfig{} : config->second);
      source += info.source;
      for (const KernelBuffer& b : kernel->buffers) step.buffer_nodes.push_back(b.node);
      step.outputs = loop_group.outputs;
      step.symbol = kernel->name;
      info.generated = true;
      info.name = kernel->name;
      step.loop_kernel = std::move(*kernel);
    } else if (group.kind != GroupKind::kGemm) {
      info.why_not = kernel.status().message();
    }
    state.steps.push_back(std::move(step));
    state.kernels.push_back(std::move(info));
  }
}

// The nodes a run evaluates on the reference kernels: whole groups without a generated
// kernel, and the prologue and product of gemm groups.
std::vector<int> ReferenceNodes(const CompiledGraph::State& state) {
  std::vector<int> nodes;
  for (const Step& step : state.steps) {
    if (step.matmul >= 0) {
      nodes.insert(nodes.end(), step.prologue.begin(), step.prologue.end());
      nodes.push_back(step.matmul);
    } else if (!step.function) {
      const std::vector<int>& members = state.plan.groups[step.group].nodes;
      nodes.insert(nodes.end(), members.begin(), members.end());
    }
  }
  return nodes;
}

Status Link(CompiledGraph::State& state, const std::shared_ptr<const JitLibrary>& library) {
  for (Step& step : state.steps) {
    if (step.symbol.empty()) continue;
    ASSIGN_OR_RETURN(step.function, library->Function<void(void* const*)>(step.symbol));
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
    states.push_back(std::move(state));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const JitLibrary> library, jit.Compile(source));
  std::vector<std::unique_ptr<CompiledGraph>> compiled;
  for (std::unique_ptr<State>& state : states) {
    RETURN_IF_ERROR(Link(*state, library));
    RETURN_IF_ERROR(EvaluateGenerators(state->graph, state->inlined, ReferenceNodes(*state), state->generator_values));
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

}  // namespace

Status CompiledGraph::RunReferenceNodes(const std::vector<int>& nodes, std::vector<Tensor>& tensors,
                                        const std::vector<void*>& memory) const {
  const Graph& g = state_->graph;
  for (int id : nodes) {
    std::vector<Tensor> copies;  // arena values this reference step reads
    copies.reserve(g.node(id).inputs.size());
    std::vector<const Tensor*> args;
    for (int input : g.node(id).inputs) {
      copies.push_back(TensorOf(input, tensors, memory));
      args.push_back(&copies.back());
    }
    ASSIGN_OR_RETURN(tensors[id], EvaluateNode(g.node(id), args));
  }
  return Status::Ok();
}

Tensor CompiledGraph::TensorOf(int node, const std::vector<Tensor>& tensors, const std::vector<void*>& memory) const {
  return memory[node] ? CopyToTensor(state_->graph.node(node), memory[node]) : tensors[node];
}

StatusOr<std::vector<Tensor>> CompiledGraph::Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings) {
  const Graph& g = state_->graph;
  if (inputs.size() != g.inputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs, got {}", g.inputs().size(), inputs.size()));
  state_->last_tensors.clear();  // the previous run's values, freed before this one allocates
  state_->last_memory.clear();
  // Values live either as tensors (inputs, constants, graph outputs, reference-step
  // results) or as raw arena memory (intermediates of generated kernels).
  std::vector<Tensor> tensors = state_->generator_values;  // shares the constants' bytes
  std::vector<void*> memory(g.num_nodes(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& p = g.node(g.inputs()[i]);
    if (inputs[i].dtype() != p.dtype || inputs[i].shape() != p.shape)
      return InvalidArgument(fmt::format("input '{}' expects {}{}, got {}{}", p.name, DTypeName(p.dtype),
                                         ShapeToString(p.shape), DTypeName(inputs[i].dtype()), ShapeToString(inputs[i].shape())));
    tensors[p.id] = inputs[i];
  }
  auto address = [&](int node) -> void* { return memory[node] ? memory[node] : tensors[node].data(); };
  for (const Step& step : state_->steps) {
    const FusionGroup& group = state_->plan.groups[step.group];
    auto begin = Clock::now();
    if (step.matmul >= 0) {
      RETURN_IF_ERROR(RunReferenceNodes(step.prologue, tensors, memory));
      const Node& mm = g.node(step.matmul);
      tensors[mm.id] = Tensor::Uninitialized(mm.dtype, mm.shape);  // BLAS writes every element
      BlasMatmul(mm, TensorOf(mm.inputs[0], tensors, memory), TensorOf(mm.inputs[1], tensors, memory), tensors[mm.id].data());
    }
    if (step.function) {
      for (int out : step.outputs) {
        const Node& n = g.node(out);
        int64_t offset = state_->arena_offset[out];
        if (offset >= 0) {
          memory[out] = state_->arena.data() + offset;
          if (state_->poison_outputs) std::memset(memory[out], 0xFF, NumElements(n.shape) * DTypeSize(n.dtype));
        } else {
          // The kernel writes every element (the poisoned-output tests hold it to that).
          tensors[out] = Tensor::Uninitialized(n.dtype, n.shape);
          if (state_->poison_outputs) tensors[out].Poison();
        }
      }
      std::vector<void*> buffers;
      for (int node : step.buffer_nodes) buffers.push_back(address(node));
      step.function(buffers.data());
    } else if (step.matmul < 0) {
      RETURN_IF_ERROR(RunReferenceNodes(group.nodes, tensors, memory));
    }
    if (timings) timings->push_back({state_->kernels[step.group].name, 0, MicrosecondsBetween(begin, Clock::now())});
  }
  std::vector<Tensor> outputs;
  for (const Graph::Output& o : g.outputs())
    outputs.push_back(memory[o.node] ? CopyToTensor(g.node(o.node), memory[o.node]) : tensors[o.node]);
  state_->last_tensors = std::move(tensors);
  state_->last_memory = std::move(memory);
  return outputs;
}

const Kernel* CompiledGraph::LoopKernel(const std::string& name) const {
  for (const Step& step : state_->steps)
    if (step.loop_kernel && step.symbol == name) return &*step.loop_kernel;
  return nullptr;
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

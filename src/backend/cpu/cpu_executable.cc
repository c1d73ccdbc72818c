#include "backend/cpu/cpu_executable.h"
#include "backend/cpu/cpu_executable_state.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <omp.h>
#include <fmt/format.h>

#include "backend/cpu/blas_matmul.h"
#include "reference/interpreter.h"
#include "runtime/measure.h"

namespace tilefuse {

namespace {

using Clock = std::chrono::steady_clock;

double MicrosecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

using cpu_executable_internal::GeneratedCall;
using cpu_executable_internal::Step;

}  // namespace

CpuExecutable::CpuExecutable(std::unique_ptr<State> state) : state_(std::move(state)) {}
CpuExecutable::~CpuExecutable() = default;
const Graph& CpuExecutable::graph() const { return state_->graph; }
const FusionPlan& CpuExecutable::plan() const { return state_->plan; }
const std::vector<KernelInfo>& CpuExecutable::kernels() const { return state_->kernels; }
const std::vector<std::string>& CpuExecutable::plan_notes() const { return state_->plan_notes; }
int64_t CpuExecutable::jit_compiles() const { return state_->jit_compiles; }
int CpuExecutable::team_size() const { return state_->team_size; }

std::vector<std::string> CpuExecutable::ReferenceWarnings() const {
  const Graph& g = state_->graph;
  std::vector<std::string> warnings;
  for (size_t i = 0; i < state_->steps.size(); ++i) {
    const Step& step = state_->steps[i];
    const KernelInfo& info = state_->kernels[i];
    std::vector<int> nodes = info.generated ? step.reference_prologue : state_->plan.groups[step.group].nodes;
    if (nodes.empty()) continue;
    // The ops that compute something first: views and broadcasts only move what they read.
    std::stable_partition(nodes.begin(), nodes.end(), [&](int id) {
      OpKind kind = g.node(id).info().kind;
      return kind != OpKind::View && kind != OpKind::Broadcast;
    });
    std::string ops;
    for (size_t n = 0; n < std::min<size_t>(nodes.size(), 3); ++n) {
      const Node& node = g.node(nodes[n]);
      ops += fmt::format("{}{} %{}{}", n ? ", " : "", OpName(node.op), node.id, node.name.empty() ? "" : " '" + node.name + "'");
    }
    if (nodes.size() > 3) ops += fmt::format(" and {} more", nodes.size() - 3);
    warnings.push_back(fmt::format("group {} ({}{}) runs {} on the reference interpreter: {}", step.group, GroupKindName(info.kind),
                                   info.generated ? ", its prologue" : "", ops, info.why_not));
  }
  return warnings;
}
int64_t CpuExecutable::arena_bytes() const { return state_->memory.arena_bytes; }

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
void* PlaceOutput(CpuExecutable::State& s, int node, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
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

void Call(CpuExecutable::State& s, const GeneratedCall& call, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
  for (int out : call.outputs) PlaceOutput(s, out, tensors, memory);
  std::vector<void*> buffers;
  buffers.reserve(call.buffer_nodes.size());
  for (int node : call.buffer_nodes) buffers.push_back(Address(node, tensors, memory));
  if (!call.symbols.empty()) buffers.push_back(const_cast<int64_t*>(call.symbols.data()));
  call.function(buffers.data());
}

// A gemm step up to its epilogue: the prologue materialises the operands computed in the
// group, then BLAS reads every operand where it lives and writes the product in place.
Status RunPrologueAndProduct(CpuExecutable::State& s, const Step& step, std::vector<Tensor>& tensors, std::vector<void*>& memory) {
  RETURN_IF_ERROR(RunReferenceNodes(s.graph, step.reference_prologue, tensors, memory));
  for (const GeneratedCall& call : step.prologue) Call(s, call, tensors, memory);
  const Node& mm = s.graph.node(step.matmul);
  if (step.conv) {
    auto at = [&](int id) { return static_cast<const float*>(Address(id, tensors, memory)); };
    void* out = PlaceOutput(s, step.conv_output, tensors, memory);
    step.conv->Run(at(mm.inputs[0]), at(mm.inputs[1]), mm.inputs.size() > 2 ? at(mm.inputs[2]) : nullptr,
                   step.conv_residual >= 0 ? at(step.conv_residual) : nullptr, static_cast<float*>(out));
    return Status::Ok();
  }
  void* product = PlaceOutput(s, mm.id, tensors, memory);
  BlasMatmul(s.graph, mm, Address(mm.inputs[0], tensors, memory), Address(mm.inputs[1], tensors, memory), product);
  return Status::Ok();
}

// Contention. Beside a busy process, an OpenMP team's closing barrier waits for a worker
// the kernel scheduler has not run, whole scheduler ticks (4 ms here; a 0.009 ms kernel took
// 8-12 ms). A step that took kStallUs longer than its fastest run, with a team or on the
// calling thread alone, and over twice as long (a long step's own jitter is no stall: one
// that large costs it little), marks the machine contended: the runs of the next kAloneFor use the
// calling thread alone (the teams of kernels without a tuned team size, through
// omp_set_num_threads), then a team is tried again. The second run is alone, so that a step
// whose every team run stalls still has a time to be compared with (the first, cold, with a
// team: a model run once keeps every core). Measured in
// bench/results/2026-11-29-cpu-under-load.md.
constexpr double kStallUs = 2000;
constexpr auto kAloneFor = std::chrono::seconds(1);

// Sets the OpenMP team of this thread's parallel regions for one run (`threads`: 1 alone, 0
// OpenMP's default), and puts the caller's back after it.
class TeamSizeForRun {
 public:
  explicit TeamSizeForRun(int threads) : before_(omp_get_max_threads()) {
    if (threads > 0 && threads < before_) omp_set_num_threads(threads);
    else before_ = 0;
  }
  ~TeamSizeForRun() {
    if (before_ > 0) omp_set_num_threads(before_);
  }

 private:
  int before_;
};

// Records step `i`'s time (the fastest times hold one entry a step, -1: none yet); a team's
// stall starts a spell on the calling thread alone.
void NoteStepTime(CpuExecutable::State& s, size_t i, double us, bool alone, Clock::time_point now) {
  double& fastest = (alone ? s.fastest_alone_us : s.fastest_team_us)[i];
  if (!alone) {
    const double team = s.fastest_team_us[i], one = s.fastest_alone_us[i];
    const double reference = team < 0 ? one : one < 0 ? team : std::min(team, one);
    if (reference >= 0 && us > reference + std::max(kStallUs, reference)) s.alone_until = now + kAloneFor;
  }
  if (fastest < 0 || us < fastest) fastest = us;
}

}  // namespace

StatusOr<std::vector<Tensor>> CpuExecutable::Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings) {
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
  const auto run_begin = Clock::now();
  const bool second_run = state_->runs++ == 1;
  const bool alone = run_begin < state_->alone_until || second_run;
  if (state_->fastest_team_us.size() != state_->steps.size()) {
    state_->fastest_team_us.assign(state_->steps.size(), -1);
    state_->fastest_alone_us.assign(state_->steps.size(), -1);
  }
  TeamSizeForRun team(alone ? 1 : state_->team_size);
  for (size_t i = 0; i < state_->steps.size(); ++i) {
    const Step& step = state_->steps[i];
    auto begin = Clock::now();
    if (step.matmul >= 0) RETURN_IF_ERROR(RunPrologueAndProduct(*state_, step, tensors, memory));
    if (step.pool) {
      const Node& pool = g.node(step.pool_node);
      void* out = PlaceOutput(*state_, pool.id, tensors, memory);
      step.pool->Run(static_cast<const float*>(Address(pool.inputs[0], tensors, memory)), static_cast<float*>(out));
    } else if (step.channel_mean || step.channel_scale) {
      auto at = [&](int id) { return static_cast<const float*>(Address(id, tensors, memory)); };
      float* out = static_cast<float*>(PlaceOutput(*state_, step.se_node, tensors, memory));
      if (step.channel_mean) step.channel_mean->Run(at(step.se_input), out);
      else step.channel_scale->Run(at(step.se_input), at(step.se_scale), out);
    } else if (step.kernel) Call(*state_, *step.kernel, tensors, memory);
    else if (step.matmul < 0) RETURN_IF_ERROR(RunReferenceNodes(g, state_->plan.groups[step.group].nodes, tensors, memory));
    const auto end = Clock::now();
    NoteStepTime(*state_, i, MicrosecondsBetween(begin, end), alone, end);
    if (timings) timings->push_back({state_->kernels[step.group].name, MicrosecondsBetween(run_begin, begin),
                                         MicrosecondsBetween(begin, end)});
  }
  std::vector<Tensor> outputs;
  for (const Graph::Output& o : g.outputs())
    outputs.push_back(memory[o.node] ? CopyToTensor(g.node(o.node), memory[o.node]) : tensors[o.node]);
  state_->last_tensors = std::move(tensors);
  state_->last_memory = std::move(memory);
  return outputs;
}

const GeneratedCall* cpu_executable_internal::FindLoopKernel(const std::vector<Step>& steps, const std::string& name) {
  for (const Step& step : steps) {
    for (const GeneratedCall& call : step.prologue)
      if (call.symbol == name) return &call;
    if (step.kernel && step.kernel->loop_kernel && step.kernel->symbol == name) return &*step.kernel;
  }
  return nullptr;
}

const Kernel* CpuExecutable::LoopKernel(const std::string& name) const {
  const GeneratedCall* call = cpu_executable_internal::FindLoopKernel(state_->steps, name);
  return call ? &*call->loop_kernel : nullptr;
}

StatusOr<double> CpuExecutable::BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) {
  // Copies of the inputs (fresh memory, not the caller's tensors sharing bytes), so that a
  // run does not find the previous run's inputs in the cache.
  std::vector<std::vector<Tensor>> sets = {inputs};
  for (int set = 1; set < input_sets; ++set) {
    std::vector<Tensor> copy;
    for (const Tensor& t : inputs) {
      Tensor c = Tensor::Uninitialized(t.dtype(), t.shape());
      std::memcpy(c.data(), t.data(), t.num_bytes());
      copy.push_back(std::move(c));
    }
    sets.push_back(std::move(copy));
  }
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(Run(sets[i % sets.size()]).status());
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    auto begin = Clock::now();
    RETURN_IF_ERROR(Run(sets[i % sets.size()]).status());
    times.push_back(MicrosecondsBetween(begin, Clock::now()) / 1000);
  }
  return MedianOf(std::move(times));
}

}  // namespace tilefuse

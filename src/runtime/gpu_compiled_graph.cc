#include "runtime/gpu_compiled_graph.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>

#include "backend/cpu/interpreter.h"
#include "backend/cuda/cublaslt_matmul.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/kernel_launch.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "fusion/group_classifier.h"
#include "codegen/gemm_split.h"
#include "runtime/memory_plan.h"
#include "support/host_memory.h"

namespace tilefuse {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int64_t kWorkspaceBytes = 32 << 20;  // cuBLASLt's workspace
}  // namespace

struct GpuCompiledGraph::State {
  CudaDevice* device = nullptr;
  DeviceAllocator* allocator = nullptr;
  Graph graph;
  FusionPlan plan;
  std::vector<bool> inlined;
  CudaProgram program;
  std::vector<GpuKernelInfo> kernels;
  CUmodule module = nullptr;
  std::map<std::string, CUfunction> functions;
  std::unique_ptr<LtMatmul> lt;
  MemoryPlan memory;
  DeviceBuffer arena, workspace;
  DeviceBuffer scratch;  // the kernels' scratch memory (LaunchSpec::scratch_bytes), zeroed once
  mutable DeviceBuffer head_start;  // memset before timed steps (HeadStart)
  std::vector<DeviceBuffer> owned;
  std::vector<CUdeviceptr> address;  // per node; 0: not on the device
  bool has_host_steps = false;
  bool poison = false;
  bool tf32_matmul = false;  // --precision high
  CudaGraphExec captured;
  // RunOnDevice's graphs captured on callers' pointers (inputs then outputs), newest last.
  std::vector<std::pair<std::vector<uint64_t>, CudaGraphExec>> caller_graphs;
  int caller_captures = 0;  // how many RunOnDevice has captured (bounded: see there)
  // RunOnDevice's pointers in order (inputs, then outputs) as nodes, and whether the graph
  // allows running on them in place: no node both an input and an output (or two outputs),
  // no constant output (uploaded once, no kernel writes it). Fixed at compile.
  std::vector<int> caller_nodes;
  bool caller_in_place = false;
  std::string cache_dir, nvrtc_version;
  std::vector<std::string> plan_notes;  // attention candidates split into their parts, and why
  double compile_ms = 0;
  int64_t nvrtc_compiles = 0;

  const CudaDriverApi& api() const { return device->api(); }
  int64_t Bytes(int node) const { return NumElements(graph.node(node).shape) * DTypeSize(graph.node(node).dtype); }

  Status Launch(const CudaLaunchable& k, const std::vector<CUdeviceptr>& at) const {
    CUstream stream = device->stream();
    if (poison)
      for (int out : k.outputs) RETURN_IF_ERROR(device->Check(api().cuMemsetD8Async(at[out], 0xFF, Bytes(out), stream), "poisoning " + k.source.name));
    // A block per unit of work for the loop kernels (they also stride, for grids past the
    // limit): many blocks keep loads in flight while others compute, and the hardware
    // balances the last wave. (One resident wave of striding threads measured 74% of the
    // copy rate on GELU f32, H200, 2026-11-21.) Templates bring their own grid.
    return LaunchKernel(*device, functions.at(k.source.name), k.source.launch, at, scratch.get(), stream, k.source.name);
  }

  // The product of group `p` through cuBLASLt, with the epilogue cuBLASLt fuses when it has
  // one (then it writes the group's output in place of the product).
  Status Matmul(const CudaGroupProgram& program, const std::vector<CUdeviceptr>& at) const {
    const int matmul = program.matmul;
    const int written = program.lt_output >= 0 ? program.lt_output : matmul;
    const Node& mm = graph.node(matmul);
    const Shape &sa = graph.node(mm.inputs[0]).shape, &sb = graph.node(mm.inputs[1]).shape, &out = mm.shape;
    LtMatmulProblem p;
    p.dtype = mm.dtype;
    p.tf32 = tf32_matmul;
    p.epilogue = program.lt_epilogue;
    const CUdeviceptr bias = program.lt_bias >= 0 ? at[program.lt_bias] : 0;
    p.m = out[out.size() - 2];
    p.n = out.back();
    p.k = sa.back();
    int64_t batches = NumElements(out) / std::max<int64_t>(1, p.m * p.n);
    // cuBLASLt takes no empty dimension: an empty product has nothing to write, and one
    // over K = 0 is zeros (all-zero bits in every float dtype).
    if (NumElements(out) == 0) return Status::Ok();
    if (p.k == 0)  // (no cuBLASLt epilogue then: LibraryEpilogueFor refuses empty products)
      return device->Check(api().cuMemsetD8Async(at[matmul], 0, Bytes(matmul), device->stream()), "zeroing an empty-K matmul");
    if (poison) RETURN_IF_ERROR(device->Check(api().cuMemsetD8Async(at[written], 0xFF, Bytes(written), device->stream()), "poisoning matmul"));
    // Batch offsets (in matrices) with broadcasting; one strided call when they are a
    // progression, else one call per batch entry.
    auto offset = [&](const Shape& operand, int64_t batch) { return MatmulBatchOffset(out, operand, batch); };
    auto progression = [&](const Shape& s, int64_t* step) {
      *step = batches > 1 ? offset(s, 1) - offset(s, 0) : 0;
      for (int64_t b = 0; b < batches; ++b)
        if (offset(s, b) != b * *step) return false;
      return true;
    };
    int64_t step_a = 0, step_b = 0;
    size_t esize = DTypeSize(mm.dtype);
    if (progression(sa, &step_a) && progression(sb, &step_b)) {
      p.batch = batches;
      p.batch_stride_a = step_a * p.m * p.k;
      p.batch_stride_b = step_b * p.k * p.n;
      p.batch_stride_d = p.m * p.n;
      return lt->Run(p, at[mm.inputs[0]], at[mm.inputs[1]], at[written], bias, workspace.get(), kWorkspaceBytes, device->stream());
    }
    for (int64_t b = 0; b < batches; ++b)
      RETURN_IF_ERROR(lt->Run(p, at[mm.inputs[0]] + offset(sa, b) * p.m * p.k * esize, at[mm.inputs[1]] + offset(sb, b) * p.k * p.n * esize,
                              at[written] + b * p.m * p.n * esize, bias, workspace.get(), kWorkspaceBytes, device->stream()));
    return Status::Ok();
  }

  // A node's value on the host, for a host step: downloaded, a constant, or evaluated
  // (inlined generators, and members of the same host group computed earlier).
  StatusOr<Tensor> HostValue(int node, std::map<int, Tensor>& local) const {
    if (auto it = local.find(node); it != local.end()) return it->second;
    const Node& n = graph.node(node);
    if (n.op == OpCode::kConstant) return *n.attrs.value;
    if (address[node]) {
      Tensor t(n.dtype, n.shape);
      RETURN_IF_ERROR(device->Check(api().cuMemcpyDtoHAsync(t.data(), address[node], t.num_bytes(), device->stream()), "copying a value to the host"));
      RETURN_IF_ERROR(device->Check(api().cuStreamSynchronize(device->stream()), "copying a value to the host"));
      return t;
    }
    std::vector<Tensor> inputs;
    for (int input : n.inputs) {
      ASSIGN_OR_RETURN(Tensor t, HostValue(input, local));
      inputs.push_back(std::move(t));
    }
    std::vector<const Tensor*> args;
    for (const Tensor& t : inputs) args.push_back(&t);
    ASSIGN_OR_RETURN(Tensor value, EvaluateNode(n, args));
    local[node] = value;
    return value;
  }

  Status RunHostGroup(const CudaGroupProgram& p, const std::vector<CUdeviceptr>& at) const {
    RETURN_IF_ERROR(device->Check(api().cuStreamSynchronize(device->stream()), "waiting for the GPU before a host step"));
    std::map<int, Tensor> local;
    for (int id : p.host_nodes) {
      local.erase(id);
      std::vector<Tensor> inputs;
      for (int input : graph.node(id).inputs) {
        ASSIGN_OR_RETURN(Tensor t, HostValue(input, local));
        inputs.push_back(std::move(t));
      }
      std::vector<const Tensor*> args;
      for (const Tensor& t : inputs) args.push_back(&t);
      ASSIGN_OR_RETURN(local[id], EvaluateNode(graph.node(id), args));
    }
    for (int out : plan.groups[p.group].outputs)
      if (at[out]) RETURN_IF_ERROR(device->Check(api().cuMemcpyHtoDAsync(at[out], local[out].data(), local[out].num_bytes(), device->stream()), "copying a host result to the GPU"));
    // The copies read `local`'s pageable memory: wait before it goes away.
    return device->Check(api().cuStreamSynchronize(device->stream()), "copying host results to the GPU");
  }

  // Enqueues every step; with `timings`, records events around each.
  // Timed steps run between device events, launched one by one from the host, and the device
  // counts the time it waits for a launch as the step's: the first step of a graph timed
  // 40-90 us longer than it runs (H100, 2026-11-24; cuBLASLt's host path the longest),
  // which made the gemm path search pick the wrong path. A quarter millisecond of memsets
  // first lets the host queue the steps ahead of the device.
  void HeadStart() const {
    constexpr int64_t kBytes = 64 << 20;
    if (!head_start.get()) {
      StatusOr<CUdeviceptr> p = allocator->Allocate(kBytes, "the timing head start");
      if (!p.ok()) return;  // timings without it, as before
      head_start = DeviceBuffer(allocator, *p);
    }
    for (int i = 0; i < 12; ++i) api().cuMemsetD8Async(head_start.get(), 0, kBytes, device->stream());
  }

  Status Enqueue(const std::vector<CUdeviceptr>& at, std::vector<KernelTiming>* timings) const {
    if (timings) HeadStart();
    std::vector<CudaEvent> events;  // released on every return
    auto mark = [&]() -> Status {
      if (!timings) return Status::Ok();
      ASSIGN_OR_RETURN(CudaEvent e, CreateCudaEvent(*device));
      events.push_back(std::move(e));
      return device->Check(api().cuEventRecord(events.back().get(), device->stream()), "cuEventRecord");
    };
    RETURN_IF_ERROR(mark());
    for (const CudaGroupProgram& p : program.groups) {
      switch (p.mode) {
        case CudaGroupProgram::Mode::kGenerated: RETURN_IF_ERROR(Launch(*p.kernel, at)); break;
        case CudaGroupProgram::Mode::kGemm:
          for (const CudaLaunchable& k : p.prologue) RETURN_IF_ERROR(Launch(k, at));
          RETURN_IF_ERROR(Matmul(p, at));
          if (p.kernel) RETURN_IF_ERROR(Launch(*p.kernel, at));
          break;
        case CudaGroupProgram::Mode::kGemmTemplate:
          for (const CudaLaunchable& k : p.prologue) RETURN_IF_ERROR(Launch(k, at));
          RETURN_IF_ERROR(Launch(*p.kernel, at));
          break;
        case CudaGroupProgram::Mode::kAttentionTemplate: RETURN_IF_ERROR(Launch(*p.kernel, at)); break;
        case CudaGroupProgram::Mode::kHost: RETURN_IF_ERROR(RunHostGroup(p, at)); break;
      }
      RETURN_IF_ERROR(mark());
    }
    if (!timings) return Status::Ok();
    RETURN_IF_ERROR(device->Check(api().cuEventSynchronize(events.back().get()), "running the graph"));
    double start = 0;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      float ms = 0;
      api().cuEventElapsedTime(&ms, events[i].get(), events[i + 1].get());
      timings->push_back({kernels[i].name, start, ms * 1000.0});
      start += ms * 1000.0;
    }
    return Status::Ok();
  }

  StatusOr<CudaGraphExec> Capture(const std::vector<CUdeviceptr>& at) const {
    CUstream stream = device->stream();
    RETURN_IF_ERROR(device->Check(api().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture"));
    Status enqueued = Enqueue(at, nullptr);
    CUgraph g = nullptr;
    CUresult ended = api().cuStreamEndCapture(stream, &g);
    CUgraphExec exec = nullptr;
    CUresult instantiated = enqueued.ok() && ended == CUDA_SUCCESS ? api().cuGraphInstantiateWithFlags(&exec, g, 0) : CUDA_SUCCESS;
    if (g) api().cuGraphDestroy(g);
    RETURN_IF_ERROR(enqueued);
    RETURN_IF_ERROR(device->Check(ended, "cuStreamEndCapture"));
    RETURN_IF_ERROR(device->Check(instantiated, "cuGraphInstantiate"));
    return CudaGraphExec(device, exec);
  }
};

GpuCompiledGraph::GpuCompiledGraph(std::unique_ptr<State> state) : state_(std::move(state)) {}
GpuCompiledGraph::~GpuCompiledGraph() {
  if (!state_) return;
  state_->captured = CudaGraphExec();  // before the module its kernels live in
  state_->caller_graphs.clear();
  if (state_->module) state_->api().cuModuleUnload(state_->module);
}
const Graph& GpuCompiledGraph::graph() const { return state_->graph; }
const FusionPlan& GpuCompiledGraph::plan() const { return state_->plan; }
const std::vector<GpuKernelInfo>& GpuCompiledGraph::kernels() const { return state_->kernels; }
const CudaProgram& GpuCompiledGraph::program() const { return state_->program; }
const std::string& GpuCompiledGraph::source() const { return state_->program.source; }
std::string GpuCompiledGraph::device_name() const { return state_->device->name(); }
double GpuCompiledGraph::compile_ms() const { return state_->compile_ms; }
int64_t GpuCompiledGraph::nvrtc_compiles() const { return state_->nvrtc_compiles; }
int64_t GpuCompiledGraph::arena_bytes() const { return state_->memory.arena_bytes; }
bool GpuCompiledGraph::captured() const { return state_->captured.get() != nullptr; }
std::string GpuCompiledGraph::device_arch() const { return state_->device->arch(); }
int GpuCompiledGraph::driver_version() const { return state_->device->driver_version(); }
std::string GpuCompiledGraph::nvrtc_version() const { return state_->nvrtc_version; }
const std::vector<std::string>& GpuCompiledGraph::plan_notes() const { return state_->plan_notes; }

namespace {

// The generated kernels of a group: prologues, then the main or epilogue kernel.
std::vector<const CudaLaunchable*> Launchables(const CudaGroupProgram& p) {
  std::vector<const CudaLaunchable*> out;
  for (const CudaLaunchable& k : p.prologue) out.push_back(&k);
  if (p.kernel) out.push_back(&*p.kernel);
  return out;
}

std::vector<GpuKernelInfo> DescribeKernels(const CudaProgram& program, const FusionPlan& plan) {
  std::vector<GpuKernelInfo> out;
  for (const CudaGroupProgram& p : program.groups) {
    GpuKernelInfo info;
    info.kind = p.kind;
    info.group = p.group;
    info.num_nodes = static_cast<int>(plan.groups[p.group].nodes.size());
    info.name = p.kernel ? p.kernel->source.name : fmt::format("tf_group{}_{}", p.group, GroupKindName(p.kind));
    if (p.kernel) {
      info.strategy = p.kernel->source.strategy;
      info.threads = p.kernel->source.threads;
      info.blocks = p.kernel->source.work_blocks;
    }
    switch (p.mode) {
      case CudaGroupProgram::Mode::kGenerated: info.mode = "generated"; break;
      case CudaGroupProgram::Mode::kGemm:
        info.mode = "gemm";
        info.strategy = "cuBLASLt" +
                        (p.lt_epilogue != LtEpilogue::kNone ? std::string(" with its ") + LtEpilogueName(p.lt_epilogue) + " epilogue" : "") +
                        (p.kernel ? " + epilogue " + info.strategy : std::string()) +
                        (p.why_library.empty() ? "" : " (no template: " + p.why_library + ")");
        break;
      case CudaGroupProgram::Mode::kGemmTemplate: info.mode = "gemm template"; break;
      case CudaGroupProgram::Mode::kAttentionTemplate: info.mode = "attention template"; break;
      case CudaGroupProgram::Mode::kHost:
        info.mode = "host";
        info.why_host = p.why_host;
        break;
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace

namespace {

std::string DescribeNode(const Node& n) {
  return fmt::format("node %{} '{}' ({}) {}{}", n.id, n.name, OpName(n.op), DTypeName(n.dtype), ShapeToString(n.shape));
}

// The arena named by its largest value, so an out-of-memory error points at the node.
std::string ArenaDescription(const Graph& g, const std::vector<int64_t>& arena_offset) {
  const Node* largest = nullptr;
  for (const Node& n : g.nodes())
    if (arena_offset[n.id] >= 0 && (!largest || NumElements(n.shape) * DTypeSize(n.dtype) > NumElements(largest->shape) * DTypeSize(largest->dtype)))
      largest = &n;
  return largest ? "the intermediate arena (its largest value: " + DescribeNode(*largest) + ")" : "the intermediate arena";
}

// The host side of a run: inputs and outputs as host tensors, and the generators
// evaluated on the host before their upload.
Status CheckHostSide(const Graph& g, const std::vector<bool>& inlined) {
  int64_t total = 0;
  const Node* largest = nullptr;
  std::vector<bool> on_host(g.num_nodes(), false);
  for (int id : g.inputs()) on_host[id] = true;
  for (const Graph::Output& o : g.outputs()) on_host[o.node] = true;
  for (const Node& n : g.nodes()) {
    if (!on_host[n.id] && !inlined[n.id] && n.op != OpCode::kConstant) continue;
    int64_t bytes = SaturatingBytes(NumElements(n.shape), DTypeSize(n.dtype));
    total = bytes > INT64_MAX - total ? INT64_MAX : total + bytes;
    if (!largest || bytes > NumElements(largest->shape) * DTypeSize(largest->dtype)) largest = &n;
  }
  if (!largest) return Status::Ok();
  return CheckHostMemory(total, "the graph's inputs, outputs and constants (the largest: " + DescribeNode(*largest) + ")");
}

}  // namespace

StatusOr<std::unique_ptr<GpuCompiledGraph>> GpuCompiledGraph::Compile(const Graph& graph, const GpuCompileOptions& options) {
  auto start = Clock::now();
  auto s = std::make_unique<State>();
  ASSIGN_OR_RETURN(s->device, CudaDevice::Get());
  RETURN_IF_ERROR(s->device->MakeCurrent());
  s->allocator = &DeviceAllocator::Get(s->device);
  s->graph = graph;
  s->poison = options.poison_outputs;
  s->tf32_matmul = options.precision == MatmulPrecision::kHigh;
  PlannerOptions planner;
  // The cost model of the GPU it runs on (H200s have more bandwidth and L2 than H100s).
  planner.device = s->device->name().find("H200") != std::string::npos ? "h200" : "h100-sxm";
  planner.fuse = options.fuse;
  planner.disabled_kinds = options.disabled_kinds;
  if (options.plan_override) s->plan = *options.plan_override;
  s->inlined = FindInlinedGenerators(s->graph);
  CudaTarget target;
  target.arch = s->device->arch();
  target.sm_count = s->device->sm_count();
  target.gemm = options.gemm;
  target.gemm_path_at = options.gemm_path_at;
  target.attention = options.attention;
  target.overrides = options.overrides;
  target.fault = options.fault;
  if (!options.plan_override) {
    ASSIGN_OR_RETURN(CudaPlan planned, PlanFusionForCuda(s->graph, planner, target));
    s->plan = std::move(planned.plan);
    s->plan_notes = std::move(planned.split_attention);
  }
  ASSIGN_OR_RETURN(s->program, BuildCudaProgram(s->graph, s->plan, s->inlined, "", options.configs, target));
  s->cache_dir = options.cache_dir;
  s->kernels = DescribeKernels(s->program, s->plan);
  const Graph& g = s->graph;

  // Matmuls whose dtype cuBLASLt does not take run on the host.
  for (CudaGroupProgram& p : s->program.groups) {
    if (p.mode != CudaGroupProgram::Mode::kGemm) continue;
    DType d = g.node(p.matmul).dtype;
    if (d == DType::kF32 || d == DType::kF16 || d == DType::kBF16) continue;
    p.mode = CudaGroupProgram::Mode::kHost;
    p.host_nodes = s->plan.groups[p.group].nodes;
    p.why_host = fmt::format("cuBLASLt has no {} matmul", DTypeName(d));
    p.kernel.reset();
    p.prologue.clear();
  }
  s->kernels = DescribeKernels(s->program, s->plan);

  // Compile and load.
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(options.cache_dir));
  s->nvrtc_version = nvrtc.version();
  bool any_kernel = false, any_gemm = false;
  for (const CudaGroupProgram& p : s->program.groups) {
    any_kernel = any_kernel || p.kernel || !p.prologue.empty();
    any_gemm = any_gemm || p.mode == CudaGroupProgram::Mode::kGemm;
    s->has_host_steps = s->has_host_steps || p.mode == CudaGroupProgram::Mode::kHost;
  }
  if (any_kernel) {
    ASSIGN_OR_RETURN(CubinResult cubin, nvrtc.Compile(s->program.source, s->device->arch()));
    s->nvrtc_compiles = nvrtc.compiles();
    RETURN_IF_ERROR(s->device->Check(s->device->api().cuModuleLoadData(&s->module, cubin.cubin.data()), "cuModuleLoadData"));
    for (const CudaGroupProgram& p : s->program.groups)
      for (const CudaLaunchable* k : Launchables(p)) {
        CUfunction f;
        RETURN_IF_ERROR(s->device->Check(s->device->api().cuModuleGetFunction(&f, s->module, k->source.name.c_str()),
                                         "cuModuleGetFunction " + k->source.name));
        RETURN_IF_ERROR(PrepareFunction(*s->device, f, k->source.launch, k->source.name));
        s->functions[k->source.name] = f;
      }
  }
  int64_t scratch_bytes = 0;
  for (const CudaGroupProgram& p : s->program.groups)
    for (const CudaLaunchable* k : Launchables(p)) scratch_bytes = std::max(scratch_bytes, k->source.launch.scratch_bytes);
  if (scratch_bytes > 0) {
    ASSIGN_OR_RETURN(CUdeviceptr w, s->allocator->Allocate(scratch_bytes, "the kernels' scratch memory"));
    s->scratch = DeviceBuffer(s->allocator, w);
    RETURN_IF_ERROR(s->device->Check(s->device->api().cuMemsetD8Async(w, 0, scratch_bytes, s->device->stream()), "zeroing scratch memory"));
  }
  if (any_gemm) {
    ASSIGN_OR_RETURN(s->lt, LtMatmul::Create());
    ASSIGN_OR_RETURN(CUdeviceptr w, s->allocator->Allocate(kWorkspaceBytes, "the cuBLASLt workspace"));
    s->workspace = DeviceBuffer(s->allocator, w);
  }

  // Device memory: intermediates in the arena by liveness, everything else its own buffer.
  Schedule schedule = ScheduleFromFusionPlan(g, s->plan);
  MemoryPlanOptions memory_options;
  memory_options.alignment = 256;
  ASSIGN_OR_RETURN(s->memory, PlanMemory(schedule, memory_options));
  std::vector<int64_t> arena_offset(g.num_nodes(), -1);
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (s->memory.offsets[b] >= 0) arena_offset[schedule.buffers[b].node] = s->memory.offsets[b];
  RETURN_IF_ERROR(CheckHostSide(g, s->inlined));
  if (s->memory.arena_bytes > 0) {
    ASSIGN_OR_RETURN(CUdeviceptr a, s->allocator->Allocate(s->memory.arena_bytes, ArenaDescription(g, arena_offset)));
    s->arena = DeviceBuffer(s->allocator, a);
  }
  std::vector<bool> on_device(g.num_nodes(), false);
  for (int id : g.inputs()) on_device[id] = true;
  for (const Graph::Output& o : g.outputs()) on_device[o.node] = true;
  for (const CudaGroupProgram& p : s->program.groups) {
    for (const CudaLaunchable* k : Launchables(p))
      for (int node : k->buffer_nodes) on_device[node] = true;
    // cuBLASLt reads the product's operands and writes the product (or, with its own
    // epilogue, the group's output); a template reads and writes what its arguments name
    // (no product buffer, and no copy of an operand it reads through a view).
    if (p.mode == CudaGroupProgram::Mode::kGemm) {
      on_device[p.lt_output >= 0 ? p.lt_output : p.matmul] = true;
      for (int input : g.node(p.matmul).inputs) on_device[input] = true;
      if (p.lt_bias >= 0) on_device[p.lt_bias] = true;
    }
    for (int out : s->plan.groups[p.group].outputs) on_device[out] = true;
  }
  s->address.assign(g.num_nodes(), 0);
  for (const Node& n : g.nodes()) {
    bool generator = s->inlined[n.id] || n.op == OpCode::kConstant;
    if (!on_device[n.id]) continue;
    if (arena_offset[n.id] >= 0) {
      s->address[n.id] = s->arena.get() + arena_offset[n.id];
      continue;
    }
    ASSIGN_OR_RETURN(CUdeviceptr p, s->allocator->Allocate(s->Bytes(n.id), DescribeNode(n)));
    s->owned.emplace_back(s->allocator, p);
    if (generator) {  // computed once on the host and uploaded
      // Evaluated before its address is set: HostValue downloads any node that has one
      // (a reshaped constant weight read back uninitialised was a conv's zeros).
      std::map<int, Tensor> local;
      ASSIGN_OR_RETURN(Tensor value, s->HostValue(n.id, local));
      RETURN_IF_ERROR(s->device->Check(s->device->api().cuMemcpyHtoDAsync(p, value.data(), value.num_bytes(), s->device->stream()), "uploading a constant"));
      RETURN_IF_ERROR(s->device->Check(s->device->api().cuStreamSynchronize(s->device->stream()), "uploading a constant"));
    }
    s->address[n.id] = p;
  }
  if (!s->has_host_steps) {
    ASSIGN_OR_RETURN(s->captured, s->Capture(s->address));
  }
  s->caller_nodes = g.inputs();
  for (const Graph::Output& o : g.outputs()) s->caller_nodes.push_back(o.node);
  std::vector<int> sorted_nodes = s->caller_nodes;
  std::sort(sorted_nodes.begin(), sorted_nodes.end());
  s->caller_in_place = std::adjacent_find(sorted_nodes.begin(), sorted_nodes.end()) == sorted_nodes.end() &&
                       std::none_of(g.outputs().begin(), g.outputs().end(),
                                    [&](const Graph::Output& o) { return g.node(o.node).op == OpCode::kConstant; });
  s->compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return std::unique_ptr<GpuCompiledGraph>(new GpuCompiledGraph(std::move(s)));
}

std::vector<const CudaLaunchable*> GpuCompiledGraph::launchables() const {
  std::vector<const CudaLaunchable*> out;
  for (const CudaGroupProgram& p : state_->program.groups)
    for (const CudaLaunchable* k : Launchables(p))
      if (!k->is_template) out.push_back(k);
  return out;
}

namespace {

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

StatusOr<std::vector<VariantTiming>> GpuCompiledGraph::MeasureVariants(const std::string& name,
                                                                       const std::vector<CudaKernelConfig>& configs, int warmup,
                                                                       int repeats) {
  State& s = *state_;
  const CudaDriverApi& api = s.api();
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaLaunchable* base = nullptr;
  for (const CudaLaunchable* k : launchables())
    if (k->source.name == name) base = k;
  if (!base) return NotFound(fmt::format("no generated kernel named {}", name));
  // Every variant in one translation unit: one NVRTC run.
  std::vector<VariantTiming> timings(configs.size());
  std::vector<CudaLaunchable> variants(configs.size(), *base);
  std::vector<CudaKernelSource> sources;
  for (size_t i = 0; i < configs.size(); ++i) {
    timings[i].config = configs[i];
    Kernel k = base->kernel;
    k.name = fmt::format("{}_variant{}", name, i);
    StatusOr<CudaKernelSource> source = EmitCudaKernel(k, configs[i]);
    if (!source.ok()) {
      timings[i].error = source.status().message();
      continue;
    }
    variants[i].source = *source;
    sources.push_back(*source);
  }
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(s.cache_dir));
  StatusOr<CubinResult> cubin = nvrtc.Compile(CudaTranslationUnit(sources), s.device->arch());
  if (!cubin.ok()) {  // one bad variant must not sink the others: compile them one by one
    for (size_t i = 0; i < configs.size(); ++i)
      if (timings[i].error.empty()) timings[i].error = "compiled with the others: " + cubin.status().message();
    return timings;
  }
  CUmodule module = nullptr;
  RETURN_IF_ERROR(s.device->Check(api.cuModuleLoadData(&module, cubin->cubin.data()), "cuModuleLoadData (tuning)"));
  // Rotated copies of the kernel's inputs, so repeated launches read device memory.
  std::vector<int> inputs;
  int64_t input_bytes = 0;
  for (int node : base->buffer_nodes)
    if (std::find(base->outputs.begin(), base->outputs.end(), node) == base->outputs.end()) {
      inputs.push_back(node);
      input_bytes += s.Bytes(node);
    }
  int rotations = static_cast<int>(std::clamp<int64_t>(2 * s.device->l2_bytes() / std::max<int64_t>(1, input_bytes) + 1, 1, 8));
  std::vector<std::vector<CUdeviceptr>> tables(rotations, s.address);
  std::vector<DeviceBuffer> copies;
  Status status = Status::Ok();
  for (int r = 1; r < rotations && status.ok(); ++r)
    for (int node : inputs) {
      StatusOr<CUdeviceptr> p = s.allocator->Allocate(s.Bytes(node), "a tuning input copy");
      if (!p.ok()) {
        status = p.status();
        break;
      }
      copies.emplace_back(s.allocator, *p);
      tables[r][node] = *p;
      status = s.device->Check(api.cuMemcpyDtoDAsync(*p, s.address[node], s.Bytes(node), s.device->stream()), "copying a tuning input");
    }
  CudaEvent begin_event, end_event;
  if (status.ok()) {
    StatusOr<CudaEvent> b = CreateCudaEvent(*s.device), e = CreateCudaEvent(*s.device);
    status = !b.ok() ? b.status() : e.status();
    if (status.ok()) {
      begin_event = std::move(*b);
      end_event = std::move(*e);
    }
  }
  CUevent begin = begin_event.get(), end = end_event.get();
  auto time_variant = [&](size_t i, int n) -> StatusOr<double> {
    CUfunction f;
    RETURN_IF_ERROR(s.device->Check(api.cuModuleGetFunction(&f, module, variants[i].source.name.c_str()), "cuModuleGetFunction"));
    std::map<std::string, CUfunction> saved;
    std::swap(saved, s.functions);
    s.functions[variants[i].source.name] = f;
    bool poison = s.poison;
    s.poison = false;
    std::vector<double> us;
    Status launched = Status::Ok();
    for (int rep = 0; rep < warmup + n && launched.ok(); ++rep) {
      api.cuEventRecord(begin, s.device->stream());
      launched = s.Launch(variants[i], tables[rep % rotations]);
      api.cuEventRecord(end, s.device->stream());
      if (launched.ok()) launched = s.device->Check(api.cuEventSynchronize(end), "running " + variants[i].source.name);
      float ms = 0;
      api.cuEventElapsedTime(&ms, begin, end);
      if (rep >= warmup) us.push_back(ms * 1000.0);
    }
    s.poison = poison;
    std::swap(saved, s.functions);
    RETURN_IF_ERROR(launched);
    return Median(us);
  };
  for (size_t i = 0; i < configs.size() && status.ok(); ++i) {
    if (!timings[i].error.empty()) continue;
    StatusOr<double> t = time_variant(i, repeats);
    if (t.ok()) timings[i].time_us = *t;
    else timings[i].error = t.status().message();
  }
  // A winner much faster than the default (the first configuration) is measured again,
  // with the default, before anyone believes it.
  if (status.ok() && timings[0].time_us) {
    size_t best = 0;
    for (size_t i = 0; i < timings.size(); ++i)
      if (timings[i].time_us && *timings[i].time_us < *timings[best].time_us) best = i;
    if (best != 0 && *timings[best].time_us < 0.85 * *timings[0].time_us)
      for (size_t i : {size_t{0}, best}) {
        StatusOr<double> t = time_variant(i, 2 * repeats);
        if (t.ok()) timings[i].time_us = *t;
      }
  }
  api.cuModuleUnload(module);
  RETURN_IF_ERROR(status);
  return timings;
}

StatusOr<std::vector<double>> GpuCompiledGraph::GroupTimesUs(const std::vector<Tensor>& inputs) {
  // Per group, the median over several runs (the first one warms up).
  std::vector<std::vector<double>> samples(state_->program.groups.size());
  for (int run = 0; run < 8; ++run) {
    std::vector<KernelTiming> timings;
    ASSIGN_OR_RETURN(std::vector<Tensor> unused, Run(inputs, &timings));
    if (run == 0) continue;
    for (size_t g = 0; g < timings.size() && g < samples.size(); ++g) samples[g].push_back(timings[g].duration_us);
  }
  std::vector<double> out;
  for (std::vector<double>& v : samples) out.push_back(v.empty() ? 0 : Median(v));
  return out;
}

namespace {

Status CheckInputs(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs, got {}", g.inputs().size(), inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& p = g.node(g.inputs()[i]);
    if (inputs[i].dtype() != p.dtype || inputs[i].shape() != p.shape)
      return InvalidArgument(fmt::format("input '{}' expects {}{}, got {}{}", p.name, DTypeName(p.dtype), ShapeToString(p.shape),
                                         DTypeName(inputs[i].dtype()), ShapeToString(inputs[i].shape())));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<Tensor>> GpuCompiledGraph::Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings) {
  State& s = *state_;
  const Graph& g = s.graph;
  RETURN_IF_ERROR(CheckInputs(g, inputs));
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaDriverApi& api = s.api();
  // Every copy goes on tilefuse's own (non-blocking) stream: a plain cuMemcpyHtoD runs on
  // the legacy stream, which that stream does not wait for, and returns before the DMA
  // from a pageable buffer lands (random graphs on the H200 read half-copied inputs).
  for (size_t i = 0; i < inputs.size(); ++i)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyHtoDAsync(s.address[g.inputs()[i]], inputs[i].data(), inputs[i].num_bytes(), s.device->stream()),
                                    "uploading an input"));
  if (s.captured.get() && !timings) RETURN_IF_ERROR(s.device->Check(api.cuGraphLaunch(s.captured.get(), s.device->stream()), "cuGraphLaunch"));
  else RETURN_IF_ERROR(s.Enqueue(s.address, timings));
  RETURN_IF_ERROR(s.device->Check(api.cuStreamSynchronize(s.device->stream()), "running the graph on the GPU"));
  std::vector<Tensor> outputs;
  for (const Graph::Output& o : g.outputs()) {
    const Node& n = g.node(o.node);
    Tensor t(n.dtype, n.shape);
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyDtoHAsync(t.data(), s.address[o.node], t.num_bytes(), s.device->stream()), "downloading an output"));
    outputs.push_back(std::move(t));  // the buffer moves with it; the copy lands there
  }
  RETURN_IF_ERROR(s.device->Check(api.cuStreamSynchronize(s.device->stream()), "downloading the outputs"));
  return outputs;
}

namespace {

// Why a program runs steps on the host: its first host group's reason.
std::string HostStepReason(const CudaProgram& program) {
  for (const CudaGroupProgram& p : program.groups)
    if (p.mode == CudaGroupProgram::Mode::kHost) return fmt::format("group {}: {}", p.group, p.why_host);
  return "no host group (not captured)";
}

}  // namespace

Status GpuCompiledGraph::RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
  State& s = *state_;
  const Graph& g = s.graph;
  if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs and {} outputs, got {} and {} device pointers", g.inputs().size(),
                                       g.outputs().size(), inputs.size(), outputs.size()));
  if (!s.captured.get())
    return Unimplemented("a run on device memory needs the graph captured as a CUDA graph; this one has steps on the host: " +
                         HostStepReason(s.program));
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaDriverApi& api = s.api();
  CUstream on = reinterpret_cast<CUstream>(stream);
  // In place where it can: a graph captured on the caller's pointers reads and writes the
  // caller's memory, and is kept for the next calls with the same pointers (PyTorch's caching
  // allocator hands the same addresses back call after call), so such a call is one launch.
  // Otherwise (a pointer not 256-byte aligned as the kernels' vector accesses and tensor maps
  // assume, a node that is both an input and an output or two outputs, or a constant output)
  // the copies below.
  std::vector<uint64_t> key = inputs;
  key.insert(key.end(), outputs.begin(), outputs.end());
  bool in_place = s.caller_in_place && std::all_of(key.begin(), key.end(), [](uint64_t p) { return p % 256 == 0; });
  // A caller whose pointers keep changing (outputs kept, new ones allocated every call) would
  // pay a capture per call: after kMaxCaptures, new pointers take the copies.
  constexpr int kMaxCaptures = 16;
  auto cached = std::find_if(s.caller_graphs.begin(), s.caller_graphs.end(), [&](const auto& e) { return e.first == key; });
  if (in_place && (cached != s.caller_graphs.end() || s.caller_captures < kMaxCaptures)) {
    if (cached == s.caller_graphs.end()) {
      ++s.caller_captures;
      std::vector<CUdeviceptr> at = s.address;
      for (size_t i = 0; i < key.size(); ++i) at[s.caller_nodes[i]] = key[i];
      ASSIGN_OR_RETURN(CudaGraphExec exec, s.Capture(at));
      constexpr size_t kKeptGraphs = 8;
      if (s.caller_graphs.size() == kKeptGraphs) s.caller_graphs.erase(s.caller_graphs.begin());
      s.caller_graphs.emplace_back(key, std::move(exec));
      cached = std::prev(s.caller_graphs.end());
    }
    return s.device->Check(api.cuGraphLaunch(cached->second.get(), on), "cuGraphLaunch");
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyDtoDAsync(s.address[g.inputs()[i]], inputs[i], s.Bytes(g.inputs()[i]), on),
                                    "copying an input on the device"));
  RETURN_IF_ERROR(s.device->Check(api.cuGraphLaunch(s.captured.get(), on), "cuGraphLaunch"));
  for (size_t o = 0; o < outputs.size(); ++o)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyDtoDAsync(outputs[o], s.address[g.outputs()[o].node], s.Bytes(g.outputs()[o].node), on),
                                    "copying an output on the device"));
  return Status::Ok();
}

StatusOr<double> GpuCompiledGraph::BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) {
  State& s = *state_;
  const Graph& g = s.graph;
  RETURN_IF_ERROR(CheckInputs(g, inputs));
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaDriverApi& api = s.api();
  // One address table (and captured graph, when capturable) per input set.
  std::vector<std::vector<CUdeviceptr>> tables;
  std::vector<DeviceBuffer> extra;
  for (int set = 0; set < std::max(1, input_sets); ++set) {
    std::vector<CUdeviceptr> at = s.address;
    for (size_t i = 0; i < inputs.size(); ++i) {
      int node = g.inputs()[i];
      if (set > 0) {
        ASSIGN_OR_RETURN(CUdeviceptr p, s.allocator->Allocate(inputs[i].num_bytes(), "a benchmark input copy"));
        extra.emplace_back(s.allocator, p);
        at[node] = p;
      }
      RETURN_IF_ERROR(s.device->Check(api.cuMemcpyHtoDAsync(at[node], inputs[i].data(), inputs[i].num_bytes(), s.device->stream()), "uploading an input"));
    }
    tables.push_back(std::move(at));
  }
  std::vector<CudaGraphExec> graphs;
  if (!s.has_host_steps)
    for (const auto& at : tables) {
      ASSIGN_OR_RETURN(CudaGraphExec e, s.Capture(at));
      graphs.push_back(std::move(e));
    }
  auto run_once = [&](int i) -> Status {
    if (!graphs.empty()) return s.device->Check(api.cuGraphLaunch(graphs[i % graphs.size()].get(), s.device->stream()), "cuGraphLaunch");
    return s.Enqueue(tables[i % tables.size()], nullptr);
  };
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(run_once(i));
  ASSIGN_OR_RETURN(CudaEvent begin_event, CreateCudaEvent(*s.device));
  ASSIGN_OR_RETURN(CudaEvent end_event, CreateCudaEvent(*s.device));
  CUevent begin = begin_event.get(), end = end_event.get();
  std::vector<double> times;
  Status status = Status::Ok();
  for (int i = 0; i < repeats && status.ok(); ++i) {
    api.cuEventRecord(begin, s.device->stream());
    status = run_once(i);
    api.cuEventRecord(end, s.device->stream());
    if (status.ok()) status = s.device->Check(api.cuEventSynchronize(end), "running the graph on the GPU");
    float ms = 0;
    api.cuEventElapsedTime(&ms, begin, end);
    times.push_back(ms);
  }
  RETURN_IF_ERROR(status);
  if (times.empty()) return 0.0;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace tilefuse

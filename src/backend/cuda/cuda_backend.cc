#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable_state.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/kernel_launch.h"
#include "fusion/group_classifier.h"
#include "runtime/memory_plan.h"
#include "support/check.h"
#include "support/env_switch.h"
#include "support/host_memory.h"

namespace tilefuse {

std::vector<CudaKernelInfo> DescribeKernels(const CudaProgram& program, const FusionPlan& plan) {
  std::vector<CudaKernelInfo> out;
  for (const CudaGroupProgram& p : program.groups) {
    CudaKernelInfo info;
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
      case CudaGroupProgram::Mode::kGenerated:
        info.mode = "generated";
        if (p.launched_with >= 0) info.strategy = fmt::format("launched together with {}", program.groups.at(p.launched_with).kernel->source.name);
        if (p.normed_into >= 0) info.strategy = fmt::format("a norm computed in {}, its A", program.groups.at(p.normed_into).kernel->source.name);
        if (p.grouped_into >= 0)
          info.strategy = fmt::format(fmt::runtime(p.kind == GroupKind::kPointwise ? "a KV cache's update written by {}" : "an amax computed in {}'s epilogue"),
                                      program.groups.at(p.grouped_into).kernel->source.name);
        break;
      case CudaGroupProgram::Mode::kGemm:
        info.mode = "gemm";
        info.strategy = "cuBLASLt" +
                        (p.lt_epilogue != LtEpilogue::kNone ? std::string(" with its ") + LtEpilogueName(p.lt_epilogue) + " epilogue" : "") +
                        (p.kernel ? " + epilogue " + info.strategy : std::string()) +
                        (p.why_library.empty() ? "" : " (no template: " + p.why_library + ")");
        break;
      case CudaGroupProgram::Mode::kGemmTemplate:
        info.mode = "gemm template";
        if (p.grouped_into >= 0) {
          const CudaLaunchable& into = *program.groups.at(p.grouped_into).kernel;
          const bool chained = into.template_kernel && into.template_kernel->Kind() == "skinny chain template";
          info.strategy = fmt::format("{} {}", chained ? "its A computed by, and the product chained into," : "grouped over N into", into.source.name);
        }
        if (p.gated_into >= 0) info.strategy = fmt::format("the gate of {}, in its tiles", program.groups.at(p.gated_into).kernel->source.name);
        break;
      case CudaGroupProgram::Mode::kAttentionTemplate: info.mode = "attention template"; break;
      case CudaGroupProgram::Mode::kAttentionBackwardTemplate:
        info.mode = "attention backward template";
        if (p.grouped_into >= 0) info.strategy = fmt::format("written by {}", program.groups.at(p.grouped_into).kernel->source.name);
        break;
      case CudaGroupProgram::Mode::kHost:
        info.mode = "host";
        info.why_host = p.why_host;
        break;
    }
    out.push_back(std::move(info));
  }
  return out;
}

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

// Matmuls whose dtype cuBLASLt does not take, where the template did not take them either,
// run on the host.
void MoveUnsupportedMatmulsToHost(const Graph& g, const FusionPlan& plan, CudaProgram& program) {
  for (CudaGroupProgram& p : program.groups) {
    if (p.mode != CudaGroupProgram::Mode::kGemm) continue;
    DType d = g.node(p.matmul).dtype;
    if (d == DType::kF32 || d == DType::kF16 || d == DType::kBF16) continue;
    p.mode = CudaGroupProgram::Mode::kHost;
    p.host_nodes = plan.groups[p.group].nodes;
    p.why_host = fmt::format("cuBLASLt has no {} matmul", DTypeName(d));
    p.kernel.reset();
    p.prologue.clear();
  }
}

// One graph lowered for the GPU.
class CudaLoweredGraph : public LoweredGraph {
 public:
  Graph graph;
  FusionPlan fusion_plan;
  std::vector<std::string> notes;
  std::vector<bool> inlined;
  CudaProgram program;

  const FusionPlan& plan() const override { return fusion_plan; }
  std::vector<LoweredKernel> Kernels() const override {
    std::vector<LoweredKernel> kernels;
    for (const CudaGroupProgram& p : program.groups)
      for (const CudaLaunchable* k : Launchables(p)) {
        kernels.push_back({&k->kernel, k->is_template});
        for (const Kernel& part : k->launched_with_it) kernels.push_back({&part, false});
      }
    return kernels;
  }
  std::string SourceText() const override { return program.source; }
};

struct CudaObjectCode : ObjectCode {
  CudaCubins cubins;  // no unit: no generated kernel in any graph, nothing was compiled
  // The units compiling while their kernels' stand-ins (in `cubins`) run; null: none.
  std::shared_ptr<const BackgroundCubins> background;
};

const CudaLoweredGraph& AsCuda(const LoweredGraph& graph) {
  auto* lowered = dynamic_cast<const CudaLoweredGraph*>(&graph);
  TF_CHECK(lowered != nullptr);
  return *lowered;
}

const CudaObjectCode& AsCuda(const ObjectCode& code) {
  auto* object = dynamic_cast<const CudaObjectCode*>(&code);
  TF_CHECK(object != nullptr);
  return *object;
}

// Each kernel's function, its dynamic shared-memory limit raised to what it needs. Kernels
// of one unit share a function, which gets the largest need among them.
Status FindFunctions(const CudaDevice& device, const CudaModules& modules, const CudaProgram& program,
                     std::map<std::string, CUfunction>& functions) {
  std::map<CUfunction, const CudaKernelSource*> widest;
  for (const CudaGroupProgram& p : program.groups)
    for (const CudaLaunchable* k : Launchables(p)) {
      ASSIGN_OR_RETURN(CUfunction f, modules.Function(k->source.name));
      functions[k->source.name] = f;
      const CudaKernelSource*& w = widest[f];
      if (!w || k->source.launch.dynamic_shared_bytes > w->launch.dynamic_shared_bytes) w = &k->source;
    }
  for (const auto& [f, source] : widest) RETURN_IF_ERROR(PrepareFunction(device, f, source->launch, source->name));
  return Status::Ok();
}

bool HasKernels(const CudaProgram& program) {
  return std::any_of(program.groups.begin(), program.groups.end(), [](const CudaGroupProgram& p) { return !Launchables(p).empty(); });
}

// The values each group's kernels and library calls touch, per plan step: their buffers (read
// or written), and a cuBLASLt product's operands and bias (templates read operands through
// views, so a value the group's inputs do not name may be read).
std::vector<std::vector<int>> KernelReads(const CudaProgram& program, size_t steps, const Graph& g) {
  std::vector<std::vector<int>> reads(steps);
  for (const CudaGroupProgram& p : program.groups) {
    std::vector<int>& r = reads.at(p.group);
    for (const CudaLaunchable* k : Launchables(p)) r.insert(r.end(), k->buffer_nodes.begin(), k->buffer_nodes.end());
    if (p.mode == CudaGroupProgram::Mode::kGemm) {
      const std::vector<int>& operands = g.node(p.matmul).inputs;
      r.push_back(p.lt_a ? p.lt_a->node : operands[0]);  // (a view: what it reads, not the operand no step writes)
      r.push_back(p.lt_b ? p.lt_b->node : operands[1]);
      if (p.lt_bias >= 0) r.push_back(p.lt_bias);
    }
  }
  return reads;
}

// Scratch memory, cuBLASLt, the arena and every buffer; constants uploaded; the steps captured.
Status PlaceOnDevice(CudaExecutable::State& state, bool any_gemm) {
  CudaExecutable::State* s = &state;
  const Graph& g = s->graph;
  int64_t scratch_bytes = 0;
  for (const CudaGroupProgram& p : s->program.groups)
    for (const CudaLaunchable* k : Launchables(p)) scratch_bytes = std::max(scratch_bytes, k->source.launch.scratch_bytes);
  for (const CudaExecutable::State::Deferred& d : s->deferred) scratch_bytes = std::max(scratch_bytes, d.best.source.launch.scratch_bytes);
  if (scratch_bytes > 0) {
    ASSIGN_OR_RETURN(CUdeviceptr w, s->allocator->Allocate(scratch_bytes, "the kernels' scratch memory"));
    s->scratch = DeviceBuffer(s->allocator, w);
    s->scratch_bytes = scratch_bytes;
    RETURN_IF_ERROR(s->device->Check(s->device->api().cuMemsetD8Async(w, 0, scratch_bytes, s->device->stream()), "zeroing scratch memory"));
  }
  if (any_gemm) {
    ASSIGN_OR_RETURN(s->lt, LtMatmul::Create());
    ASSIGN_OR_RETURN(CUdeviceptr w, s->allocator->Allocate(kCublasLtWorkspaceBytes, "the cuBLASLt workspace"));
    s->workspace = DeviceBuffer(s->allocator, w);
  }

  // Device memory: intermediates in the arena by liveness, everything else its own buffer.
  Schedule schedule = ScheduleFromFusionPlan(g, s->plan);
  WriteGroupedOutputsAtTheirKernel(s->program, schedule);
  const std::vector<std::vector<int>> reads = KernelReads(s->program, s->plan.groups.size(), g);
  AddStepReads(reads, schedule);
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
    // What the group's kernels and library calls touch (KernelReads: a template reads and writes
    // what its arguments name, no product buffer and no copy of an operand it reads through a
    // view), cuBLASLt's product (or, with its own epilogue, the group's output), the outputs.
    for (int node : reads[p.group]) on_device[node] = true;
    if (p.mode == CudaGroupProgram::Mode::kGemm) on_device[p.lt_output >= 0 ? p.lt_output : p.matmul] = true;
    // (A gate's output stays in registers, a norm's is computed where it is read, a chain's
    // first product's output is handed over in shared memory.)
    if (p.gated_into < 0 && p.normed_into < 0 && !p.output_unstored)
      for (int out : s->plan.groups[p.group].outputs)
        if (std::find(p.unstored_outputs.begin(), p.unstored_outputs.end(), out) == p.unstored_outputs.end()) on_device[out] = true;
  }
  s->address.assign(g.num_nodes(), 0);
  for (const Node& n : g.nodes()) {
    bool generator = s->inlined[n.id] || n.op == OpCode::kConstant;
    if (!on_device[n.id]) continue;
    if (arena_offset[n.id] >= 0) {
      s->address[n.id] = s->arena.get() + arena_offset[n.id];
      continue;
    }
    if (n.op == OpCode::kConstant && n.attrs.value && static_cast<int64_t>(n.attrs.value->num_bytes()) == s->Bytes(n.id)) {
      ASSIGN_OR_RETURN(std::shared_ptr<const SharedDeviceConstant> constant,
                       DeviceConstants::Get(s->device).Upload(n.attrs.value, *s->allocator, DescribeNode(n)));
      s->address[n.id] = constant->buffer.get();
      s->constants.push_back(std::move(constant));
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
  s->caller_nodes = g.inputs();
  for (const Graph::Output& o : g.outputs()) s->caller_nodes.push_back(o.node);
  s->caller_copies.clear();
  std::map<int, size_t> first_pointer;  // node -> its first index among caller_nodes
  for (size_t i = 0; i < s->caller_nodes.size(); ++i) {
    const int node = s->caller_nodes[i];
    const bool output = i >= g.inputs().size();
    const bool unwritten = s->inlined[node] || g.node(node).op == OpCode::kConstant;
    auto [it, first] = first_pointer.emplace(node, i);
    if (output && !first) s->caller_copies.push_back({i, static_cast<int>(it->second)});
    else if (output && unwritten) s->caller_copies.push_back({i, -1});
  }
  s->own_pointers.clear();
  for (int node : s->caller_nodes) s->own_pointers.push_back(s->address[node]);
  if (!s->has_host_steps) {
    ASSIGN_OR_RETURN(s->captured, s->Capture(s->address));
  }
  return Status::Ok();
}

}  // namespace

CudaBackend::CudaBackend(CudaCompileOptions options, CudaDevice* device, CudaTarget target, NvrtcCompiler nvrtc)
    : options_(std::move(options)),
      device_(device),
      target_(std::move(target)),
      capabilities_(target_),
      nvrtc_(std::move(nvrtc)),
      nvrtc_version_(nvrtc_.version()) {}

namespace {

// What the lowering targets: `arch` with `sm_count` SMs, and the options' template choices.
CudaTarget TargetFor(const std::string& arch, int sm_count, const CudaCompileOptions& options) {
  CudaTarget target;
  target.arch = arch;
  target.sm_count = sm_count;
  target.gemm = options.gemm;
  target.gemm_path_at = options.gemm_path_at;
  target.attention = options.attention;
  target.tf32 = options.precision == MatmulPrecision::kHigh;
  target.overrides = options.overrides;
  // The rule's deepest GEMM ring moved for measurement (whole models A/B without a rebuild).
  if (target.overrides.gemm_max_stages == 0) target.overrides.gemm_max_stages = PositiveSetting("TILEFUSE_GEMM_MAX_STAGES");
  if (target.overrides.gemm_block_n == 0) target.overrides.gemm_block_n = PositiveSetting("TILEFUSE_GEMM_BLOCK_N");  // the tiles' width likewise
  if (SwitchedOff("TILEFUSE_GEMM_GROUP_N")) target.overrides.gemm_group_n = false;  // a kernel per product, for comparison
  if (SwitchedOn("TILEFUSE_GEMM_F32_STAGED")) target.overrides.gemm_f32_staged = true;  // f32 outputs out by TMA
  if (SwitchedOn("TILEFUSE_GEMM_GROUP_N_ANY")) target.overrides.gemm_group_n_any = true;  // grouped at any tile count
  if (SwitchedOff("TILEFUSE_GEMM_GATES")) target.overrides.gemm_gates = false;      // a gate's product a kernel of its own
  if (SwitchedOn("TILEFUSE_GEMM_ROW_NORMS")) target.overrides.gemm_row_norms = true;  // RMS norms in their products (no faster, measured)
  if (SwitchedOff("TILEFUSE_SKINNY_NORMS")) target.overrides.skinny_norms = false;  // the norms' own kernels, for comparison
  if (SwitchedOff("TILEFUSE_SKINNY_CLUSTERS")) target.overrides.skinny_clusters = false;  // split-K through scratch memory, for comparison
  if (SwitchedOff("TILEFUSE_DECODE_PREFETCH")) target.overrides.decode_prefetch = false;  // the attention's K/V not prefetched, for comparison
  if (SwitchedOff("TILEFUSE_SKINNY_PREFETCH")) target.overrides.skinny_prefetch = false;  // the epilogue's loads after the sums, for comparison
  if (SwitchedOn("TILEFUSE_SKINNY_CHAINS")) target.overrides.skinny_chains = true;        // a decode MLP's two products as one kernel
  if (SwitchedOff("TILEFUSE_CACHE_UPDATE_IN_ATTENTION")) target.overrides.cache_updates_in_attention = false;  // the update's own kernel
  if (SwitchedOn("TILEFUSE_PROJECTION_IN_ATTENTION")) target.overrides.projection_in_attention = true;  // o_proj in the decode attention
  if (SwitchedOff("TILEFUSE_AMAX_IN_EPILOGUE")) target.overrides.amax_in_epilogue = false;  // an amax's own reduction kernel
  if (SwitchedOn("TILEFUSE_TRIGGER_FIRST")) target.overrides.trigger_before_wait = true;  // the kernel behind released before the wait
  if (SwitchedOff("TILEFUSE_LAUNCH_TOGETHER")) target.overrides.launch_together = false;  // a launch per kernel
  if (SwitchedOff("TILEFUSE_LT_VIEWS")) target.overrides.lt_views = false;          // cuBLASLt's operands copied first
  target.template_configs = options.template_configs;
  target.fault = options.fault;
  target.stand_ins = options.background_compile;
  target.stand_ins_only = options.stand_ins_only;
  return target;
}

}  // namespace

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::ForArch(const std::string& arch, const CudaCompileOptions& options) {
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(options.cache_dir));
  return std::unique_ptr<CudaBackend>(new CudaBackend(options, nullptr, TargetFor(arch, CudaTarget{}.sm_count, options), std::move(nvrtc)));
}

StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::ForDevice(const CudaCompileOptions& options) {
  ASSIGN_OR_RETURN(CudaDevice* device, CudaDevice::Get(options.device_ordinal));
  RETURN_IF_ERROR(device->MakeCurrent());
  // The target whole before the backend copies it into its capabilities.
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(options.cache_dir));
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(options, device, TargetFor(device->arch(), device->sm_count(), options), std::move(nvrtc)));
}

StatusOr<PlannedGraph> CudaBackend::Plan(const Graph& graph, PlannerOptions options) {
  // The cost model of the GPU it runs on (H200s have more bandwidth and L2 than H100s).
  options.device = device_ && device_->name().find("H200") != std::string::npos ? "h200" : "h100-sxm";
  ASSIGN_OR_RETURN(CudaPlan planned, PlanFusionForCuda(graph, options, target_));
  return PlannedGraph{std::move(planned.plan), std::move(planned.split_attention)};
}

StatusOr<std::unique_ptr<LoweredGraph>> CudaBackend::Lower(const Graph& graph, PlannedGraph planned, const std::string& prefix) {
  auto lowered = std::make_unique<CudaLoweredGraph>();
  lowered->graph = graph;
  lowered->fusion_plan = std::move(planned.plan);
  lowered->notes = std::move(planned.notes);
  lowered->inlined = FindInlinedGenerators(graph);
  ASSIGN_OR_RETURN(lowered->program, BuildCudaProgram(graph, lowered->fusion_plan, lowered->inlined, prefix, options_.configs, target_));
  MoveUnsupportedMatmulsToHost(graph, lowered->fusion_plan, lowered->program);
  return std::unique_ptr<LoweredGraph>(std::move(lowered));
}

StatusOr<std::unique_ptr<ObjectCode>> CudaBackend::Build(const std::vector<const LoweredGraph*>& graphs) {
  auto code = std::make_unique<CudaObjectCode>();
  std::vector<CudaKernelSource> sources;
  std::map<std::string, const CudaLaunchable*> stand_ins;  // by kernel name
  for (const LoweredGraph* g : graphs)
    for (const CudaGroupProgram& p : AsCuda(*g).program.groups)
      for (const CudaLaunchable* k : Launchables(p)) {
        sources.push_back(k->source);
        if (k->stand_in) stand_ins[k->source.name] = k->stand_in.get();
      }
  // A unit per distinct kernel, compiled in parallel (backend/cuda/cuda_compile_units.h);
  // the dump keeps the whole graph's source, as Lower printed it, for people to read. A unit
  // whose kernels all have stand-ins and that the cache does not hold compiles in the
  // background, their stand-ins now.
  std::vector<CudaCompileUnit> now, later;
  std::vector<CudaKernelSource> standing_in;
  for (CudaCompileUnit& unit : SplitIntoCompileUnits(sources)) {
    const bool quick = std::all_of(unit.kernels.begin(), unit.kernels.end(), [&](const std::string& k) { return stand_ins.count(k) > 0; });
    if (!quick || nvrtc_.Cached(unit.source, target_.arch)) {
      now.push_back(std::move(unit));
      continue;
    }
    for (const std::string& k : unit.kernels) standing_in.push_back(stand_ins.at(k)->source);
    later.push_back(std::move(unit));
  }
  for (CudaCompileUnit& unit : SplitIntoCompileUnits(standing_in)) now.push_back(std::move(unit));
  // Where the cores outnumber all the units, the background compiles start first: the full
  // forms arrive sooner and the compile waited for is no slower. With fewer cores they would
  // take cores from it, so they start once it is done.
  const size_t units = now.size() + later.size();
  const bool first = !later.empty() && units <= static_cast<size_t>(NvrtcThreads(units));
  const bool after = !later.empty() && !first;
  if (first) code->background = CompileUnitsInBackground(nvrtc_, std::move(later), target_.arch);
  ASSIGN_OR_RETURN(code->cubins, CompileUnits(nvrtc_, std::move(now), target_.arch));
  if (after) code->background = CompileUnitsInBackground(nvrtc_, std::move(later), target_.arch);
  return std::unique_ptr<ObjectCode>(std::move(code));
}

const CudaProgram& CudaBackend::ProgramOf(const LoweredGraph& graph) { return AsCuda(graph).program; }
const std::vector<std::string>& CudaBackend::PlanNotesOf(const LoweredGraph& graph) { return AsCuda(graph).notes; }
const CudaCubins& CudaBackend::CubinsOf(const ObjectCode& code) { return AsCuda(code).cubins; }
std::shared_ptr<const BackgroundCubins> CudaBackend::BackgroundOf(const ObjectCode& code) { return AsCuda(code).background; }

StatusOr<std::unique_ptr<Executable>> CudaBackend::Load(std::unique_ptr<LoweredGraph> graph, const ObjectCode& code) {
  if (!device_) return NotFound(fmt::format("compiled for {} without a GPU: there is nothing to load it on", target_.arch));
  auto* lowered = dynamic_cast<CudaLoweredGraph*>(graph.get());
  TF_CHECK(lowered != nullptr);
  const CudaObjectCode& object = AsCuda(code);
  RETURN_IF_ERROR(device_->MakeCurrent());
  auto s = std::make_unique<CudaExecutable::State>();
  s->device = device_;
  s->allocator = &DeviceAllocator::Get(device_);
  s->graph = std::move(lowered->graph);
  s->plan = std::move(lowered->fusion_plan);
  s->plan_notes = std::move(lowered->notes);
  s->inlined = std::move(lowered->inlined);
  s->program = std::move(lowered->program);
  // Until their own forms are compiled, their stand-ins run.
  s->background = object.background;
  for (size_t i = 0; i < s->program.groups.size(); ++i) {
    std::optional<CudaLaunchable>& kernel = s->program.groups[i].kernel;
    if (!kernel || !kernel->stand_in || !object.background || !object.background->kernels.count(kernel->source.name)) continue;
    CudaLaunchable stand_in = *kernel->stand_in;
    s->deferred.push_back({i, std::move(*kernel)});
    kernel = std::move(stand_in);
  }
  s->kernels = DescribeKernels(s->program, s->plan);
  s->poison = options_.poison_outputs;
  s->tf32_matmul = options_.precision == MatmulPrecision::kHigh;
  s->cache_dir = options_.cache_dir;
  s->nvrtc_version = nvrtc_version_;
  s->nvrtc_compiles = object.cubins.compiles;
  s->nvrtc_cache_hits = object.cubins.cache_hits();
  bool any_gemm = false;
  for (const CudaGroupProgram& p : s->program.groups) {
    any_gemm = any_gemm || p.mode == CudaGroupProgram::Mode::kGemm;
    s->has_host_steps = s->has_host_steps || p.mode == CudaGroupProgram::Mode::kHost;
  }
  if (HasKernels(s->program)) {
    TF_CHECK(!object.cubins.units.empty());
    ASSIGN_OR_RETURN(s->modules, CudaModules::Load(*device_, object.cubins));
    RETURN_IF_ERROR(FindFunctions(*device_, s->modules, s->program, s->functions));
  }
  // Owned from here on: an error below unloads the modules with the executable.
  auto executable = std::make_unique<CudaExecutable>(std::move(s));
  RETURN_IF_ERROR(PlaceOnDevice(*executable->state(), any_gemm));
  return std::unique_ptr<Executable>(std::move(executable));
}

}  // namespace tilefuse

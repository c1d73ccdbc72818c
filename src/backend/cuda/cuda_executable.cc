#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/cuda_executable_state.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <utility>

#include "reference/interpreter.h"
#include "backend/cuda/cublaslt_matmul.h"
#include "backend/cuda/cuda_in_place_outputs.h"
#include "backend/cuda/cuda_driver.h"
#include "codegen/cuda/cuda_config_json.h"
#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_handles.h"
#include "backend/cuda/cuda_modules.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/device_allocator.h"
#include "backend/cuda/kernel_launch.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "backend/cuda/queued_timing.h"
#include "backend/cuda/staged_copies.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "runtime/measure.h"
#include "support/check.h"
#include "support/env_switch.h"

namespace tilefuse {


Status CudaExecutable::State::Launch(const CudaLaunchable& k, const std::vector<CUdeviceptr>& at, CUstream stream, bool first) const {
  if (poison)
    for (int out : k.outputs) RETURN_IF_ERROR(device->Check(api().cuMemsetD8Async(at[out], 0xFF, Bytes(out), stream), "poisoning " + k.source.name));
  // A block per unit of work for the loop kernels (they also stride, for grids past the
  // limit): many blocks keep loads in flight while others compute, and the hardware
  // balances the last wave. (One resident wave of striding threads measured 74% of the
  // copy rate on GELU f32, H200, 2026-11-21.) Templates bring their own grid.
  return LaunchKernel(*device, functions.at(k.source.name), k.source.launch, at, scratch.get(), stream, k.source.name, !first);
}

// The product of group `p` through cuBLASLt, with the epilogue cuBLASLt fuses when it has
// one (then it writes the group's output in place of the product).
Status CudaExecutable::State::Matmul(const CudaGroupProgram& program, const std::vector<CUdeviceptr>& at, CUstream stream) const {
  const int matmul = program.matmul;
  const int written = program.lt_output >= 0 ? program.lt_output : matmul;
  const Node& mm = graph.node(matmul);
  const Shape &sa = graph.node(mm.inputs[0]).shape, &sb = graph.node(mm.inputs[1]).shape, &out = mm.shape;
  LtMatmulProblem p;
  p.dtype = mm.dtype;
  p.tf32 = tf32_matmul || mm.attrs.tf32;  // (a PyTorch convolution under cudnn.allow_tf32)
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
    return device->Check(api().cuMemsetD8Async(at[matmul], 0, Bytes(matmul), stream), "zeroing an empty-K matmul");
  if (poison) RETURN_IF_ERROR(device->Check(api().cuMemsetD8Async(at[written], 0xFF, Bytes(written), stream), "poisoning matmul"));
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
  const bool viewed = program.lt_a || program.lt_b;
  if (progression(sa, &step_a) && progression(sb, &step_b)) {
    // A weight shared by consecutive entries of A (a linear layer over [N, H, W, C] or [B, T,
    // D]) is one product over all their rows: ConvNeXt-tiny's f32 MLP at b32 ran as 224 strided
    // products of 7 rows each, 1.07 ms for what one product of 1568 rows does in 0.20 ms.
    if (!viewed && batches > 1 && step_b == 0 && step_a == 1) {
      p.m *= batches;
      batches = 1;
      step_a = 0;
    }
    p.batch = batches;
    p.batch_stride_a = step_a * p.m * p.k;
    p.batch_stride_b = step_b * p.k * p.n;
    p.batch_stride_d = p.m * p.n;
    // An operand read through its view where it lies (its prologue dropped): its own start,
    // row stride and batch stride.
    CUdeviceptr a = at[mm.inputs[0]], b = at[mm.inputs[1]];
    if (const std::optional<LibraryOperandView>& v = program.lt_a) {
      a = at[v->node] + v->offset * esize;
      p.lda = v->row_stride;
      p.trans_a = v->transposed;
      p.batch_stride_a = v->batch_stride;
    }
    if (const std::optional<LibraryOperandView>& v = program.lt_b) {
      b = at[v->node] + v->offset * esize;
      p.ldb = v->row_stride;
      p.trans_b = v->transposed;
      p.batch_stride_b = v->batch_stride;
    }
    return lt->Run(p, a, b, at[written], bias, workspace.get(), kCublasLtWorkspaceBytes, stream);
  }
  if (viewed) return Internal("a viewed cuBLASLt operand with irregular batches");
  for (int64_t b = 0; b < batches; ++b)
    RETURN_IF_ERROR(lt->Run(p, at[mm.inputs[0]] + offset(sa, b) * p.m * p.k * esize, at[mm.inputs[1]] + offset(sb, b) * p.k * p.n * esize,
                            at[written] + b * p.m * p.n * esize, bias, workspace.get(), kCublasLtWorkspaceBytes, stream));
  return Status::Ok();
}

// A node's value on the host, for a host step: downloaded, a constant, or evaluated
// (inlined generators, and members of the same host group computed earlier).
StatusOr<Tensor> CudaExecutable::State::HostValue(int node, std::map<int, Tensor>& local) const {
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

Status CudaExecutable::State::RunHostGroup(const CudaGroupProgram& p, const std::vector<CUdeviceptr>& at) const {
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
void CudaExecutable::State::HeadStart() const {
  constexpr int64_t kBytes = 64 << 20;
  if (!head_start.get()) {
    StatusOr<CUdeviceptr> p = allocator->Allocate(kBytes, "the timing head start");
    if (!p.ok()) return;  // timings without it, as before
    head_start = DeviceBuffer(allocator, *p);
  }
  for (int i = 0; i < 12; ++i) api().cuMemsetD8Async(head_start.get(), 0, kBytes, device->stream());
}

Status CudaExecutable::State::Enqueue(const std::vector<CUdeviceptr>& at, std::vector<KernelTiming>* timings, CUstream stream) const {
  TF_CHECK_MSG(timings == nullptr || stream == device->stream(), "timed steps run on tilefuse's stream");
  if (timings) HeadStart();
  std::vector<CudaEvent> events;  // released on every return
  auto mark = [&]() -> Status {
    if (!timings) return Status::Ok();
    ASSIGN_OR_RETURN(CudaEvent e, CreateCudaEvent(*device));
    events.push_back(std::move(e));
    return device->Check(api().cuEventRecord(events.back().get(), stream), "cuEventRecord");
  };
  RETURN_IF_ERROR(mark());
  // The model's first kernel follows the caller's work: launched behind all of it.
  bool first = true;
  auto launch = [&](const CudaLaunchable& k) {
    const Status launched = Launch(k, at, stream, first);
    first = false;
    return launched;
  };
  for (const CudaGroupProgram& p : program.groups) {
    switch (p.mode) {
      case CudaGroupProgram::Mode::kGenerated:
        if (p.kernel) RETURN_IF_ERROR(launch(*p.kernel));  // (none: launched together with an earlier group's)
        break;
      case CudaGroupProgram::Mode::kGemm:
        for (const CudaLaunchable& k : p.prologue) RETURN_IF_ERROR(launch(k));
        RETURN_IF_ERROR(Matmul(p, at, stream));
        first = false;
        if (p.kernel) RETURN_IF_ERROR(launch(*p.kernel));
        break;
      case CudaGroupProgram::Mode::kGemmTemplate:
      case CudaGroupProgram::Mode::kAttentionBackwardTemplate:
        for (const CudaLaunchable& k : p.prologue) RETURN_IF_ERROR(launch(k));
        if (p.kernel) RETURN_IF_ERROR(launch(*p.kernel));  // (none: grouped into an earlier group's)
        break;
      case CudaGroupProgram::Mode::kAttentionTemplate: RETURN_IF_ERROR(launch(*p.kernel)); break;
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

StatusOr<CudaGraphExec> CudaExecutable::State::Capture(const std::vector<CUdeviceptr>& at, CudaGraphExec reuse) const {
  CUstream stream = device->stream();
  RETURN_IF_ERROR(device->Check(api().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture"));
  Status enqueued = Enqueue(at, nullptr, stream);
  CUgraph g = nullptr;
  CUresult ended = api().cuStreamEndCapture(stream, &g);
  const bool captured_ok = enqueued.ok() && ended == CUDA_SUCCESS;
  CUgraphExecUpdateResultInfo info{};
  // An update fails where the topology differs (it does not here: the same steps); then the
  // graph is instantiated as if there were nothing to reuse.
  const bool updated = captured_ok && reuse.get() && api().cuGraphExecUpdate(reuse.get(), g, &info) == CUDA_SUCCESS;
  CUgraphExec exec = nullptr;
  CUresult instantiated = captured_ok && !updated ? api().cuGraphInstantiateWithFlags(&exec, g, 0) : CUDA_SUCCESS;
  if (g) api().cuGraphDestroy(g);
  RETURN_IF_ERROR(enqueued);
  RETURN_IF_ERROR(device->Check(ended, "cuStreamEndCapture"));
  if (updated) return reuse;
  RETURN_IF_ERROR(device->Check(instantiated, "cuGraphInstantiate"));
  return CudaGraphExec(device, exec);
}

Status CudaExecutable::State::AdoptBackgroundKernels(bool wait) {
  if (!background) return Status::Ok();
  if (!wait && !background->Ready()) return Status::Ok();
  const std::shared_ptr<const BackgroundCubins> done = std::move(background);
  const StatusOr<CudaCubins> cubins = done->Get();
  if (!cubins.ok()) {
    plan_notes.push_back(fmt::format("{} kernel(s) kept their stand-ins: their own form failed to compile: {}", deferred.size(),
                                     cubins.status().message()));
    deferred.clear();
    return Status::Ok();
  }
  RETURN_IF_ERROR(device->MakeCurrent());
  ASSIGN_OR_RETURN(CudaModules loaded, CudaModules::Load(*device, *cubins));
  // Every function found before any is used: on an error the stand-ins keep running whole.
  std::vector<CUfunction> found;
  for (const Deferred& d : deferred) {
    ASSIGN_OR_RETURN(CUfunction f, loaded.Function(d.best.source.name));
    RETURN_IF_ERROR(PrepareFunction(*device, f, d.best.source.launch, d.best.source.name));
    found.push_back(f);
  }
  for (size_t i = 0; i < deferred.size(); ++i) {
    functions[deferred[i].best.source.name] = found[i];
    program.groups[deferred[i].group].kernel = std::move(deferred[i].best);
  }
  deferred.clear();
  later_modules.push_back(std::move(loaded));
  nvrtc_compiles += cubins->compiles;
  kernels = DescribeKernels(program, plan);
  ++kernel_swaps;
  // Graphs captured with the stand-ins would run them: captured again (one in flight is
  // freed when it completes).
  caller_graphs.clear();
  caller_captures = 0;
  if (captured.get()) {
    ASSIGN_OR_RETURN(captured, Capture(address));
  }
  return Status::Ok();
}

CudaExecutable::CudaExecutable(std::unique_ptr<State> state) : state_(std::move(state)) {}
CudaExecutable::~CudaExecutable() {
  if (!state_) return;
  state_->captured = CudaGraphExec();  // before the module its kernels live in
  state_->caller_graphs.clear();
  state_->modules = CudaModules();
  state_->later_modules.clear();
}
Status CudaExecutable::FinishCompiles() { return state_->AdoptBackgroundKernels(/*wait=*/true); }
int CudaExecutable::pending_compiles() const { return static_cast<int>(state_->deferred.size()); }
int CudaExecutable::kernel_swaps() const { return state_->kernel_swaps; }
const Graph& CudaExecutable::graph() const { return state_->graph; }
const FusionPlan& CudaExecutable::plan() const { return state_->plan; }
const std::vector<CudaKernelInfo>& CudaExecutable::kernels() const { return state_->kernels; }
const CudaProgram& CudaExecutable::program() const { return state_->program; }
const std::string& CudaExecutable::source() const { return state_->program.source; }
std::string CudaExecutable::device_name() const { return state_->device->name(); }
int64_t CudaExecutable::nvrtc_compiles() const { return state_->nvrtc_compiles; }
int64_t CudaExecutable::nvrtc_cache_hits() const { return state_->nvrtc_cache_hits; }
int64_t CudaExecutable::arena_bytes() const { return state_->memory.arena_bytes; }
bool CudaExecutable::captured() const { return state_->captured.get() != nullptr; }
CudaExecutable::RunCounts CudaExecutable::device_run_counts() const { return state_->run_counts; }
bool CudaExecutable::OutputMayOverwriteInput(int output, int input) const {
  return state_->captured.get() && tilefuse::OutputMayOverwriteInput(state_->graph, state_->plan, state_->program, output, input);
}
std::string CudaExecutable::device_arch() const { return state_->device->arch(); }
int CudaExecutable::sm_count() const { return state_->device->sm_count(); }
int CudaExecutable::driver_version() const { return state_->device->driver_version(); }
std::string CudaExecutable::nvrtc_version() const { return state_->nvrtc_version; }
const std::vector<std::string>& CudaExecutable::plan_notes() const { return state_->plan_notes; }

std::vector<const CudaLaunchable*> CudaExecutable::launchables() const {
  std::vector<const CudaLaunchable*> out;
  for (const CudaGroupProgram& p : state_->program.groups)
    for (const CudaLaunchable* k : Launchables(p))
      if (!k->is_template && k->launched_with_it.empty()) out.push_back(k);  // (parts keep their forms)
  return out;
}

namespace {

struct VariantResult {
  std::optional<double> time_us;
  std::string error;
};

// The variants that emitted compiled, each its own unit (in parallel; the default's unit is
// usually the graph's own kernel, found in the cache) and loaded. A variant that does not
// compile gets its error and sinks no other.
StatusOr<CudaModules> CompileAndLoadVariants(CudaExecutable::State& s, const std::vector<CudaLaunchable>& variants,
                                             std::vector<VariantResult>& results) {
  std::vector<CudaKernelSource> sources;
  std::map<std::string, size_t> variant_of;
  for (size_t i = 0; i < variants.size(); ++i)
    if (results[i].error.empty()) {
      sources.push_back(variants[i].source);
      variant_of[variants[i].source.name] = i;
    }
  std::vector<CudaCompileUnit> units = SplitIntoCompileUnits(sources);
  ASSIGN_OR_RETURN(NvrtcCompiler nvrtc, NvrtcCompiler::Create(s.cache_dir));
  std::vector<StatusOr<CubinResult>> compiled = CompileEachUnit(nvrtc, units, s.device->arch());
  CudaCubins cubins;
  for (size_t u = 0; u < units.size(); ++u) {
    if (!compiled[u].ok()) {
      for (const std::string& kernel : units[u].kernels) results[variant_of[kernel]].error = compiled[u].status().message();
      continue;
    }
    cubins.units.push_back(std::move(units[u]));
    cubins.cubins.push_back(std::move(*compiled[u]));
  }
  return CudaModules::Load(*s.device, cubins);
}

// Times each variant of `base` alone on the graph's buffers (run the graph once first so
// they hold real data): each emitted source its own compile unit, device events, `warmup`
// launches, median of `repeats`, inputs rotated among copies so repeats do not read L2; a
// winner much faster than the first (the default) is measured again with it. A variant
// that did not emit, compile or launch gets its error.
StatusOr<std::vector<VariantResult>> TimeVariants(CudaExecutable::State& s, const CudaLaunchable& base,
                                                  const std::vector<StatusOr<CudaKernelSource>>& emitted, int warmup, int repeats) {
  const CudaDriverApi& api = s.api();
  std::vector<VariantResult> results(emitted.size());
  std::vector<CudaLaunchable> variants(emitted.size(), base);
  int64_t scratch_bytes = 0;
  for (size_t i = 0; i < emitted.size(); ++i) {
    if (!emitted[i].ok()) {
      results[i].error = emitted[i].status().message();
      continue;
    }
    variants[i].source = *emitted[i];
    scratch_bytes = std::max(scratch_bytes, emitted[i]->launch.scratch_bytes);
  }
  // A variant may need more scratch memory (split-K partials) than the graph's kernels: it
  // gets its own, and the graph's is put back on every return (captured graphs hold its
  // address).
  struct RestoreScratch {
    CudaExecutable::State& s;
    std::optional<DeviceBuffer> saved;
    ~RestoreScratch() {
      if (saved) s.scratch = std::move(*saved);
    }
  } restore{s, std::nullopt};
  if (scratch_bytes > s.scratch_bytes) {
    ASSIGN_OR_RETURN(CUdeviceptr w, s.allocator->Allocate(scratch_bytes, "the tuned variants' scratch memory"));
    DeviceBuffer bigger(s.allocator, w);
    RETURN_IF_ERROR(s.device->Check(api.cuMemsetD8Async(w, 0, scratch_bytes, s.device->stream()), "zeroing scratch memory"));
    restore.saved = std::exchange(s.scratch, std::move(bigger));
  }
  ASSIGN_OR_RETURN(CudaModules modules, CompileAndLoadVariants(s, variants, results));
  // Rotated copies of the kernel's inputs, so repeated launches read device memory.
  std::vector<int> inputs;
  int64_t input_bytes = 0;
  for (int node : base.buffer_nodes)
    if (std::find(base.outputs.begin(), base.outputs.end(), node) == base.outputs.end()) {
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
  auto time_variant = [&](size_t i, int n) -> StatusOr<double> {
    ASSIGN_OR_RETURN(CUfunction f, modules.Function(variants[i].source.name));
    // Dynamic shared memory past 48 KB (the templates') must be asked for per function.
    RETURN_IF_ERROR(PrepareFunction(*s.device, f, variants[i].source.launch, variants[i].source.name));
    std::map<std::string, CUfunction> saved;
    std::swap(saved, s.functions);
    s.functions[variants[i].source.name] = f;
    bool poison = s.poison;
    s.poison = false;
    // Warm-up, then the launches timed queued ahead of the GPU: a template's launch encodes
    // its tensor maps on the host first, which a launch timed on an idle stream would count.
    auto timed = [&]() -> StatusOr<std::vector<double>> {
      for (int rep = 0; rep < warmup; ++rep) RETURN_IF_ERROR(s.Launch(variants[i], tables[rep % rotations], s.device->stream()));
      return TimeQueuedCalls(*s.device, n, [&](int rep) { return s.Launch(variants[i], tables[(warmup + rep) % rotations], s.device->stream()); });
    };
    StatusOr<std::vector<double>> us = timed();
    s.poison = poison;
    std::swap(saved, s.functions);
    if (!us.ok()) return us.status();
    return MedianOf(std::move(*us));
  };
  for (size_t i = 0; i < results.size() && status.ok(); ++i) {
    if (!results[i].error.empty()) continue;
    StatusOr<double> t = time_variant(i, repeats);
    if (t.ok()) results[i].time_us = *t;
    else results[i].error = t.status().message();
  }
  // A winner much faster than the default (the first configuration) is measured again,
  // with the default, before anyone believes it.
  if (status.ok() && results[0].time_us) {
    size_t best = 0;
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].time_us && *results[i].time_us < *results[best].time_us) best = i;
    if (best != 0 && *results[best].time_us < 0.85 * *results[0].time_us)
      for (size_t i : {size_t{0}, best}) {
        StatusOr<double> t = time_variant(i, 2 * repeats);
        if (t.ok()) results[i].time_us = *t;
      }
  }
  RETURN_IF_ERROR(status);
  return results;
}

}  // namespace

StatusOr<std::vector<VariantTiming>> CudaExecutable::MeasureVariants(const std::string& name, const std::vector<nlohmann::json>& configs,
                                                                   int warmup, int repeats) {
  RETURN_IF_ERROR(FinishCompiles());  // the best forms are the ones to measure against
  RETURN_IF_ERROR(state_->device->MakeCurrent());
  const CudaLaunchable* base = nullptr;
  for (const CudaGroupProgram& p : state_->program.groups)
    for (const CudaLaunchable* k : Launchables(p))
      if (k->source.name == name) base = k;
  if (!base) return NotFound(fmt::format("no generated kernel named {}", name));
  const int sm_count = state_->device->sm_count();
  std::vector<StatusOr<CudaKernelSource>> emitted;
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string variant = fmt::format("{}_variant{}", name, i);
    if (base->template_kernel) {
      emitted.push_back(base->template_kernel->Emit(variant, configs[i], sm_count));
      continue;
    }
    Kernel k = base->kernel;
    k.name = variant;
    CudaKernelConfig config = CudaConfigFromJson(configs[i]);
    config.sm_count = sm_count;
    emitted.push_back(EmitCudaKernel(k, config));
  }
  ASSIGN_OR_RETURN(std::vector<VariantResult> results, TimeVariants(*state_, *base, emitted, warmup, repeats));
  std::vector<VariantTiming> timings;
  for (size_t i = 0; i < configs.size(); ++i) timings.push_back({configs[i], results[i].time_us, results[i].error});
  return timings;
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

StatusOr<std::vector<Tensor>> CudaExecutable::Run(const std::vector<Tensor>& inputs, std::vector<KernelTiming>* timings) {
  State& s = *state_;
  const Graph& g = s.graph;
  RETURN_IF_ERROR(CheckInputs(g, inputs));
  // Timed runs are for the kernels that will run from now on: they wait for them.
  RETURN_IF_ERROR(s.AdoptBackgroundKernels(/*wait=*/timings != nullptr));
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaDriverApi& api = s.api();
  // Every copy goes on tilefuse's own (non-blocking) stream: a plain cuMemcpyHtoD runs on
  // the legacy stream, which that stream does not wait for, and returns before the DMA
  // from a pageable buffer lands (random graphs on the H200 read half-copied inputs).
  for (size_t i = 0; i < inputs.size(); ++i)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyHtoDAsync(s.address[g.inputs()[i]], inputs[i].data(), inputs[i].num_bytes(), s.device->stream()),
                                    "uploading an input"));
  // The graph's own buffers passed as a caller's: RunOnDevice replays the graph captured at
  // load on them. Graphs with host steps, and timed runs, go step by step.
  if (s.captured.get() && !timings) {
    std::vector<uint64_t> own(s.own_pointers.begin(), s.own_pointers.begin() + g.inputs().size());
    std::vector<uint64_t> own_outputs(s.own_pointers.begin() + g.inputs().size(), s.own_pointers.end());
    RETURN_IF_ERROR(RunOnDevice(own, own_outputs, reinterpret_cast<uint64_t>(s.device->stream())));
  } else {
    RETURN_IF_ERROR(s.Enqueue(s.address, timings, s.device->stream()));
  }
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

// Adds its scope's host time to a counter (RunCounts' host_ns fields: where RunOnDevice's time
// goes, for a decode step whose host path bounds it).
class HostTimeTo {
 public:
  explicit HostTimeTo(int64_t& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~HostTimeTo() { total_ += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count(); }
  HostTimeTo(const HostTimeTo&) = delete;
  HostTimeTo& operator=(const HostTimeTo&) = delete;

 private:
  int64_t& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

// The steps on the caller's pointers `key` (inputs, then outputs; caller_nodes' order), each
// node at its first pointer: a graph captured on them when they were seen before, else the
// kernels launched one by one.
Status CudaExecutable::State::RunInPlace(const std::vector<uint64_t>& key, CUstream on) {
  // Newest first: a decode loop replays the graph it captured last (the search took ~0.2 µs a
  // run on an H100 host, host_ns_finding_graph, 2026-12-06: not a cost either way).
  auto cached = caller_graphs.rend();
  {
    HostTimeTo finding(run_counts.host_ns_finding_graph);
    cached = std::find_if(caller_graphs.rbegin(), caller_graphs.rend(), [&](const auto& e) { return e.first == key; });
  }
  if (cached != caller_graphs.rend()) {
    ++run_counts.replays;
    ++caller_replays;
    HostTimeTo timed(run_counts.host_ns_in_launches);
    return device->Check(api().cuGraphLaunch(cached->second.get(), on), "cuGraphLaunch");
  }
  std::vector<CUdeviceptr> at = address;
  std::vector<bool> bound(graph.num_nodes(), false);
  for (size_t i = 0; i < key.size(); ++i)
    if (!bound[caller_nodes[i]]) {
      bound[caller_nodes[i]] = true;
      at[caller_nodes[i]] = key[i];
    }
  for (const CallerCopy& c : caller_copies)
    if (c.from < 0) at[caller_nodes[c.to]] = address[caller_nodes[c.to]];  // no kernel writes it: its own buffer
  // A capture pays where its graph replays: kFreeCaptures of them, then one more per
  // kReplaysPerCapture replays (a decode loop's step, captured once a generation on the new
  // cache and replayed every token, keeps capturing; a training step's activations, new
  // every call and never replayed, stop at kFreeCaptures and run kernel by kernel).
  constexpr int kFreeCaptures = 16;
  constexpr int64_t kReplaysPerCapture = 16;
  const bool may_capture = caller_captures < kFreeCaptures + caller_replays / kReplaysPerCapture;
  auto seen = std::find(caller_seen.begin(), caller_seen.end(), key);
  if (seen == caller_seen.end() || !may_capture) {
    constexpr size_t kKeptSeen = 16;
    if (seen == caller_seen.end()) {
      if (caller_seen.size() == kKeptSeen) caller_seen.erase(caller_seen.begin());
      caller_seen.push_back(key);
    }
    ++run_counts.one_by_one;
    return Enqueue(at, nullptr, on);
  }
  caller_seen.erase(seen);
  ++caller_captures;
  ++caller_replays;
  ++run_counts.captures;
  ++run_counts.replays;
  // The oldest graph makes room, updated into the new one where the driver can.
  constexpr size_t kKeptGraphs = 8;
  CudaGraphExec oldest;
  if (caller_graphs.size() == kKeptGraphs) {
    oldest = std::move(caller_graphs.front().second);
    caller_graphs.erase(caller_graphs.begin());
  }
  ASSIGN_OR_RETURN(CudaGraphExec exec, Capture(at, std::move(oldest)));
  caller_graphs.emplace_back(key, std::move(exec));
  return device->Check(api().cuGraphLaunch(caller_graphs.back().second.get(), on), "cuGraphLaunch");
}

StatusOr<bool> CudaExecutable::State::RepeatStagedRun(const std::vector<uint64_t>& key, size_t inputs, CUstream on) {
  if (!staged_run || staged_run->key.size() != key.size()) return false;
  StagedRun& run = *staged_run;
  {
    HostTimeTo deciding(run_counts.host_ns_deciding);
    // The same entries staged, every other pointer the same (a diverted output's and its
    // input's among them), and no new pointer another's on the other side (an input given as
    // an output, which DivertedOutputs would divert).
    for (size_t i = 0; i < key.size(); ++i) {
      if (run.volatiles[i] != volatile_pointers.staged(i)) return false;
      if (!run.volatiles[i] && key[i] != run.key[i]) return false;
    }
    for (size_t i = 0; i < key.size(); ++i) {
      if (!run.volatiles[i] || key[i] == run.key[i]) continue;
      const auto other_begin = i < inputs ? key.begin() + static_cast<std::ptrdiff_t>(inputs) : key.begin();
      const auto other_end = i < inputs ? key.end() : key.begin() + static_cast<std::ptrdiff_t>(inputs);
      if (std::find(other_begin, other_end, key[i]) != other_end) return false;
    }
    for (size_t j = 0; j < run.before_entries.size(); ++j) run.before[j].from = key[run.before_entries[j]];
    for (const auto& [copy, entry] : run.after_entries) run.after[copy].to = key[entry];
    run.key = key;
  }
  run_counts.staged_copies += run.staged_copies;
  run_counts.output_copies += run.output_copies;
  {
    HostTimeTo launch(run_counts.host_ns_in_launches);
    RETURN_IF_ERROR(LaunchStagedCopies(*device, cache_dir, run.before, on));
  }
  RETURN_IF_ERROR(RunInPlace(run.keyed, on));
  HostTimeTo launch(run_counts.host_ns_in_launches);
  RETURN_IF_ERROR(LaunchStagedCopies(*device, cache_dir, run.after, on));
  return true;
}

bool CudaExecutable::State::NoteVolatilePointers(const std::vector<uint64_t>& key) {
  // A value of at most kStagedBytes: copying it costs less than launching every kernel one by
  // one (GPT-2's decode step: 121 launches, ~375 us of host time a step, H200, 2026-12-04; a
  // copy's launch is ~2 us).
  constexpr int64_t kStagedBytes = 1 << 20;
  if (volatile_pointers.empty()) {
    // Entries that share a node, or are copied after the run, keep their pointers.
    std::map<int, int> uses;
    for (int node : caller_nodes) ++uses[node];
    std::vector<bool> stageable(key.size());
    for (size_t i = 0; i < key.size(); ++i) {
      const bool copied = std::any_of(caller_copies.begin(), caller_copies.end(),
                                      [&](const CallerCopy& c) { return c.to == i || c.from == static_cast<int>(i); });
      stageable[i] = uses[caller_nodes[i]] == 1 && !copied && Bytes(caller_nodes[i]) <= kStagedBytes;
    }
    volatile_pointers.Reset(std::move(stageable));
  }
  return volatile_pointers.Note(key);
}

std::vector<bool> CudaExecutable::State::DivertedOutputs(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs) {
  std::vector<bool> diverted(outputs.size(), false);
  std::vector<std::pair<uint64_t, int>> by_pointer;
  by_pointer.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) by_pointer.emplace_back(inputs[i], static_cast<int>(i));
  std::sort(by_pointer.begin(), by_pointer.end());
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto it = std::lower_bound(by_pointer.begin(), by_pointer.end(), std::make_pair(outputs[o], -1));
    for (; it != by_pointer.end() && it->first == outputs[o]; ++it) {
      auto [known, added] = may_overwrite.try_emplace({static_cast<int>(o), it->second}, false);
      if (added) known->second = tilefuse::OutputMayOverwriteInput(graph, plan, program, static_cast<int>(o), it->second);
      if (!known->second) diverted[o] = true;
    }
  }
  // Copied after the run anyway (an input returned, a repeat): their own copy serves.
  for (const CallerCopy& c : caller_copies) diverted[c.to - inputs.size()] = false;
  return diverted;
}

Status CudaExecutable::RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
  State& s = *state_;
  HostTimeTo timed(s.run_counts.host_ns);
  const Graph& g = s.graph;
  if (inputs.size() != g.inputs().size() || outputs.size() != g.outputs().size())
    return InvalidArgument(fmt::format("graph takes {} inputs and {} outputs, got {} and {} device pointers", g.inputs().size(),
                                       g.outputs().size(), inputs.size(), outputs.size()));
  if (!s.captured.get())
    return Unimplemented("a run on device memory needs the graph captured as a CUDA graph; this one has steps on the host: " +
                         HostStepReason(s.program));
  RETURN_IF_ERROR(s.AdoptBackgroundKernels(/*wait=*/false));
  RETURN_IF_ERROR(s.device->MakeCurrent());
  const CudaDriverApi& api = s.api();
  CUstream on = reinterpret_cast<CUstream>(stream);
  // In place where it can: the kernels read and write the caller's memory. A graph captured
  // on the caller's pointers is kept for the next calls with the same pointers (PyTorch's
  // caching allocator hands the same addresses back call after call in inference), so such a
  // call is one launch. Pointers seen for the first time are launched kernel by kernel on them
  // (a training step's activations get new addresses often), and captured when seen again.
  // Outputs the kernels do not write in place (caller_copies), and outputs given an input's
  // pointer that they may not overwrite (DivertedOutputs), are copied after. Where a
  // pointer is not 256-byte aligned, as the kernels' vector accesses and tensor maps assume,
  // the copies below, in and out of the graph's own buffers.
  std::vector<uint64_t> key = inputs;
  key.insert(key.end(), outputs.begin(), outputs.end());
  if (key == s.own_pointers) {
    ++s.run_counts.replays;
    HostTimeTo launch(s.run_counts.host_ns_in_launches);
    return s.device->Check(api.cuGraphLaunch(s.captured.get(), on), "cuGraphLaunch");
  }
  if (std::all_of(key.begin(), key.end(), [](uint64_t p) { return p % 256 == 0; })) {
    bool stage = false;
    {
      HostTimeTo deciding(s.run_counts.host_ns_deciding);
      stage = s.NoteVolatilePointers(key);
    }
    if (stage) {
      ASSIGN_OR_RETURN(const bool repeated, s.RepeatStagedRun(key, inputs.size(), on));
      if (repeated) return Status::Ok();
    }
    const auto deciding = std::chrono::steady_clock::now();  // (until the first copies' launch)
    const std::vector<bool> diverted = s.DivertedOutputs(inputs, outputs);
    std::vector<uint64_t> keyed = key;
    std::vector<StagedCopy> before, after;
    State::StagedRun run;
    run.volatiles.assign(key.size(), false);
    for (size_t i = 0; i < key.size(); ++i) {
      const bool divert = i >= inputs.size() && diverted[i - inputs.size()];
      run.volatiles[i] = stage && s.volatile_pointers.staged(i) && !divert;
      if (!run.volatiles[i] && !divert) continue;
      keyed[i] = s.own_pointers[i];
      const int64_t bytes = s.Bytes(s.caller_nodes[i]);
      if (i < inputs.size()) {
        before.push_back({key[i], keyed[i], bytes});
        run.before_entries.push_back(i);  // (only volatile entries are inputs here)
      } else {
        if (run.volatiles[i]) run.after_entries.emplace_back(after.size(), i);
        after.push_back({keyed[i], key[i], bytes});
      }
    }
    // The caller copies read where the run left their values (`keyed`: a staged or diverted
    // entry's own buffer). One launch with the copies above, unless one of those overwrites
    // an input that a caller copy returns (a mutated input also returned as it was).
    std::vector<StagedCopy> returned;
    for (const State::CallerCopy& c : s.caller_copies) {
      const int node = s.caller_nodes[c.to];
      returned.push_back({c.from >= 0 ? keyed[c.from] : s.address[node], key[c.to], s.Bytes(node)});
    }
    const bool overlapping = std::any_of(returned.begin(), returned.end(), [&](const StagedCopy& r) {
      return std::any_of(after.begin(), after.end(), [&](const StagedCopy& a) { return a.to == r.from; });
    });
    const int64_t diverted_count = std::count(diverted.begin(), diverted.end(), true);
    run.staged_copies = static_cast<int64_t>(before.size() + after.size()) - diverted_count;
    run.output_copies = static_cast<int64_t>(returned.size()) + diverted_count;
    s.run_counts.staged_copies += run.staged_copies;
    s.run_counts.output_copies += run.output_copies;
    auto staged_copies = [&](const std::vector<StagedCopy>& copies) {
      HostTimeTo launch(s.run_counts.host_ns_in_launches);
      return LaunchStagedCopies(*s.device, s.cache_dir, copies, on);
    };
    s.run_counts.host_ns_deciding +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - deciding).count();
    RETURN_IF_ERROR(staged_copies(before));
    RETURN_IF_ERROR(s.RunInPlace(keyed, on));
    if (overlapping) RETURN_IF_ERROR(staged_copies(std::exchange(returned, {})));
    after.insert(after.end(), returned.begin(), returned.end());
    // Kept for the next calls where this one staged (a run with the returned copies apart is
    // rare: worked out each time).
    s.staged_run.reset();
    if (stage && !overlapping) {
      run.key = key;
      run.keyed = std::move(keyed);
      run.before = before;
      run.after = after;
      s.staged_run = std::move(run);
    }
    return staged_copies(after);
  }
  ++s.run_counts.through_buffers;
  for (size_t i = 0; i < inputs.size(); ++i)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyDtoDAsync(s.address[g.inputs()[i]], inputs[i], s.Bytes(g.inputs()[i]), on),
                                    "copying an input on the device"));
  RETURN_IF_ERROR(s.device->Check(api.cuGraphLaunch(s.captured.get(), on), "cuGraphLaunch"));
  for (size_t o = 0; o < outputs.size(); ++o)
    RETURN_IF_ERROR(s.device->Check(api.cuMemcpyDtoDAsync(outputs[o], s.address[g.outputs()[o].node], s.Bytes(g.outputs()[o].node), on),
                                    "copying an output on the device"));
  return Status::Ok();
}

StatusOr<double> CudaExecutable::BenchmarkMs(const std::vector<Tensor>& inputs, int warmup, int repeats, int input_sets) {
  State& s = *state_;
  const Graph& g = s.graph;
  RETURN_IF_ERROR(CheckInputs(g, inputs));
  RETURN_IF_ERROR(FinishCompiles());  // timed: the kernels that will run from now on
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
  // For diagnosis, TILEFUSE_BENCH_DIRECT=1 times the kernels launched one by one on the stream
  // instead of as the captured graph (whether a graph launch costs the GPU more than a kernel
  // launch: PyTorch's peers launch directly), queued the same way.
  const bool direct = !s.has_host_steps && SwitchedOn("TILEFUSE_BENCH_DIRECT");
  std::vector<CudaGraphExec> graphs;
  if (!s.has_host_steps && !direct)
    for (const auto& at : tables) {
      ASSIGN_OR_RETURN(CudaGraphExec e, s.Capture(at));
      graphs.push_back(std::move(e));
    }
  auto run_once = [&](int i) -> Status {
    if (!graphs.empty()) return s.device->Check(api.cuGraphLaunch(graphs[i % graphs.size()].get(), s.device->stream()), "cuGraphLaunch");
    return s.Enqueue(tables[i % tables.size()], nullptr, s.device->stream());
  };
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(run_once(i));
  std::vector<double> times;
  if (!graphs.empty() || direct) {
    // Graph launches (and direct ones without host steps) only queue work: they are timed
    // queued ahead of the GPU, so the events time the kernels and not the host launching them
    // (queued_timing.h).
    ASSIGN_OR_RETURN(times, TimeQueuedCalls(*s.device, repeats, [&](int i) { return run_once(warmup + i); }));
    for (double& t : times) t /= 1000.0;
  } else {
    // Host steps wait for the stream: one run at a time.
    ASSIGN_OR_RETURN(CudaEvent begin_event, CreateCudaEvent(*s.device));
    ASSIGN_OR_RETURN(CudaEvent end_event, CreateCudaEvent(*s.device));
    CUevent begin = begin_event.get(), end = end_event.get();
    for (int i = 0; i < repeats; ++i) {
      api.cuEventRecord(begin, s.device->stream());
      RETURN_IF_ERROR(run_once(warmup + i));
      api.cuEventRecord(end, s.device->stream());
      RETURN_IF_ERROR(s.device->Check(api.cuEventSynchronize(end), "running the graph on the GPU"));
      float ms = 0;
      api.cuEventElapsedTime(&ms, begin, end);
      times.push_back(ms);
    }
  }
  if (times.empty()) return 0.0;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace tilefuse

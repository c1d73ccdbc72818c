// The facade (tilefuse/tilefuse.h) over the driver: import, passes, the backend `run`
// would choose, and runs. What `tilefuse run` and the Python package both do.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <fmt/format.h>

#include "api/backend_setup.h"
#include "api/compiled_model_state.h"
#include "api/model_cache.h"
#include "api/model_file_state.h"
#include "api/model_inputs.h"
#include "backend/cuda/cuda_driver.h"
#include "driver/driver.h"
#include "fusion/device_spec.h"
#include "fusion/explain.h"
#include "reference/interpreter.h"
#include "tilefuse/tilefuse.h"
#include "tune/gpu_tuner.h"

namespace tilefuse {


namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// The words and the ordinal, before anything is compiled.
Status CheckOptions(const ModelOptions& options) {
  const std::string& backend = options.backend;
  if (backend != "auto" && backend != "cuda" && backend != "cpu" && backend != "reference")
    return InvalidArgument(fmt::format("backend '{}' is not one of auto, cuda, cpu, reference", backend));
  CudaCompileOptions words;
  RETURN_IF_ERROR(ApplyCudaPathWords(options.gemm, options.attention, options.precision, words));
  return CheckDeviceForBackend(options.device, backend);
}

// The choice `tilefuse run` makes: cuda when asked (or, under auto, when it compiles), else
// the CPU, else (auto) the reference interpreter, saying why in the note.
Status PrepareBackend(CompiledModel::State& s) {
  const ModelOptions& o = s.options;
  if (o.backend == "reference") {
    s.backend = "reference";
    return Status::Ok();
  }
  if (o.backend == "cuda" || o.backend == "auto") {
    CudaCompileOptions gpu_options;
    gpu_options.fuse = o.fuse;
    gpu_options.poison_outputs = o.poison_outputs;
    gpu_options.cache_dir = o.cache_dir;
    gpu_options.device_ordinal = o.device;
    gpu_options.dump_dir = o.dump_dir;
    gpu_options.background_compile = o.background_compile;
    gpu_options.stand_ins_only = o.stand_ins_only;
    RETURN_IF_ERROR(ApplyCudaPathWords(o.gemm, o.attention, o.precision, gpu_options));
    RETURN_IF_ERROR(ApplyTemplateWords(o.gemm_form, o.gemm_cluster, o.depthwise, gpu_options.overrides));
    if (s.cached_plan && s.cached_plan_backend == "cuda") gpu_options.plan_override = &*s.cached_plan;
    StatusOr<std::unique_ptr<CudaExecutable>> gpu =
        o.tune ? TuneForGpu(s.passed, gpu_options, TuneOptions{}, nullptr) : CompileForCuda(s.passed, gpu_options);
    if (gpu.ok()) {
      s.gpu = std::move(gpu).value();
      s.backend = "cuda";
      return Status::Ok();
    }
    if (o.backend == "cuda") return gpu.status();
    s.backend_note = "cuda backend unavailable, ran on the cpu: " + gpu.status().message();
  }
  const FusionPlan* plan = s.cached_plan && s.cached_plan_backend == "cpu" ? &*s.cached_plan : nullptr;
  StatusOr<std::unique_ptr<CpuExecutable>> compiled = CompileModelForCpu(s.passed, o.fuse, o.cache_dir, o.tune, o.dump_dir, plan);
  if (!compiled.ok()) {
    if (o.backend == "cpu" || o.strict) return compiled.status();
    s.backend = "reference";
    s.backend_note = "cpu backend unavailable, ran on the reference interpreter: " + compiled.status().ToString();
    return Status::Ok();
  }
  s.cpu = std::move(compiled).value();
  s.backend = "cpu";
  return Status::Ok();
}

// Kernel names may hold spaces or parentheses; file names keep [A-Za-z0-9_-].
std::string KernelFileName(const std::string& kernel) {
  std::string name;
  for (char c : kernel) name += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') ? c : '_';
  return name + ".cc";
}

}  // namespace

void DescribeKernels(CompiledModel::State& s) {
  s.described_swaps = s.gpu ? s.gpu->kernel_swaps() : 0;
  s.kernels.clear();
  if (s.gpu) {
    for (const CudaKernelInfo& k : s.gpu->kernels())
      s.kernels.push_back({k.name, std::string(GroupKindName(k.kind)), k.mode != "host", k.why_host, k.mode, k.strategy, "",
                           k.num_nodes, k.group});
  } else if (s.cpu) {
    // One kernel per plan group, in plan order (the CPU backend's GenerateKernels).
    const bool by_group = s.cpu->kernels().size() == s.cpu->plan().groups.size();
    for (size_t i = 0; i < s.cpu->kernels().size(); ++i) {
      const KernelInfo& k = s.cpu->kernels()[i];
      s.kernels.push_back({k.name, std::string(GroupKindName(k.kind)), k.generated, k.why_not, "", "", k.library, k.num_nodes,
                           by_group ? static_cast<int>(i) : -1, 0, 0, k.source.empty() ? "" : KernelFileName(k.name)});
    }
  }
  if (const Executable* executable = s.executable()) {
    for (KernelSummary& k : s.kernels) {
      if (k.group < 0 || k.group >= static_cast<int>(executable->plan().groups.size())) continue;
      k.flops = executable->plan().groups[k.group].flops;
      k.bytes = executable->plan().groups[k.group].bytes;
    }
  }
  s.warnings = s.cpu ? s.cpu->ReferenceWarnings() : std::vector<std::string>{};
  if (s.gpu)
    for (const CudaKernelInfo& k : s.gpu->kernels())
      if (k.mode == "host")
        s.warnings.push_back(fmt::format("group {} ({}) runs on the reference interpreter on the host: {}", k.group, GroupKindName(k.kind),
                                         k.why_host));
}

void DescribeSwappedKernels(CompiledModel::State& s) {
  if (s.gpu && s.gpu->kernel_swaps() != s.described_swaps) DescribeKernels(s);
}

namespace {

void DescribeModel(CompiledModel::State& s) {
  DescribeKernels(s);
  const Graph& graph = s.passed;
  for (int id : graph.inputs()) s.inputs.push_back({graph.node(id).name, graph.node(id).dtype, graph.node(id).shape});
  for (const Graph::Output& out : graph.outputs())
    s.outputs.push_back({out.name, graph.node(out.node).dtype, graph.node(out.node).shape});
}

// The GPU times its steps by index (CudaExecutable::Run); they are named by its kernels.
std::vector<KernelRunTime> NameTimings(const std::vector<KernelTiming>& timings, const std::vector<KernelSummary>& kernels,
                                       bool by_index) {
  std::vector<KernelRunTime> named;
  for (size_t i = 0; i < timings.size() && (!by_index || i < kernels.size()); ++i)
    named.push_back({by_index ? kernels[i].name : timings[i].name, timings[i].start_us, timings[i].duration_us});
  return named;
}

}  // namespace

CompiledModel::CompiledModel(std::unique_ptr<State> state) : state_(std::move(state)) {}
CompiledModel::~CompiledModel() = default;

Status CheckModelOptions(const ModelOptions& options) { return CheckOptions(options); }

StatusOr<Graph> CompiledModel::RunPasses(Graph graph, const ModelOptions& options, std::vector<std::pair<std::string, double>>* pass_ms) {
  RETURN_IF_ERROR(CheckOptions(options));
  PassOptions passes = PassOptionsForBackend(options.backend, options.device);
  passes.dump_dir = options.dump_dir;
  return RunGraphPasses(std::move(graph), passes, pass_ms);
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromPassedGraph(Graph passed, const ModelOptions& options) {
  return FromPassedGraph(std::move(passed), options, nullptr);
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromPassedGraph(Graph passed, const ModelOptions& options,
                                                                        CachedCompile* cached) {
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(options));
  auto state = std::make_unique<State>();
  state->passed = std::move(passed);
  state->options = options;
  if (cached) {
    state->cached_plan = std::move(cached->plan);
    state->cached_plan_backend = cached->backend;
  }
  RETURN_IF_ERROR(PrepareBackend(*state));
  DescribeModel(*state);
  if (options.strict && !state->warnings.empty())
    return Unimplemented(fmt::format("strict: {} group{} would run on the reference interpreter: {}", state->warnings.size(),
                                     state->warnings.size() == 1 ? "" : "s", fmt::join(state->warnings, "; ")));
  state->compile_ms = MillisecondsSince(start);
  return std::unique_ptr<CompiledModel>(new CompiledModel(std::move(state)));
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromGraph(Graph graph, const ModelOptions& options) {
  return Compile(std::move(graph), options, nullptr);
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromGraph(Graph graph, const ModelOptions& options, BindingPlans& plans) {
  return Compile(std::move(graph), options, &plans);
}

// The compiled-model cache (api/model_cache.h): a graph compiled before with the same options
// skips the passes and the planning. Else, with `plans` (a model file's bindings), a passed graph
// of the structure an earlier binding had compiles that binding's plan (api/binding_plans.h).
StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::Compile(Graph graph, const ModelOptions& options, BindingPlans* plans) {
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(options));
  // The GPU the compile plans for, if any: a plan for an H100's cost model and SMs is not an H200's.
  std::string gpu;
  if (options.backend == "auto" || options.backend == "cuda")
    if (StatusOr<CudaDevice*> device = CudaDevice::Get(options.device); device.ok())
      gpu = fmt::format("{}, {} SMs", (*device)->name(), (*device)->sm_count());
  const std::optional<CompiledModelKey> key = KeyOfCompile(graph, options, gpu);
  if (std::optional<CachedCompile> cached = key ? LoadCompiledModel(*key) : std::nullopt) {
    const double cache_ms = MillisecondsSince(start);
    Graph passed = std::move(cached->passed);
    ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, FromPassedGraph(std::move(passed), options, &*cached));
    model->state_->model_cache_ms = cache_ms;
    model->state_->compile_ms = MillisecondsSince(start);
    return model;
  }
  std::vector<std::pair<std::string, double>> pass_ms;
  ASSIGN_OR_RETURN(Graph passed, RunPasses(std::move(graph), options, &pass_ms));
  const double passes_ms = MillisecondsSince(start);
  const bool plans_kept = plans && !options.tune && options.backend != "reference";
  const std::string words = plans_kept ? CompileWords(options, gpu) : "";
  const Clock::time_point find = Clock::now();
  std::optional<CachedCompile> earlier = plans_kept ? plans->state().Find(passed, words) : std::nullopt;
  const double find_ms = MillisecondsSince(find);
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, FromPassedGraph(std::move(passed), options, earlier ? &*earlier : nullptr));
  model->state_->passes_ms = passes_ms;
  model->state_->pass_ms = std::move(pass_ms);
  if (earlier) model->state_->binding_plan_ms = find_ms;
  const State& s = *model->state_;
  if (key && s.executable()) StoreCompiledModel(*key, s.passed, s.backend, s.executable()->plan());
  if (plans_kept && !earlier && s.executable()) plans->state().Remember(s.passed, words, s.backend, s.executable()->plan());
  model->state_->compile_ms = MillisecondsSince(start);
  return model;
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromFile(const std::string& path, const ModelOptions& options) {
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(options));  // a wrong word costs no import
  ASSIGN_OR_RETURN(std::shared_ptr<ModelFile> file, ModelFile::Open(path));
  const double read_ms = MillisecondsSince(start);
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, FromModelFile(*file, options));
  model->state_->import_ms += read_ms;  // reading and parsing the file is the import's too
  model->state_->compile_ms = MillisecondsSince(start);
  return model;
}

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromModelFile(ModelFile& file, const ModelOptions& options) {
  const Clock::time_point start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(options));
  ASSIGN_OR_RETURN(Graph graph, file.Import(options.dims));
  const double import_ms = MillisecondsSince(start);
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model,
                   Compile(std::move(graph), options, file.symbolic_dims().empty() ? nullptr : &file.state_->plans));
  model->state_->import_ms = import_ms;
  model->state_->compile_ms = MillisecondsSince(start);
  return model;
}

// The importer reads files (and a model's external data beside them): the bytes go through
// a private temporary folder.
StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::FromBytes(std::string_view onnx_model, const ModelOptions& options) {
  std::string folder = (std::filesystem::temp_directory_path() / "tilefuse-model-XXXXXX").string();
  if (!::mkdtemp(folder.data())) return InvalidArgument(fmt::format("cannot create a temporary folder for the model in '{}'",
                                                                    std::filesystem::temp_directory_path().string()));
  const std::string path = folder + "/model.onnx";
  std::ofstream(path, std::ios::binary).write(onnx_model.data(), static_cast<std::streamsize>(onnx_model.size()));
  StatusOr<std::unique_ptr<CompiledModel>> model = FromFile(path, options);
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);  // best effort: the model is compiled either way
  return model;
}

StatusOr<std::vector<Tensor>> CompiledModel::Run(const std::vector<Tensor>& inputs, std::vector<KernelRunTime>* timings,
                                                 std::string_view source) {
  State& s = *state_;
  RETURN_IF_ERROR(ValidateInputs(s.passed, inputs, std::string(source)));
  std::lock_guard<std::mutex> lock(s.run_mutex);
  if (!s.gpu && !s.cpu) return RunReference(s.passed, inputs);
  std::vector<KernelTiming> measured;
  StatusOr<std::vector<Tensor>> run = s.gpu ? s.gpu->Run(inputs, timings ? &measured : nullptr)
                                            : s.cpu->Run(inputs, timings ? &measured : nullptr);
  if (!run.ok() && s.cpu && s.options.backend == "auto" && s.options.reference_fallback_on_run && !s.options.strict) {
    // As `tilefuse run --backend auto`: a CPU run that fails falls back to the interpreter.
    s.cpu.reset();
    s.kernels.clear();
    s.backend = "reference";
    s.backend_note = "cpu backend failed, ran on the reference interpreter: " + run.status().ToString();
    return RunReference(s.passed, inputs);
  }
  DescribeSwappedKernels(s);
  if (run.ok() && timings) *timings = NameTimings(measured, s.kernels, s.gpu != nullptr);
  return run;
}

Status CompiledModel::FinishCompiles() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.run_mutex);
  if (!s.gpu) return Status::Ok();
  RETURN_IF_ERROR(s.gpu->FinishCompiles());
  DescribeSwappedKernels(s);
  return Status::Ok();
}

int CompiledModel::pending_compiles() const {
  std::lock_guard<std::mutex> lock(state_->run_mutex);  // a run may be swapping them in
  return state_->gpu ? state_->gpu->pending_compiles() : 0;
}

Status CompiledModel::RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
  if (!device_runs())
    return Unimplemented(fmt::format("runs on device memory need the model on the GPU as one CUDA graph; it runs on {}",
                                     state_->backend));
  std::lock_guard<std::mutex> lock(state_->run_mutex);
  RETURN_IF_ERROR(state_->gpu->RunOnDevice(inputs, outputs, stream));
  DescribeSwappedKernels(*state_);
  return Status::Ok();
}

bool CompiledModel::device_runs() const { return state_->gpu && state_->gpu->captured(); }

bool CompiledModel::OutputMayOverwriteInput(int output, int input) const {
  std::lock_guard<std::mutex> lock(state_->run_mutex);
  return state_->gpu && state_->gpu->OutputMayOverwriteInput(output, input);
}

CompiledModel::DeviceRunCounts CompiledModel::device_run_counts() const {
  std::lock_guard<std::mutex> lock(state_->run_mutex);
  if (!state_->gpu) return {};
  const CudaExecutable::RunCounts c = state_->gpu->device_run_counts();
  return {c.replays,       c.one_by_one, c.through_buffers,     c.captures,         c.output_copies,
          c.staged_copies, c.host_ns,    c.host_ns_in_launches, c.host_ns_deciding, c.host_ns_finding_graph};
}

// `tilefuse explain`'s plan of the same passed graph with the same fuse option.
StatusOr<std::string> CompiledModel::Explain(ExplainFormat format, const std::string& cost_model) const {
  if (!FindDeviceSpec(cost_model))
    return InvalidArgument(fmt::format("unknown device '{}' (known: {})", cost_model, fmt::join(KnownDeviceNames(), ", ")));
  PlannerOptions planner;
  planner.device = cost_model;
  planner.fuse = state_->options.fuse;
  ASSIGN_OR_RETURN(FusionPlan plan, PlanForDevice(state_->passed, planner, state_->options.precision == "high"));
  switch (format) {
    case ExplainFormat::kJson: return ExplainJson(state_->passed, plan).dump(2);
    case ExplainFormat::kDot: return ExplainDot(state_->passed, plan);
    case ExplainFormat::kText: break;
  }
  return ExplainText(state_->passed, plan);
}

const std::string& CompiledModel::backend() const { return state_->backend; }
const std::string& CompiledModel::backend_note() const { return state_->backend_note; }
const std::vector<std::string>& CompiledModel::warnings() const { return state_->warnings; }
int CompiledModel::device() const { return state_->options.device; }
const Graph& CompiledModel::graph() const { return state_->passed; }
const std::vector<ValueSpec>& CompiledModel::inputs() const { return state_->inputs; }
const std::vector<ValueSpec>& CompiledModel::outputs() const { return state_->outputs; }
const std::vector<KernelSummary>& CompiledModel::kernels() const { return state_->kernels; }
double CompiledModel::compile_ms() const { return state_->compile_ms; }

std::vector<std::pair<std::string, double>> CompiledModel::compile_stages_ms() const {
  std::vector<std::pair<std::string, double>> stages;
  if (state_->import_ms >= 0) stages.push_back({"import", state_->import_ms});
  // The graph passes one by one ("graph passes: cse", a pass run twice summed), what is left of
  // their total (the graph's copies between them) as "graph passes: other".
  double counted = 0;
  for (const auto& [pass, ms] : state_->pass_ms) {
    const std::string name = "graph passes: " + pass;
    auto same = std::find_if(stages.begin(), stages.end(), [&](const auto& s) { return s.first == name; });
    if (same == stages.end()) stages.push_back({name, ms});
    else same->second += ms;
    counted += ms;
  }
  if (state_->passes_ms > counted) stages.push_back({state_->pass_ms.empty() ? "graph passes" : "graph passes: other", state_->passes_ms - counted});
  if (state_->model_cache_ms >= 0) stages.push_back({"compiled-model cache (passes and plan reused)", state_->model_cache_ms});
  if (state_->binding_plan_ms >= 0) stages.push_back({"plan of an earlier binding (found and verified)", state_->binding_plan_ms});
  if (const Executable* executable = state_->executable())
    for (const auto& stage : executable->compile_stages_ms()) stages.push_back(stage);
  return stages;
}

double CompiledModel::backend_compile_ms() const {
  if (state_->gpu) return state_->gpu->compile_ms();
  return state_->cpu ? state_->cpu->compile_ms() : 0;
}

int64_t CompiledModel::jit_compiles() const {
  if (state_->gpu) return state_->gpu->nvrtc_compiles();
  return state_->cpu ? state_->cpu->jit_compiles() : 0;
}

int64_t CompiledModel::jit_cache_hits() const {
  if (state_->gpu) return state_->gpu->nvrtc_cache_hits();
  if (!state_->cpu) return 0;
  int64_t generated = 0;
  for (const KernelInfo& k : state_->cpu->kernels()) generated += k.generated ? 1 : 0;
  return generated - state_->cpu->jit_compiles();
}

double CompiledModel::flops() const {
  double flops = 0;
  if (const Executable* executable = state_->executable())
    for (const FusionGroup& group : executable->plan().groups) flops += group.flops;
  return flops;
}

int64_t CompiledModel::arena_bytes() const {
  const Executable* executable = state_->executable();
  return executable ? executable->arena_bytes() : 0;
}

}  // namespace tilefuse

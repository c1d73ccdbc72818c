#include "compiled_model.h"

#include <chrono>

#include <fmt/format.h>

#include "reference/interpreter.h"
#include "cli_common.h"
#include "cpu_common.h"
#include "driver/driver.h"
#include "fusion/device_spec.h"
#include "fusion/explain.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "tune/gpu_tuner.h"

namespace tilefuse::python {

StatusOr<std::unique_ptr<CompiledModel>> CompiledModel::Compile(const std::string& path, const ModelCompileOptions& options) {
  if (options.backend != "auto" && options.backend != "cuda" && options.backend != "cpu" && options.backend != "reference")
    return InvalidArgument(fmt::format("backend '{}' is not one of auto, cuda, cpu, reference", options.backend));
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(ImportedModel imported, cli::LoadModel(path));
  auto model = std::unique_ptr<CompiledModel>(new CompiledModel());
  ASSIGN_OR_RETURN(model->passed_, RunGraphPasses(std::move(imported.graph), cli::PassOptionsForBackend(options.backend)));
  model->fuse_ = options.fuse;
  RETURN_IF_ERROR(model->PrepareBackend(options));
  model->DescribeKernels();
  const Graph& graph = model->passed_;
  for (int id : graph.inputs()) model->inputs_.push_back({graph.node(id).name, graph.node(id).dtype, graph.node(id).shape});
  for (const Graph::Output& out : graph.outputs())
    model->outputs_.push_back({out.name, graph.node(out.node).dtype, graph.node(out.node).shape});
  model->compile_ms_ = cli::MillisecondsSince(start);
  return model;
}

// The choice `tilefuse run` makes (tools/run.cc, Executor::Prepare), with the CLI's defaults
// for the GPU's gemm, attention and precision options.
Status CompiledModel::PrepareBackend(const ModelCompileOptions& options) {
  auto_backend_ = options.backend == "auto";
  if (options.backend == "reference") {
    backend_ = "reference";
    return Status::Ok();
  }
  if (options.backend == "cuda" || auto_backend_) {
    CudaCompileOptions gpu_options;
    gpu_options.fuse = options.fuse;
    StatusOr<std::unique_ptr<CudaExecutable>> gpu = options.tune ? TuneForGpu(passed_, gpu_options, TuneOptions{}, nullptr)
                                                                   : CompileForCuda(passed_, gpu_options);
    if (gpu.ok()) {
      gpu_ = std::move(gpu).value();
      backend_ = "cuda";
      return Status::Ok();
    }
    if (options.backend == "cuda") return gpu.status();
    backend_note_ = "cuda backend unavailable, ran on the cpu: " + gpu.status().message();
  }
  StatusOr<std::unique_ptr<CpuExecutable>> compiled = cli::CompileModelForCpu(passed_, options.fuse, "", options.tune);
  if (!compiled.ok()) {
    if (options.backend == "cpu") return compiled.status();
    backend_ = "reference";
    backend_note_ = "cpu backend unavailable, ran on the reference interpreter: " + compiled.status().ToString();
    return Status::Ok();
  }
  cpu_ = std::move(compiled).value();
  backend_ = "cpu";
  return Status::Ok();
}

void CompiledModel::DescribeKernels() {
  if (gpu_) {
    for (const CudaKernelInfo& k : gpu_->kernels())
      kernels_.push_back({k.name, std::string(GroupKindName(k.kind)), k.mode != "host", k.why_host, k.mode, k.num_nodes});
  } else if (cpu_) {
    for (const KernelInfo& k : cpu_->kernels())
      kernels_.push_back({k.name, std::string(GroupKindName(k.kind)), k.generated, k.why_not, "", k.num_nodes});
  }
}

StatusOr<std::vector<Tensor>> CompiledModel::Run(const std::vector<Tensor>& inputs, const std::string& source) {
  RETURN_IF_ERROR(cli::ValidateInputs(passed_, inputs, source));
  std::lock_guard<std::mutex> lock(run_mutex_);
  if (gpu_) return gpu_->Run(inputs);
  if (!cpu_) return RunReference(passed_, inputs);
  StatusOr<std::vector<Tensor>> run = cpu_->Run(inputs);
  if (run.ok() || !auto_backend_) return run;
  // As `tilefuse run --backend auto`: a CPU run that fails falls back to the interpreter.
  cpu_.reset();
  kernels_.clear();
  backend_ = "reference";
  backend_note_ = "cpu backend failed, ran on the reference interpreter: " + run.status().ToString();
  return RunReference(passed_, inputs);
}

Status CompiledModel::RunOnDevice(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, uint64_t stream) {
  if (!device_runs())
    return Unimplemented(fmt::format("runs on device memory need the model on the GPU as one CUDA graph; it runs on {}", backend_));
  std::lock_guard<std::mutex> lock(run_mutex_);
  return gpu_->RunOnDevice(inputs, outputs, stream);
}

// tools/explain.cc's JSON path: the same passed graph planned with the same options.
StatusOr<std::string> CompiledModel::ExplainJson(const std::string& device) const {
  if (!FindDeviceSpec(device))
    return InvalidArgument(fmt::format("unknown device '{}' (known: {})", device, fmt::join(KnownDeviceNames(), ", ")));
  PlannerOptions planner;
  planner.device = device;
  planner.fuse = fuse_;
  ASSIGN_OR_RETURN(FusionPlan plan, PlanForDevice(passed_, planner));
  return tilefuse::ExplainJson(passed_, plan).dump(2);
}

}  // namespace tilefuse::python

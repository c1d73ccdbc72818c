#include "driver/driver.h"

#include <chrono>
#include <filesystem>
#include <fmt/format.h>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "codegen/kernel_printer.h"
#include "codegen/kernel_verifier.h"
#include "fusion/explain.h"
#include "fusion/plan_verifier.h"
#include "support/check.h"
#include "support/file_util.h"

namespace tilefuse {

namespace {

using Clock = std::chrono::steady_clock;

// What a stage made, written where the user asked (nothing when `dir` is empty); several
// graphs of one batch get a numbered file each.
Status Dump(const CompileOptions& options, size_t graph, size_t graphs, const std::string& file, const std::string& text) {
  if (options.dump_dir.empty()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(options.dump_dir, ec);
  if (ec) return InvalidArgument(fmt::format("cannot create the dump folder '{}': {}", options.dump_dir, ec.message()));
  std::string name = graphs > 1 ? fmt::format("g{}.{}", graph, file) : file;
  return WriteFileAtomically((std::filesystem::path(options.dump_dir) / name).string(), text);
}

// Stage: plan, or the caller's plan, verified either way (a plan the backend made and
// VerifyPlan refuses is our bug, reported as such rather than compiled).
StatusOr<PlannedGraph> PlanStage(Backend& backend, const Graph& graph, const CompileOptions& options) {
  if (options.plan_override) {
    if (options.plan_override->group_of.size() != static_cast<size_t>(graph.num_nodes()))
      return InvalidArgument("the plan to compile was made for another graph");
    RETURN_IF_ERROR(VerifyPlan(graph, *options.plan_override));
    return PlannedGraph{*options.plan_override, options.plan_override->backend_notes};
  }
  PlannerOptions planner;
  planner.fuse = options.fuse;
  planner.disabled_kinds = options.disabled_kinds;
  planner.target = &backend.capabilities();
  ASSIGN_OR_RETURN(PlannedGraph planned, backend.Plan(graph, planner));
  planned.plan.backend_notes = planned.notes;  // kept with the plan: a compile reusing it says the same
  Status verified = VerifyPlan(graph, planned.plan);
  if (!verified.ok()) return Internal(fmt::format("the {} backend's plan fails verification: {}", backend.name(), verified.message()));
  return planned;
}

// Stage: the Kernel IR the backend lowered, verified (a malformed kernel is our bug, reported
// rather than emitted) and dumped. A template's program is printed, not verified: it is a
// fragment the template completes.
Status VerifyAndDumpKernels(const Backend& backend, const LoweredGraph& graph, const CompileOptions& options, size_t index,
                            size_t graphs) {
  std::string text;
  for (const LoweredGraph::LoweredKernel& k : graph.Kernels()) {
    if (!k.is_template) {
      Status verified = VerifyKernel(*k.kernel);
      if (!verified.ok()) return Internal(fmt::format("the {} backend's lowering: {}", backend.name(), verified.message()));
    }
    text += (k.is_template ? "// a template's epilogue or score program\n" : "") + PrintKernel(*k.kernel) + "\n";
  }
  return Dump(options, index, graphs, "kernels.ir.txt", text);
}

}  // namespace

StatusOr<std::vector<std::unique_ptr<LoweredGraph>>> LowerGraphs(Backend& backend, const std::vector<Graph>& graphs,
                                                                 const CompileOptions& options, double* plan_ms) {
  std::vector<std::unique_ptr<LoweredGraph>> lowered;
  for (size_t i = 0; i < graphs.size(); ++i) {
    const auto plan_start = Clock::now();
    ASSIGN_OR_RETURN(PlannedGraph planned, PlanStage(backend, graphs[i], options));
    if (plan_ms) *plan_ms += std::chrono::duration<double, std::milli>(Clock::now() - plan_start).count();
    RETURN_IF_ERROR(Dump(options, i, graphs.size(), "plan.txt", ExplainText(graphs[i], planned.plan)));
    std::string prefix = graphs.size() > 1 ? fmt::format("g{}_", i) : "";
    ASSIGN_OR_RETURN(std::unique_ptr<LoweredGraph> graph, backend.Lower(graphs[i], std::move(planned), prefix));
    RETURN_IF_ERROR(VerifyAndDumpKernels(backend, *graph, options, i, graphs.size()));
    RETURN_IF_ERROR(Dump(options, i, graphs.size(), std::string(backend.source_file_name()), graph->SourceText()));
    lowered.push_back(std::move(graph));
  }
  return lowered;
}

StatusOr<BuiltGraphs> BuildGraphs(Backend& backend, const std::vector<Graph>& graphs, const CompileOptions& options) {
  BuiltGraphs built;
  ASSIGN_OR_RETURN(built.lowered, LowerGraphs(backend, graphs, options));
  std::vector<const LoweredGraph*> all;
  for (const auto& g : built.lowered) all.push_back(g.get());
  ASSIGN_OR_RETURN(built.code, backend.Build(all));
  return built;
}

StatusOr<std::vector<std::unique_ptr<Executable>>> CompileGraphs(Backend& backend, const std::vector<Graph>& graphs,
                                                                 const CompileOptions& options) {
  const auto start = Clock::now();
  auto since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  double plan_ms = 0;
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<LoweredGraph>> lowered, LowerGraphs(backend, graphs, options, &plan_ms));
  const double lower_ms = since(start) - plan_ms;
  std::vector<const LoweredGraph*> all;
  for (const auto& g : lowered) all.push_back(g.get());
  const auto build_start = Clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<ObjectCode> code, backend.Build(all));
  const double build_ms = since(build_start);
  std::vector<std::unique_ptr<Executable>> loaded;
  for (std::unique_ptr<LoweredGraph>& graph : lowered) {
    const auto load_start = Clock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable, backend.Load(std::move(graph), *code));
    executable->set_compile_ms(since(start));
    executable->set_compile_stages_ms({{"plan", plan_ms}, {"lower", lower_ms}, {"build", build_ms}, {"load", since(load_start)}});
    loaded.push_back(std::move(executable));
  }
  return loaded;
}

StatusOr<std::unique_ptr<Executable>> CompileGraph(Backend& backend, const Graph& graph, const CompileOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Executable>> loaded, CompileGraphs(backend, {graph}, options));
  return std::move(loaded[0]);
}

namespace {

// The driver's executables, as the backend's own type (Load made them).
template <typename Typed>
std::vector<std::unique_ptr<Typed>> Downcast(std::vector<std::unique_ptr<Executable>> loaded) {
  std::vector<std::unique_ptr<Typed>> out;
  for (std::unique_ptr<Executable>& e : loaded) {
    TF_CHECK(dynamic_cast<Typed*>(e.get()) != nullptr);
    out.emplace_back(static_cast<Typed*>(e.release()));
  }
  return out;
}

}  // namespace

StatusOr<FusionPlan> PlanForDevice(const Graph& graph, PlannerOptions options, bool tf32) {
  const CpuCapabilities cpu;
  CudaTarget target;
  target.tf32 = tf32;
  const CudaCapabilities cuda{target};
  options.target = options.device == "cpu" ? static_cast<const TargetCapabilities*>(&cpu) : &cuda;
  if (options.device == "cpu") {
    ASSIGN_OR_RETURN(PlannedGraph planned, PlanFusionForCpu(graph, options));
    return std::move(planned.plan);
  }
  return PlanFusion(graph, options);
}

StatusOr<std::vector<std::unique_ptr<CpuExecutable>>> CompileBatchForCpu(const std::vector<Graph>& graphs,
                                                                         const CpuCompileOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(options));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Executable>> loaded, CompileGraphs(*backend, graphs, options));
  return Downcast<CpuExecutable>(std::move(loaded));
}

StatusOr<std::unique_ptr<CpuExecutable>> CompileForCpu(const Graph& graph, const CpuCompileOptions& options) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<CpuExecutable>> compiled, CompileBatchForCpu({graph}, options));
  return std::move(compiled[0]);
}

StatusOr<std::unique_ptr<CudaExecutable>> CompileForCuda(const Graph& graph, const CudaCompileOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::ForDevice(options));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Executable>> loaded, CompileGraphs(*backend, {graph}, options));
  return std::move(Downcast<CudaExecutable>(std::move(loaded))[0]);
}

}  // namespace tilefuse

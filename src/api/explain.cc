// `tilefuse explain` as a library call (tilefuse/tilefuse.h): the plan a device's backend
// would run and every decision's reason, without compiling; with `measured`, the plan after
// tuning and the fallback rule, the measured decisions beside it. And the planner's plan in
// numbers, for `demo`'s table.
#include <fmt/format.h>

#include "api/backend_setup.h"
#include "api/model_inputs.h"
#include "driver/driver.h"
#include "fusion/device_spec.h"
#include "fusion/explain.h"
#include "fusion/planner.h"
#include "ir/symbolic_shapes.h"
#include "tilefuse/tilefuse.h"
#include "tune/cpu_tuner.h"
#include "tune/gpu_tuner.h"

namespace tilefuse {
namespace {

Status CheckCostModel(const std::string& cost_model) {
  if (FindDeviceSpec(cost_model)) return Status::Ok();
  return InvalidArgument(fmt::format("unknown device '{}' (known: {})", cost_model, fmt::join(KnownDeviceNames(), ", ")));
}

// The measured plan: tuned on the GPU, else (no GPU: NotFound) on the CPU. `plan` becomes
// the plan after the fallback rule; the decisions go to `text` and `json`.
Status MeasurePlan(const Graph& graph, const PlannerOptions& planner, FusionPlan& plan, std::string& text, nlohmann::json& json) {
  TuneReport report;
  CudaCompileOptions gpu;
  gpu.fuse = planner.fuse;
  gpu.disabled_kinds = planner.disabled_kinds;
  StatusOr<std::unique_ptr<CudaExecutable>> tuned = TuneForGpu(graph, gpu, TuneOptions{}, &report);
  std::string device;
  if (tuned.ok()) {
    plan = (*tuned)->plan();
    device = (*tuned)->device_name();
  } else if (tuned.status().code() == StatusCode::kNotFound) {  // no GPU: measure on the CPU
    report = TuneReport{};
    CpuCompileOptions cpu;
    cpu.fuse = gpu.fuse;
    cpu.disabled_kinds = gpu.disabled_kinds;
    ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> tuned_cpu, TuneForCpu(graph, cpu, TuneOptions{}, &report));
    plan = tuned_cpu->plan();
    device = CpuTuningDeviceName();
  } else {
    return tuned.status();
  }
  json = FallbacksToJson(report.fallbacks);
  text = fmt::format("\nmeasured on {} (fused group vs its ops unfused; > 1.10x slower falls back):\n{}", device,
                     DescribeFallbacks(report.fallbacks));
  return Status::Ok();
}

}  // namespace

bool IsFusionGroupKind(std::string_view name) {
  GroupKind kind;
  return ParseGroupKind(name, &kind);
}

namespace {

// For a model with symbolic dims: the values the plan was made at, and each group's outputs
// in the symbols (what its kernel takes at launch where the backend sizes it so).
std::string SymbolsText(const Graph& graph, const FusionPlan& plan) {
  const SymbolicShapes symbolic = InferSymbolicShapes(graph);
  if (symbolic.empty()) return "";
  std::string text = "symbols:";
  for (size_t i = 0; i < symbolic.names.size(); ++i) text += fmt::format("{} {} = {}", i ? "," : "", symbolic.names[i], symbolic.values[i]);
  text += " (the plan and its costs at these values; sizes in them are passed to the kernels at launch)\n";
  for (const FusionGroup& group : plan.groups)
    for (int out : group.outputs) {
      std::string dims;
      bool any = false;
      for (const SymExpr& d : symbolic.dims.at(static_cast<size_t>(out))) {
        dims += (dims.empty() ? "" : ", ") + d.Print(symbolic.names);
        any = any || !d.IsConstant();
      }
      if (any) text += fmt::format("  group {} output %{}: [{}]\n", group.id, out, dims);
    }
  return text;
}

}  // namespace

StatusOr<PlanExplanation> ExplainModel(const std::string& path, const ExplainOptions& options) {
  PlannerOptions planner;
  planner.device = options.cost_model;
  planner.fuse = options.fuse;
  for (const std::string& name : options.disabled_kinds) {
    GroupKind kind;
    if (!ParseGroupKind(name, &kind))
      return InvalidArgument(fmt::format("unknown group kind '{}' (pointwise, row_reduction, reduction, gemm, attention)", name));
    planner.disabled_kinds.insert(kind);
  }
  RETURN_IF_ERROR(CheckCostModel(options.cost_model));
  ASSIGN_OR_RETURN(MatmulPrecision precision, ParseMatmulPrecision(options.precision));
  const bool tf32 = precision == MatmulPrecision::kHigh;
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(path, ImportOptions{.dims = options.dims}));
  ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(imported.graph),
                                               options.cost_model == "cpu" ? CpuPassOptions() : CudaPassOptions()));
  // The costs of the kernels the device's backend would run (its gemm epilogues fused or not).
  ASSIGN_OR_RETURN(FusionPlan plan, PlanForDevice(graph, planner, tf32));
  std::string measured_text;
  nlohmann::json measured;
  if (options.measured) RETURN_IF_ERROR(MeasurePlan(graph, planner, plan, measured_text, measured));
  PlanExplanation explanation;
  explanation.text = SymbolsText(graph, plan) + ExplainText(graph, plan) + measured_text;
  nlohmann::json j = ExplainJson(graph, plan);
  if (!graph.symbolic_inputs().empty()) j["symbols"] = graph.symbolic_inputs().values;
  if (options.measured) j["measured_fallbacks"] = measured;
  explanation.json = j.dump(2);
  explanation.dot = ExplainDot(graph, plan);
  return explanation;
}

StatusOr<PlanSummary> SummarizePlan(const Graph& passed, const std::string& cost_model) {
  RETURN_IF_ERROR(CheckCostModel(cost_model));
  PlannerOptions planner;
  planner.device = cost_model;
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(passed, planner));
  PlanSummary summary;
  summary.unfused_kernels = plan.unfused_kernels;
  summary.fused_kernels = static_cast<int>(plan.groups.size());
  for (const FusionGroup& group : plan.groups) summary.group_kinds.emplace_back(GroupKindName(group.kind));
  summary.predicted_us = plan.predicted_us;
  summary.unfused_predicted_us = plan.unfused_predicted_us;
  return summary;
}

}  // namespace tilefuse

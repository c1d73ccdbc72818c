// `tilefuse explain MODEL`: what the fusion planner decided and why — one line per
// group, the merges it rejected with their reasons, and a drawing (DOT or SVG).
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "api/backend_setup.h"
#include "driver/driver.h"
#include "tune/cpu_tuner.h"
#include "tune/gpu_tuner.h"
#include "fusion/device_spec.h"
#include "fusion/explain.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "support/file_util.h"

namespace tilefuse::cli {
namespace {

struct ExplainOptions {
  std::string model;
  std::string device = "h100-sxm";
  std::string dot_file, svg_file;
  std::vector<std::string> disabled;
  bool json = false;
  bool no_fusion = false;
  bool measured = false;
};

// Renders DOT to SVG with Graphviz, through a temporary file renamed into place.
Status WriteSvg(const std::string& dot, const std::string& svg_file) {
  if (FindOnPath("dot").empty())
    return Unimplemented("--svg needs Graphviz's `dot` on PATH (Debian: apt-get install graphviz); --dot FILE works without it");
  std::string dot_temp = svg_file + ".dot.tmp", svg_temp = svg_file + ".svg.tmp";
  RETURN_IF_ERROR(WriteFileAtomically(dot_temp, dot));
  std::string command = fmt::format("dot -Tsvg '{}' -o '{}' 2>&1", dot_temp, svg_temp);
  int rc = std::system(command.c_str());
  std::filesystem::remove(dot_temp);
  if (rc != 0) {
    std::filesystem::remove(svg_temp);
    return Internal(fmt::format("Graphviz dot failed (exit {}) rendering '{}'", rc, svg_file));
  }
  std::error_code ec;
  std::filesystem::rename(svg_temp, svg_file, ec);
  if (ec) return InvalidArgument(fmt::format("cannot write '{}': {}", svg_file, ec.message()));
  return Status::Ok();
}

Status Explain(const ExplainOptions& options) {
  PlannerOptions planner;
  planner.device = options.device;
  planner.fuse = !options.no_fusion;
  for (const std::string& name : options.disabled) {
    GroupKind kind;
    if (!ParseGroupKind(name, &kind))
      return InvalidArgument(fmt::format("--disable-fusion: unknown group kind '{}' (pointwise, row_reduction, "
                                         "reduction, gemm, attention)", name));
    planner.disabled_kinds.insert(kind);
  }
  if (!FindDeviceSpec(options.device))
    return InvalidArgument(fmt::format("unknown device '{}' (known: {})", options.device, fmt::join(KnownDeviceNames(), ", ")));
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(options.model));
  ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(imported.graph), options.device == "cpu" ? CpuPassOptions() : CudaPassOptions()));
  // The costs of the kernels the device's backend would run (its gemm epilogues fused or not).
  ASSIGN_OR_RETURN(FusionPlan plan, PlanForDevice(graph, planner));
  nlohmann::json measured;
  std::string measured_text;
  if (options.measured) {
    // The plan the GPU (else the CPU) runs after tuning: fused groups measured against their
    // ops unfused.
    TuneReport report;
    CudaCompileOptions gpu;
    gpu.fuse = !options.no_fusion;
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
    measured = FallbacksToJson(report.fallbacks);
    measured_text = fmt::format("\nmeasured on {} (fused group vs its ops unfused; > 1.10x slower falls back):\n{}", device,
                                DescribeFallbacks(report.fallbacks));
  }
  if (!options.dot_file.empty()) RETURN_IF_ERROR(WriteFileAtomically(options.dot_file, ExplainDot(graph, plan)));
  if (!options.svg_file.empty()) RETURN_IF_ERROR(WriteSvg(ExplainDot(graph, plan), options.svg_file));
  if (options.json) {
    nlohmann::json j = ExplainJson(graph, plan);
    if (options.measured) j["measured_fallbacks"] = measured;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{}{}", ExplainText(graph, plan), measured_text);
  }
  return Status::Ok();
}

}  // namespace

void AddExplainCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* explain = app.add_subcommand("explain", "Show which ops the fusion planner groups into kernels, and why");
  explain->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  explain->add_flag("--json", options->json, "Print the plan as JSON instead of text");
  explain->add_option("--dot", options->dot_file, "Also write the graph, one cluster per group, as Graphviz DOT");
  explain->add_option("--svg", options->svg_file, "Also render the graph to SVG (needs Graphviz `dot`)");
  explain->add_option("--device", options->device, "Cost model device: h100-sxm, h200 or cpu")
      ->capture_default_str();
  explain->add_flag("--measured", options->measured,
                    "On the GPU (else the CPU): tune, time each fused group against its ops unfused, and show the\n"
                    "plan after the fallback rule with the measured times and decisions");
  explain->add_flag("--no-fusion", options->no_fusion, "Every op its own kernel (views folded into their consumers)");
  explain->add_option("--disable-fusion", options->disabled,
                      "Never form groups of this kind (pointwise, row_reduction, reduction, gemm, attention); repeatable")
      ->delimiter(',');
  explain->footer(
      "Examples:\n"
      "  tilefuse explain examples/mlp_block.onnxtxt\n"
      "  tilefuse explain model.onnx --json --device h200\n"
      "  tilefuse explain model.onnx --svg plan.svg --disable-fusion=gemm");
  explain->callback([options, &exit_code] {
    Status status = Explain(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli

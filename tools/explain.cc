// `tilefuse explain MODEL`: what the fusion planner decided and why — one line per
// group, the merges it rejected with their reasons, and a drawing (DOT or SVG).
#include <cstdlib>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {
namespace {

struct ExplainCommandOptions {
  std::string model;
  std::string device = "h100-sxm";
  std::string dot_file, svg_file;
  std::vector<std::string> disabled;
  bool json = false;
  bool no_fusion = false;
  bool measured = false;
  std::string precision = "highest";
  std::string shape;  // --shape: symbolic dims' values
};

// Renders DOT to SVG with Graphviz, through a temporary file renamed into place.
Status WriteSvg(const std::string& dot, const std::string& svg_file) {
  if (!IsOnPath("dot"))
    return Unimplemented("--svg needs Graphviz's `dot` on PATH (Debian: apt-get install graphviz); --dot FILE works without it");
  std::string dot_temp = svg_file + ".dot.tmp", svg_temp = svg_file + ".svg.tmp";
  RETURN_IF_ERROR(WriteOutputFile(dot_temp, dot));
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

Status Explain(const ExplainCommandOptions& options) {
  ExplainOptions explain;
  explain.cost_model = options.device;
  explain.fuse = !options.no_fusion;
  explain.measured = options.measured;
  explain.precision = options.precision;
  ASSIGN_OR_RETURN(ShapeFlag shape, ParseShapeFlag(options.shape));
  explain.dims = shape.AtTypical();
  for (const std::string& name : options.disabled) {
    if (!IsFusionGroupKind(name))
      return InvalidArgument(fmt::format("--disable-fusion: unknown group kind '{}' (pointwise, row_reduction, "
                                         "reduction, gemm, attention)", name));
    explain.disabled_kinds.push_back(name);
  }
  ASSIGN_OR_RETURN(PlanExplanation plan, ExplainModel(options.model, explain));
  if (!options.dot_file.empty()) RETURN_IF_ERROR(WriteOutputFile(options.dot_file, plan.dot));
  if (!options.svg_file.empty()) RETURN_IF_ERROR(WriteSvg(plan.dot, options.svg_file));
  if (options.json) {
    fmt::print("{}\n", plan.json);
  } else {
    fmt::print("{}", plan.text);
  }
  return Status::Ok();
}

}  // namespace

void AddExplainCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ExplainCommandOptions>();
  CLI::App* explain = app.add_subcommand("explain", "Show which ops the fusion planner groups into kernels, and why");
  explain->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  explain->add_flag("--json", options->json, "Print the plan as JSON instead of text");
  explain->add_option("--dot", options->dot_file, "Also write the graph, one cluster per group, as Graphviz DOT");
  explain->add_option("--svg", options->svg_file, "Also render the graph to SVG (needs Graphviz `dot`)");
  explain->add_option("--precision", options->precision,
                      "The GPU's f32 products as `run --precision` computes them: highest (exact f32: cuBLASLt, the "
                      "epilogue apart where cuBLASLt does not fuse it) or high (TF32: the GEMM template fusing it)")
      ->check(CLI::IsMember({"highest", "high"}))
      ->capture_default_str();
  explain->add_option("--shape", options->shape, kShapeFlagHelp);
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

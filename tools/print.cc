// `tilefuse print MODEL`: the IR as imported, or after the graph passes.
//
// A developer's tool, and the one user-facing command that stays on library internals
// (ir/printer.h, passes/pipeline.h) rather than the facade (tilefuse/tilefuse.h): it prints
// the IR itself, in the printer's text form, and --keep-composites runs the passes without
// decomposition, a pass option no compile uses. Neither is something a compiled model offers.
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "ir/printer.h"
#include "passes/pipeline.h"

namespace tilefuse::cli {
namespace {

struct PrintOptions {
  std::string model;
  std::string dump_dir;
  std::string shape;  // --shape: symbolic dims' values
  bool passes = false;
  bool keep_composites = false;
};

Status PrintModel(const PrintOptions& options) {
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModelWithShapes(options.model, options.shape));
  if (!options.passes) {
    fmt::print("# {} as imported (opset {}, {} ONNX nodes)\n{}", options.model, imported.info.opset,
               imported.info.num_onnx_nodes, PrintGraph(imported.graph));
    return Status::Ok();
  }
  DumpDirStaging dumps(options.dump_dir);
  PassOptions pass_options;
  pass_options.decompose = !options.keep_composites;
  ASSIGN_OR_RETURN(pass_options.dump_dir, dumps.Prepare());
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(std::move(imported.graph), pass_options));
  RETURN_IF_ERROR(dumps.Publish());
  fmt::print("# {} after the graph passes{} (opset {})\n{}", options.model,
             options.keep_composites ? ", composites kept" : "", imported.info.opset, PrintGraph(passed));
  return Status::Ok();
}

}  // namespace

void AddPrintCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<PrintOptions>();
  CLI::App* print = app.add_subcommand(
      "print", "Print a model's graph IR, as imported or after the passes");
  print->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  CLI::Option* passes =
      print->add_flag("--passes", options->passes, "Run the graph passes (fold, CSE, DCE, decompose) first");
  print->add_flag("--keep-composites", options->keep_composites,
                  "With --passes: do not decompose composite ops (softmax, layer_norm, gelu)")
      ->needs(passes);
  print->add_option("--shape", options->shape, kShapeFlagHelp);
  print->add_option("--dump-dir", options->dump_dir, "With --passes: write the IR after every pass here")
      ->needs(passes);
  print->footer(
      "Examples:\n"
      "  tilefuse print examples/layernorm_composite.onnxtxt\n"
      "  tilefuse print examples/layernorm_composite.onnxtxt --passes --dump-dir ir_dumps/");
  print->callback([options, &exit_code] {
    Status status = PrintModel(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli

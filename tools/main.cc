// `tilefuse`: the command-line front door. Usage errors exit 2, like any bad input.
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tilefuse: a fusion compiler for deep-learning tensor graphs.\n"
      "It imports ONNX models (.onnx, .onnxtxt, or an ONNX backend-test folder), lowers them to\n"
      "primitive ops, fuses them and runs them as generated kernels: CUDA compiled by NVRTC on an\n"
      "NVIDIA GPU (Hopper first), C++ on the CPU when there is none; the f64 reference interpreter\n"
      "checks them (--check).",
      "tilefuse"};
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  tilefuse run examples/softmax_manual.onnxtxt --check\n"
      "  tilefuse print model.onnx --passes\n"
      "  tilefuse explain examples/mlp_block.onnxtxt --svg plan.svg\n"
      "  tilefuse compile examples/gelu_manual.onnxtxt --emit kernels/\n"
      "  tilefuse bench examples/softmax_manual.onnxtxt\n"
      "  tilefuse demo\n"
      "  tilefuse fuzz --seed 1 --count 20\n"
      "Run `tilefuse SUBCOMMAND --help` for the options of each subcommand.\n"
      "Exit codes: 0 ok, 1 --check (or fuzz) mismatch, 2 bad input, unsupported model or bad usage.");

  int exit_code = tilefuse::cli::kExitOk;
  tilefuse::cli::AddRunCommand(app, exit_code);
  tilefuse::cli::AddPrintCommand(app, exit_code);
  tilefuse::cli::AddDemoCommand(app, exit_code);
  tilefuse::cli::AddExplainCommand(app, exit_code);
  tilefuse::cli::AddCompileCommand(app, exit_code);
  tilefuse::cli::AddBenchCommand(app, exit_code);
  tilefuse::cli::AddFuzzCommand(app, exit_code);
  tilefuse::cli::AddTuneCommand(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help and friends
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << "\nRun with --help for usage.\n";
    return tilefuse::cli::kExitBadInput;
  }
  return exit_code;
}

// The subcommands of `tilefuse`, one file each. Each Add*Command registers its options
// on `app` and, when the subcommand is the one parsed, runs it and stores its exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace tilefuse::cli {

void AddRunCommand(CLI::App& app, int& exit_code);    // tools/run.cc
void AddPrintCommand(CLI::App& app, int& exit_code);  // tools/print.cc
void AddDemoCommand(CLI::App& app, int& exit_code);   // tools/demo.cc
void AddExplainCommand(CLI::App& app, int& exit_code);  // tools/explain.cc
void AddCompileCommand(CLI::App& app, int& exit_code);  // tools/compile.cc
void AddBenchCommand(CLI::App& app, int& exit_code);    // tools/bench.cc
void AddFuzzCommand(CLI::App& app, int& exit_code);     // tools/fuzz.cc
void AddTuneCommand(CLI::App& app, int& exit_code);     // tools/tune.cc

}  // namespace tilefuse::cli

// `tilefuse demo`: runs every examples/*.onnxtxt through import, the passes, the fusion
// planner and the reference interpreter, checks that the passes kept each graph's
// meaning, and prints a table. Kernel timings arrive with the fused backends.
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "backend/cpu/interpreter.h"
#include "cli_common.h"
#include "commands.h"
#include "compare.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"

#ifndef TILEFUSE_SOURCE_DIR
#define TILEFUSE_SOURCE_DIR "."
#endif

namespace tilefuse::cli {
namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  std::string examples_dir = TILEFUSE_SOURCE_DIR "/examples";
  uint64_t seed = 0;
};

struct DemoRow {
  std::string name;
  int nodes_imported = 0;
  int nodes_after_passes = 0;
  int outputs = 0;
  int unfused_kernels = 0;
  int fused_kernels = 0;
  std::string groups;  // the fused plan's group kinds, e.g. "row_reduction gemm gemm"
  double predicted_speedup = 0;
  bool passed = false;
  std::string detail;  // why the check failed
  double reference_ms = 0;
  Status error;
};

// Runs one example; the check compares the passed graph against the graph as imported.
Status RunExample(const std::string& path, uint64_t seed, DemoRow& row) {
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(path));
  row.nodes_imported = imported.graph.num_nodes();
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(imported.graph, PassOptions{}));
  row.nodes_after_passes = passed.num_nodes();
  row.outputs = static_cast<int>(passed.outputs().size());
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(passed, PlannerOptions{}));
  row.unfused_kernels = plan.unfused_kernels;
  row.fused_kernels = static_cast<int>(plan.groups.size());
  for (const FusionGroup& group : plan.groups) row.groups += (row.groups.empty() ? "" : " ") + std::string(GroupKindName(group.kind));
  row.predicted_speedup = plan.unfused_predicted_us / plan.predicted_us;

  std::vector<Tensor> inputs = MakeRandomInputs(passed, seed);
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::vector<Tensor> actual, RunReference(passed, inputs));
  row.reference_ms = MillisecondsSince(start);
  ASSIGN_OR_RETURN(std::vector<Tensor> expected, RunReference(imported.graph, inputs));

  row.passed = actual.size() == expected.size();
  for (size_t i = 0; row.passed && i < actual.size(); ++i) {
    Comparison c = CompareTensors(actual[i], expected[i]);
    if (!c.pass) {
      row.passed = false;
      row.detail = fmt::format("output '{}': {}", passed.outputs()[i].name, c.reason);
    }
  }
  return Status::Ok();
}

std::vector<std::string> FindExamples(const std::string& dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".onnxtxt") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

void PrintTable(const std::vector<DemoRow>& rows) {
  fmt::print("{:<28} {:>5} {:>6} {:>7} {:>8}  {:<26} {:>6} {:>8}\n", "example", "ops", "after", "kernels", "predicted",
             "fused groups", "check", "ref ms");
  for (const DemoRow& row : rows) {
    if (!row.error.ok()) {
      fmt::print("{:<28} ERROR {}\n", row.name, row.error.ToString());
      continue;
    }
    fmt::print("{:<28} {:>5} {:>6} {:>7} {:>8.1f}x  {:<26} {:>6} {:>8.2f}\n", row.name, row.nodes_imported,
               row.nodes_after_passes, fmt::format("{}->{}", row.unfused_kernels, row.fused_kernels),
               row.predicted_speedup, row.groups, row.passed ? "PASS" : "FAIL", row.reference_ms);
    if (!row.passed) fmt::print("    {}\n", row.detail);
  }
  fmt::print(
      "\nops: IR nodes as imported / after the graph passes. kernels: unfused -> fused, and the planner's\n"
      "predicted speedup on the H100 cost model (`tilefuse explain MODEL` shows why). check: outputs after\n"
      "the passes vs. the graph as imported, both on the f64 reference interpreter.\n"
      "The fused kernels are planned but not generated yet (CPU and CUDA code generation come next):\n"
      "no kernel timings.\n");
}

int RunDemo(const DemoOptions& options) {
  std::vector<std::string> examples = FindExamples(options.examples_dir);
  if (examples.empty()) {
    PrintError(NotFound(fmt::format("no .onnxtxt examples in '{}' (use --examples DIR)", options.examples_dir)));
    return kExitBadInput;
  }
  std::vector<DemoRow> rows;
  for (const std::string& path : examples) {
    DemoRow row;
    row.name = fs::path(path).stem().string();
    row.error = RunExample(path, options.seed, row);
    rows.push_back(std::move(row));
  }
  PrintTable(rows);
  bool any_error = std::any_of(rows.begin(), rows.end(), [](const DemoRow& r) { return !r.error.ok(); });
  bool any_fail = std::any_of(rows.begin(), rows.end(), [](const DemoRow& r) { return !r.passed; });
  return any_error ? kExitBadInput : any_fail ? kExitMismatch : kExitOk;
}

}  // namespace

void AddDemoCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* demo = app.add_subcommand("demo", "Run the example workloads in examples/ and print a table");
  demo->add_option("--examples", options->examples_dir, "Folder of .onnxtxt examples")->capture_default_str();
  demo->add_option("--seed", options->seed, "Seed of the random inputs")->capture_default_str();
  demo->footer(
      "Runs every examples/*.onnxtxt (GELU, softmax, layernorm, rmsnorm, matmul epilogues, causal\n"
      "attention, dropout+residual+layernorm, MLP block) through import, the passes and the reference\n"
      "interpreter on random inputs, and checks the passes against the graph as imported.\n\n"
      "Example:\n  tilefuse demo --examples examples/");
  demo->callback([options, &exit_code] { exit_code = RunDemo(*options); });
}

}  // namespace tilefuse::cli

// `tilefuse demo`: runs every examples/*.onnxtxt through import, the passes, the fusion
// planner and the CPU backend (fused and unfused generated kernels), checks the passes
// and the fused kernels against the reference interpreter, and prints one table with
// the kernel counts, the plan and the measured times.
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "cuda_path_options.h"
#include "tilefuse/tilefuse.h"

#ifndef TILEFUSE_SOURCE_DIR
#define TILEFUSE_SOURCE_DIR "."
#endif

namespace tilefuse::cli {
namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  std::string examples_dir = TILEFUSE_SOURCE_DIR "/examples";
  std::string backend = "auto";
  bool tune = false;
  bool strict = false;  // a group on the reference interpreter is an error, not a warning
  uint64_t seed = 0;
  int repeats = 5;
  int device = 0;  // cuda: the GPU's ordinal
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
  int generated_kernels = 0;  // of the fused kernels, those generated (the rest: reference)
  double fused_ms = 0, unfused_ms = 0;  // median of DemoOptions::repeats
  double percent_of_copy = 0;           // cuda: the fused graph's bytes moved over the copy rate
  bool passed = false;
  std::string detail;  // why the check failed
  Status error;
};

// The first output outside tolerance, or "" when all match.
std::string FirstMismatch(const Graph& graph, const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                          bool generated = false) {
  if (actual.size() != expected.size()) return "output counts differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    OutputComparison c = CompareOutput(actual[i], expected[i], generated ? CompareRule::kKernels : CompareRule::kElementwise);
    if (!c.pass) return fmt::format("output '{}': {}", graph.outputs()[i].name, c.reason);
  }
  return "";
}

// Compiles fused and unfused for `model.backend`, times both, and checks the fused outputs
// against `expected` (the reference interpreter on the passed graph). On the GPU: device-event
// medians of the captured graphs, and the share of the copy bandwidth the fused graph reaches
// (inputs read once, outputs written once).
Status RunCompiled(const Graph& passed, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                   ModelOptions model, int repeats, double copy_bandwidth, DemoRow& row) {
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> fused, CompiledModel::FromPassedGraph(passed, model));
  for (const std::string& warning : fused->warnings()) fmt::print(stderr, "warning: {}: {}\n", row.name, warning);
  model.fuse = false;
  model.tune = false;
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> unfused, CompiledModel::FromPassedGraph(passed, model));
  for (const KernelSummary& kernel : fused->kernels()) row.generated_kernels += kernel.generated ? 1 : 0;
  ASSIGN_OR_RETURN(std::vector<Tensor> actual, fused->Run(inputs));
  std::string mismatch = FirstMismatch(passed, actual, expected, /*generated=*/true);
  if (!mismatch.empty()) {
    row.passed = false;
    row.detail = fmt::format("fused {} kernels vs reference: {}", model.backend, mismatch);
  }
  const bool cuda = model.backend == "cuda";
  const BenchmarkOptions timing{cuda ? 3 : 1, cuda ? std::max(repeats, 20) : repeats, 1};
  ASSIGN_OR_RETURN(BenchmarkResult fused_time, fused->Benchmark(inputs, timing));
  ASSIGN_OR_RETURN(BenchmarkResult unfused_time, unfused->Benchmark(inputs, timing));
  row.fused_ms = fused_time.median_ms;
  row.unfused_ms = unfused_time.median_ms;
  if (!cuda) return Status::Ok();
  double bytes = 0;
  for (const Tensor& t : inputs) bytes += t.num_bytes();
  for (const Tensor& t : actual) bytes += t.num_bytes();
  row.percent_of_copy = 100 * bytes / (row.fused_ms * 1e-3) / copy_bandwidth;
  return Status::Ok();
}

// Runs one example. The check: the passed graph against the graph as imported (both on
// the reference interpreter), and the fused kernels against the passed graph.
Status RunExample(const std::string& path, const DemoOptions& options, double copy_bandwidth, DemoRow& row) {
  ModelOptions model;
  model.backend = copy_bandwidth > 0 ? "cuda" : "cpu";
  model.device = copy_bandwidth > 0 ? options.device : 0;
  model.tune = options.tune;
  model.strict = options.strict;
  model.poison_outputs = copy_bandwidth > 0;  // the check sees what the kernels wrote, nothing left over
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(path));
  row.nodes_imported = imported.graph.num_nodes();
  // On the CPU, f32 convolutions stay for oneDNN (what `run --backend cpu` compiles).
  ASSIGN_OR_RETURN(Graph passed, CompiledModel::RunPasses(imported.graph, model));
  row.nodes_after_passes = passed.num_nodes();
  row.outputs = static_cast<int>(passed.outputs().size());
  ASSIGN_OR_RETURN(PlanSummary plan, SummarizePlan(passed));
  row.unfused_kernels = plan.unfused_kernels;
  row.fused_kernels = plan.fused_kernels;
  for (const std::string& kind : plan.group_kinds) row.groups += (row.groups.empty() ? "" : " ") + kind;
  row.predicted_speedup = plan.unfused_predicted_us / plan.predicted_us;

  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeRandomInputs(passed, options.seed));
  ASSIGN_OR_RETURN(std::vector<Tensor> reference, RunReferenceInterpreter(passed, inputs));
  ASSIGN_OR_RETURN(std::vector<Tensor> before_passes, RunReferenceInterpreter(imported.graph, inputs));
  std::string mismatch = FirstMismatch(passed, reference, before_passes);
  row.passed = mismatch.empty();
  if (!row.passed) row.detail = "passes vs graph as imported: " + mismatch;
  return RunCompiled(passed, inputs, reference, model, options.repeats, copy_bandwidth, row);
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

void PrintTable(const std::vector<DemoRow>& rows, bool cuda) {
  fmt::print("{:<28} {:>4} {:>5} {:>7} {:>4} {:>9}  {:<26} {:>9} {:>10} {:>7} {:>6} {:>6}\n", "example", "ops", "after",
             "kernels", "gen", "predicted", "fused groups", "fused ms", "unfused ms", "speedup", cuda ? "% copy" : "", "check");
  for (const DemoRow& row : rows) {
    if (!row.error.ok()) {
      fmt::print("{:<28} ERROR {}\n", row.name, row.error.ToString());
      continue;
    }
    fmt::print("{:<28} {:>4} {:>5} {:>7} {:>4} {:>8.1f}x  {:<26} {:>9.4f} {:>10.4f} {:>6.2f}x {:>6} {:>6}\n", row.name,
               row.nodes_imported, row.nodes_after_passes,
               fmt::format("{}->{}", row.unfused_kernels, row.fused_kernels), row.generated_kernels,
               row.predicted_speedup, row.groups, row.fused_ms, row.unfused_ms, row.unfused_ms / row.fused_ms,
               cuda ? fmt::format("{:.1f}%", row.percent_of_copy) : "", row.passed ? "PASS" : "FAIL");
    if (!row.passed) fmt::print("    {}\n", row.detail);
  }
  fmt::print(
      "\nops: IR nodes as imported / after the graph passes. kernels: unfused -> fused; gen: how many fused\n"
      "kernels are generated (the rest run on the reference kernels). predicted: the planner's speedup\n"
      "on the H100 cost model (`tilefuse explain MODEL`). fused/unfused ms: the whole graph on {},\n"
      "median of runs after a warm-up (`--no-fusion` = every op its own generated kernel){}; the examples\n"
      "are small, so these are launch-bound: bench/ times large inputs. check: the passes vs the graph as\n"
      "imported, and the fused kernels vs the f64 reference interpreter (outputs poisoned first).\n",
      cuda ? "the GPU" : "this CPU",
      cuda ? ", device events over a captured CUDA graph; % copy: bytes in + out over the measured copy rate" : "");
}

// The copy rate of the GPU when the demo runs there (auto with a GPU, or cuda), else 0.
StatusOr<double> ChooseBackend(const DemoOptions& options) {
  ModelOptions asked;
  asked.backend = options.backend;
  asked.device = options.device;
  RETURN_IF_ERROR(CheckModelOptions(asked));
  if (options.backend == "cpu") return 0.0;
  StatusOr<GpuInfo> device = DescribeGpu(options.device);
  if (!device.ok()) {
    if (options.backend == "cuda") return device.status();
    fmt::print("backend: cpu (no GPU: {})\n\n", device.status().message());
    return 0.0;
  }
  ASSIGN_OR_RETURN(double copy, MeasureGpuCopyBandwidth(options.device));
  fmt::print("backend: cuda on {} (measured copy rate {:.0f} GB/s)\n\n", device->name, copy / 1e9);
  return copy;
}

int RunDemo(const DemoOptions& options) {
  std::vector<std::string> examples = FindExamples(options.examples_dir);
  if (examples.empty()) {
    PrintError(NotFound(fmt::format("no .onnxtxt examples in '{}' (use --examples DIR)", options.examples_dir)));
    return kExitBadInput;
  }
  StatusOr<double> copy_bandwidth = ChooseBackend(options);
  if (!copy_bandwidth.ok()) {
    PrintError(copy_bandwidth.status());
    return kExitBadInput;
  }
  std::vector<DemoRow> rows;
  for (const std::string& path : examples) {
    DemoRow row;
    row.name = fs::path(path).stem().string();
    row.error = RunExample(path, options, *copy_bandwidth, row);
    rows.push_back(std::move(row));
  }
  PrintTable(rows, *copy_bandwidth > 0);
  bool any_error = std::any_of(rows.begin(), rows.end(), [](const DemoRow& r) { return !r.error.ok(); });
  bool any_fail = std::any_of(rows.begin(), rows.end(), [](const DemoRow& r) { return !r.passed; });
  return any_error ? kExitBadInput : any_fail ? kExitMismatch : kExitOk;
}

}  // namespace

void AddDemoCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* demo = app.add_subcommand("demo", "Run the example workloads in examples/ and print a table");
  demo->add_option("--examples", options->examples_dir, "Folder of .onnxtxt examples")->capture_default_str();
  demo->add_option("--backend", options->backend, "auto: the GPU when there is one, else the CPU")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  demo->add_flag("--tune", options->tune, "Tune the fused kernels first (cached per model and machine)");
  demo->add_flag("--strict", options->strict,
                 "An example with a group that would run on the reference interpreter (no generated kernel for an op)\n"
                 "is an error, not a warning");
  demo->add_option("--seed", options->seed, "Seed of the random inputs")->capture_default_str();
  demo->add_option("--repeats", options->repeats, "Timed runs per example and variant (median)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddDeviceOption(*demo, options->device);
  demo->footer(
      "Runs every examples/*.onnxtxt (GELU, softmax, layernorm, rmsnorm, matmul epilogues, causal\n"
      "attention, dropout+residual+layernorm, MLP block) through import, the passes, the fusion planner\n"
      "and the GPU backend (or the CPU one where there is no GPU) on random inputs; times fused vs\n"
      "unfused kernels and checks them against the\n"
      "reference interpreter.\n\n"
      "Example:\n  tilefuse demo --examples examples/");
  demo->callback([options, &exit_code] { exit_code = RunDemo(*options); });
}

}  // namespace tilefuse::cli

// `tilefuse demo`: runs every examples/*.onnxtxt through import, the passes, the fusion
// planner and the CPU backend (fused and unfused generated kernels), checks the passes
// and the fused kernels against the reference interpreter, and prints one table with
// the kernel counts, the plan and the measured times.
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "reference/interpreter.h"
#include "cli_common.h"
#include "commands.h"
#include "driver/driver.h"
#include "testing/tensor_compare.h"
#include "backend/cuda/copy_bandwidth.h"
#include "api/backend_setup.h"
#include "cuda_path_options.h"
#include "backend/cuda/cuda_executable.h"
#include "tune/gpu_tuner.h"
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
  std::string backend = "auto";
  bool tune = false;
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
    Comparison c = generated ? CompareWithReference(actual[i], expected[i]) : CompareTensors(actual[i], expected[i]);
    if (!c.pass) return fmt::format("output '{}': {}", graph.outputs()[i].name, c.reason);
  }
  return "";
}

// Compiles fused and unfused for the CPU, times both, and checks the fused outputs
// against `expected` (the reference interpreter on the passed graph).
Status RunOnCpu(const Graph& passed, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                int repeats, bool tune, DemoRow& row) {
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> fused, CompileModelForCpu(passed, true, "", tune));
  ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> unfused, CompileModelForCpu(passed, false));
  for (const KernelInfo& kernel : fused->kernels()) row.generated_kernels += kernel.generated ? 1 : 0;
  ASSIGN_OR_RETURN(std::vector<Tensor> actual, fused->Run(inputs));
  std::string mismatch = FirstMismatch(passed, actual, expected, /*generated=*/true);
  if (!mismatch.empty()) {
    row.passed = false;
    row.detail = "fused cpu kernels vs reference: " + mismatch;
  }
  ASSIGN_OR_RETURN(row.fused_ms, fused->BenchmarkMs(inputs, 1, repeats, 1));
  ASSIGN_OR_RETURN(row.unfused_ms, unfused->BenchmarkMs(inputs, 1, repeats, 1));
  return Status::Ok();
}

// The same on the GPU: device-event medians of the captured graphs, and the share of the
// copy bandwidth the fused graph reaches (inputs read once, outputs written once).
Status RunOnCuda(const Graph& passed, const std::vector<Tensor>& inputs, const std::vector<Tensor>& expected,
                 int repeats, double copy_bandwidth, bool tune, int device, DemoRow& row) {
  CudaCompileOptions options;
  options.poison_outputs = true;
  options.device_ordinal = device;
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> fused,
                   tune ? TuneForGpu(passed, options, TuneOptions{}, nullptr) : CompileForCuda(passed, options));
  options.fuse = false;
  ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> unfused, CompileForCuda(passed, options));
  for (const CudaKernelInfo& kernel : fused->kernels()) row.generated_kernels += kernel.mode != "host" ? 1 : 0;
  ASSIGN_OR_RETURN(std::vector<Tensor> actual, fused->Run(inputs));
  std::string mismatch = FirstMismatch(passed, actual, expected, /*generated=*/true);
  if (!mismatch.empty()) {
    row.passed = false;
    row.detail = "fused cuda kernels vs reference: " + mismatch;
  }
  int timed = std::max(repeats, 20);
  ASSIGN_OR_RETURN(row.fused_ms, fused->BenchmarkMs(inputs, 3, timed, 1));
  ASSIGN_OR_RETURN(row.unfused_ms, unfused->BenchmarkMs(inputs, 3, timed, 1));
  double bytes = 0;
  for (const Tensor& t : inputs) bytes += t.num_bytes();
  for (const Tensor& t : actual) bytes += t.num_bytes();
  row.percent_of_copy = 100 * bytes / (row.fused_ms * 1e-3) / copy_bandwidth;
  return Status::Ok();
}

// Runs one example. The check: the passed graph against the graph as imported (both on
// the reference interpreter), and the fused kernels against the passed graph.
Status RunExample(const std::string& path, const DemoOptions& options, double copy_bandwidth, DemoRow& row) {
  const int repeats = options.repeats;
  const bool tune = options.tune;
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(path));
  row.nodes_imported = imported.graph.num_nodes();
  // On the CPU, f32 convolutions stay for oneDNN (what `run --backend cpu` compiles).
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(imported.graph, copy_bandwidth > 0 ? CudaPassOptions() : CpuPassOptions()));
  row.nodes_after_passes = passed.num_nodes();
  row.outputs = static_cast<int>(passed.outputs().size());
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(passed, PlannerOptions{}));
  row.unfused_kernels = plan.unfused_kernels;
  row.fused_kernels = static_cast<int>(plan.groups.size());
  for (const FusionGroup& group : plan.groups) row.groups += (row.groups.empty() ? "" : " ") + std::string(GroupKindName(group.kind));
  row.predicted_speedup = plan.unfused_predicted_us / plan.predicted_us;

  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeRandomInputs(passed, options.seed));
  ASSIGN_OR_RETURN(std::vector<Tensor> reference, RunReference(passed, inputs));
  ASSIGN_OR_RETURN(std::vector<Tensor> before_passes, RunReference(imported.graph, inputs));
  std::string mismatch = FirstMismatch(passed, reference, before_passes);
  row.passed = mismatch.empty();
  if (!row.passed) row.detail = "passes vs graph as imported: " + mismatch;
  if (copy_bandwidth > 0) return RunOnCuda(passed, inputs, reference, repeats, copy_bandwidth, tune, options.device, row);
  return RunOnCpu(passed, inputs, reference, repeats, tune, row);
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
  RETURN_IF_ERROR(CheckDeviceForBackend(options.device, options.backend));
  if (options.backend == "cpu") return 0.0;
  StatusOr<CudaDevice*> device = CudaDevice::Get(options.device);
  if (!device.ok()) {
    if (options.backend == "cuda") return device.status();
    fmt::print("backend: cpu (no GPU: {})\n\n", device.status().message());
    return 0.0;
  }
  ASSIGN_OR_RETURN(double copy, MeasureCopyBandwidth(*device));
  fmt::print("backend: cuda on {} (measured copy rate {:.0f} GB/s)\n\n", (*device)->name(), copy / 1e9);
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

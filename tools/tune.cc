// `tilefuse tune MODEL`: measured search over every generated GPU kernel's configurations
// (tune/gpu_tuner.h), remembered in the tuning cache, then the fallback rule. A second run
// on the same model and machine measures nothing.
#include <unistd.h>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "passes/pipeline.h"
#include "tune/cuda_search_space.h"
#include "tune/gpu_tuner.h"

namespace tilefuse::cli {
namespace {

struct TuneCommandOptions {
  std::string model;
  std::string backend = "auto";
  double budget_s = 0;
  bool json = false;
  bool no_fallback = false;
};

// A one-line progress bar on stderr when it is a terminal; nothing otherwise.
std::function<void(int, int, const std::string&)> ProgressBar() {
  if (!isatty(STDERR_FILENO)) return nullptr;
  return [](int done, int total, const std::string& name) {
    int width = 30, filled = total ? width * done / total : width;
    fmt::print(stderr, "\r[{}{}] {}/{} {:<48}", std::string(filled, '#'), std::string(width - filled, ' '), done, total,
               name.substr(0, 48));
    if (done == total) fmt::print(stderr, "\n");
  };
}

Status Tune(const TuneCommandOptions& options) {
  if (options.backend == "cpu")
    return Unimplemented("tuning the cpu backend: its kernels have no tunable parameters yet (only cuda kernels are tuned)");
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModel(options.model));
  ASSIGN_OR_RETURN(Graph passed, RunGraphPasses(imported.graph, PassOptions{}));
  TuneOptions tune;
  tune.budget_s = options.budget_s;
  tune.fallback = !options.no_fallback;
  if (!options.json) tune.progress = ProgressBar();
  TuneReport report;
  ASSIGN_OR_RETURN(std::unique_ptr<GpuCompiledGraph> compiled, TuneForGpu(passed, GpuCompileOptions{}, tune, &report));
  if (options.json) {
    nlohmann::json j = report.ToJson();
    j["model"] = options.model;
    j["device"] = compiled->device_name();
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("model: {}, tuned on {} in {:.1f} s: {} measurements, {} from the cache{}\n", options.model, compiled->device_name(),
             report.seconds, report.measurements, report.cache_hits,
             report.measurements == 0 ? " (all from the cache)" : "");
  if (report.budget_exhausted) fmt::print("budget exhausted: later kernels kept what the cache knew, else their defaults\n");
  for (const KernelTuneResult& k : report.kernels) {
    fmt::print("  {:<36} {:>2} configs ({} pruned), {} measured, best {:.1f} us vs default {:.1f} us ({:.2f}x): {}\n", k.name, k.candidates,
               k.pruned, k.measured, k.best_us, k.default_us, k.best_us > 0 ? k.default_us / k.best_us : 0.0,
               k.best.dump());
  }
  if (!report.fallbacks.empty()) fmt::print("fused vs unfused, measured:\n{}", DescribeFallbacks(report.fallbacks));
  return Status::Ok();
}

}  // namespace

void AddTuneCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TuneCommandOptions>();
  CLI::App* tune = app.add_subcommand("tune", "Measure every generated kernel's configurations and remember the fastest");
  tune->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")->required();
  tune->add_option("--backend", options->backend, "cuda (auto picks it when there is a GPU); cpu is not tunable yet")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  tune->add_option("--budget", options->budget_s, "Seconds of measuring at most (default: 30 per kernel)");
  tune->add_flag("--json", options->json, "Print the report as JSON (\"measurements\": how many configs were timed)");
  tune->add_flag("--no-fallback", options->no_fallback, "Keep every fused group even when its ops measure faster unfused");
  tune->footer(
      "Each kernel's search space (threads, vector width, threads per row, row in registers or re-read) is\n"
      "pruned by the template's constraints, then measured on the GPU: device events, warm-up, median of\n"
      "repeats, inputs rotated beyond L2; a winner much faster than the default is measured again. Results\n"
      "go to $TILEFUSE_CACHE_DIR/tuning (default ~/.cache/tilefuse): a second run measures nothing. Then a\n"
      "fused group measured more than 10% slower than its ops unfused is replaced by them.\n\n"
      "Examples:\n  tilefuse tune bench/cases/softmax_bf16_16384x1024.onnxtxt\n  tilefuse tune model.onnx --budget 60 --json\n"
      "Exit codes: 0 ok, 2 bad input, no GPU, or usage.");
  tune->callback([options, &exit_code] {
    Status status = Tune(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli

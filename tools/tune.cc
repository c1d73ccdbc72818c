// `tilefuse tune MODEL`: measured search over every generated kernel's configurations
// (tune/gpu_tuner.h on the GPU, tune/cpu_tuner.h on the CPU), remembered in the tuning
// cache, then the fallback rule. A second run on the same model and machine measures nothing.
#include <unistd.h>

#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {
namespace {

struct TuneCommandOptions {
  std::string model;
  std::string backend = "auto";
  double budget_s = 0;
  bool json = false;
  bool no_fallback = false;
  std::string shape;  // --shape: symbolic dims' values
  std::string precision = "highest";
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

Status TuneModel(const TuneCommandOptions& options) {
  TuningOptions tuning;
  tuning.backend = options.backend;
  tuning.budget_s = options.budget_s;
  tuning.fallback = !options.no_fallback;
  ASSIGN_OR_RETURN(ShapeFlag shape, ParseShapeFlag(options.shape));
  tuning.dims = shape.AtTypical();
  tuning.precision = options.precision;
  if (!options.json) tuning.progress = ProgressBar();
  ASSIGN_OR_RETURN(TuningReport report, Tune(options.model, tuning));
  if (!report.note.empty()) fmt::print(stderr, "tilefuse: note: no GPU ({}); tuned the cpu backend\n", report.note);
  if (options.json) {
    fmt::print("{}\n", report.json);
    return Status::Ok();
  }
  fmt::print("model: {}, tuned on {} in {:.1f} s: {} measurements, {} from the cache{}\n", options.model, report.device,
             report.seconds, report.measurements, report.cache_hits,
             report.measurements == 0 ? " (all from the cache)" : "");
  if (report.budget_exhausted) fmt::print("budget exhausted: later kernels kept what the cache knew, else their defaults\n");
  for (const KernelTuning& k : report.kernels) {
    fmt::print("  {:<36} {:>2} configs ({} pruned), {} measured in {:.1f} s, best {:.1f} us vs default {:.1f} us ({:.2f}x): {}\n",
               k.name, k.candidates, k.pruned, k.measured, k.seconds, k.best_us, k.default_us,
               k.best_us > 0 ? k.default_us / k.best_us : 0.0, k.best);
  }
  if (!report.fallbacks.empty()) fmt::print("fused vs unfused, measured:\n{}", report.fallbacks);
  return Status::Ok();
}

}  // namespace

void AddTuneCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<TuneCommandOptions>();
  CLI::App* tune = app.add_subcommand("tune", "Measure every generated kernel's configurations and remember the fastest");
  tune->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")->required();
  tune->add_option("--backend", options->backend, "cuda or cpu (auto: cuda when there is a GPU, else cpu)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
  tune->add_option("--budget", options->budget_s, "Seconds of measuring at most (default: 30 per kernel)");
  tune->add_option("--shape", options->shape, kShapeFlagHelp);
  tune->add_option("--precision", options->precision,
                   "cuda, f32 matmuls as `run --precision` compiles them: highest (exact f32) or high (TF32); tune with the "
                   "precision the model will run with")
      ->check(CLI::IsMember({"highest", "high"}))
      ->capture_default_str();
  tune->add_flag("--json", options->json, "Print the report as JSON (\"measurements\": how many configs were timed)");
  tune->add_flag("--no-fallback", options->no_fallback, "Keep every fused group even when its ops measure faster unfused");
  tune->footer(
      "Each kernel's search space is pruned by the template's constraints, then measured. cuda: threads,\n"
      "vector width, threads per row, row in registers or re-read, a long row shared by a cluster of CTAs;\n"
      "device events, inputs rotated beyond L2.\n"
      "cpu: OpenMP team size, schedule and chunk of the outer loop, row buffer or recompute; steady clock,\n"
      "inputs rotated beyond the last-level cache. Both: warm-up, median of repeats, a winner much faster\n"
      "than the default measured again; a config that fails to compile counts as infinitely slow. Results\n"
      "go to $TILEFUSE_CACHE_DIR/tuning (default ~/.cache/tilefuse): a second run measures nothing. Then a\n"
      "fused group measured more than 10% slower than its ops unfused is replaced by them.\n\n"
      "Examples:\n  tilefuse tune bench/cases/softmax_bf16_16384x1024.onnxtxt\n  tilefuse tune model.onnx --budget 60 --json\n"
      "  tilefuse tune bench/cpu_cases/softmax_manual.onnxtxt --backend cpu\n"
      "Exit codes: 0 ok, 2 bad input, --backend cuda without a GPU, or usage.");
  tune->callback([options, &exit_code] {
    Status status = TuneModel(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli

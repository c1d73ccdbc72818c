// `tilefuse bench MODEL --backend cuda`: fused vs unfused on the GPU, on random inputs.
// Each plan is compiled twice into a kernel cache of its own (cold, then warm: a cache
// hit), then one whole run is timed with device events (the CUDA graph replayed where the
// plan could be captured), after warm-up, median of repeats, rotating among copies of the
// inputs so that repeats do not find them in L2. TF/s uses the planner's flop count, %
// of copy the graph's input + output bytes against the measured device-to-device copy
// rate (a 1 GiB copy's), and against one copy moving as many bytes as the graph ("% same":
// a short graph cannot reach the large copy's rate, and neither can such a copy). Then each
// fused group alone (device events around it, median of 7 runs): where
// the time goes, with each group's TF/s and % of copy from its own flops and bytes.
#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "cli_common.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {
namespace {

struct CudaVariant {  // fused or unfused
  double run_ms = 0;
  int input_sets = 1;
  double compile_cold_ms = 0, compile_warm_ms = 0;
  // Compile units (one per distinct kernel) compiled, and found in the cache.
  int64_t nvrtc_compiles_cold = 0, nvrtc_compiles_warm = 0, nvrtc_cache_hits_cold = 0, nvrtc_cache_hits_warm = 0;
  int kernels = 0;
  bool captured = false;
  int64_t arena_bytes = 0;
  std::unique_ptr<CompiledModel> compiled;  // the warm one
};

ModelOptions GpuModelOptions(const BenchOptions& options, bool fuse, const std::string& cache_dir, bool tune) {
  ModelOptions model;
  ApplyCudaPathChoices(options.cuda_paths, model);
  model.backend = "cuda";
  model.fuse = fuse;
  model.cache_dir = cache_dir;
  model.tune = tune && fuse;
  model.device = options.device;
  return model;
}

StatusOr<CudaVariant> BenchVariant(const Graph& passed, bool fuse, const std::vector<Tensor>& inputs,
                                   const BenchOptions& options) {
  FreshCacheDir cache;
  if (cache.path().empty()) return Internal("cannot create a temporary kernel cache folder");
  CudaVariant v;
  ModelOptions model = GpuModelOptions(options, fuse, cache.path(), options.tune);
  model.strict = options.strict;  // groups on the host: an error, not a warning
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> cold, CompiledModel::FromPassedGraph(passed, model));
  if (fuse)
    for (const std::string& warning : cold->warnings()) fmt::print(stderr, "warning: {}\n", warning);
  v.compile_cold_ms = cold->backend_compile_ms();
  v.nvrtc_compiles_cold = cold->jit_compiles();
  v.nvrtc_cache_hits_cold = cold->jit_cache_hits();
  cold.reset();
  ASSIGN_OR_RETURN(v.compiled, CompiledModel::FromPassedGraph(passed, model));
  v.compile_warm_ms = v.compiled->backend_compile_ms();
  v.nvrtc_compiles_warm = v.compiled->jit_compiles();
  v.nvrtc_cache_hits_warm = v.compiled->jit_cache_hits();
  v.kernels = static_cast<int>(v.compiled->kernels().size());
  v.captured = v.compiled->device_runs();
  v.arena_bytes = v.compiled->arena_bytes();
  // Inputs rotated among copies (BenchmarkOptions::input_sets 0: enough to miss in L2).
  ASSIGN_OR_RETURN(BenchmarkResult timed, v.compiled->Benchmark(inputs, {options.warmup, options.repeats, 0}));
  v.run_ms = timed.median_ms;
  v.input_sets = timed.input_sets;
  return v;
}

nlohmann::json VariantJson(const CudaVariant& v, double bytes, double flops, double copy_gbps, double same_size_copy_us) {
  const double seconds = v.run_ms * 1e-3;
  return {{"ms", v.run_ms},
          {"tflops", flops / seconds / 1e12},
          {"gbps", bytes / seconds / 1e9},
          {"pct_of_copy", 100 * bytes / seconds / 1e9 / copy_gbps},
          {"pct_of_same_size_copy", 100 * same_size_copy_us * 1e-6 / seconds},
          {"kernels", v.kernels},
          {"cuda_graph", v.captured},
          {"compile_cold_ms", v.compile_cold_ms},
          {"compile_warm_ms", v.compile_warm_ms},
          {"nvrtc_compiles_cold", v.nvrtc_compiles_cold},
          {"nvrtc_compiles_warm", v.nvrtc_compiles_warm},
          {"nvrtc_cache_hits_cold", v.nvrtc_cache_hits_cold},
          {"nvrtc_cache_hits_warm", v.nvrtc_cache_hits_warm},
          {"arena_bytes", v.arena_bytes}};
}

// Each fused group alone: its time, share, rate and how it ran.
StatusOr<nlohmann::json> GroupsJson(CompiledModel& fused, const std::vector<Tensor>& inputs, double copy_gbps) {
  ASSIGN_OR_RETURN(std::vector<double> times, fused.GroupTimesUs(inputs));
  double total = 0;
  for (double t : times) total += t;
  nlohmann::json groups = nlohmann::json::array();
  for (const KernelSummary& k : fused.kernels()) {
    if (k.group < 0 || k.group >= static_cast<int>(times.size())) continue;
    const double us = times[k.group];
    nlohmann::json row = {{"group", k.group},         {"kind", k.kind},     {"mode", k.mode},
                          {"strategy", k.strategy},   {"ops", k.num_nodes}, {"us", us},
                          {"share", total > 0 ? us / total : 0}, {"gflop", k.flops / 1e9}, {"mbytes", k.bytes / 1e6}};
    if (us > 0) {
      row["tflops"] = k.flops / (us * 1e-6) / 1e12;
      row["pct_of_copy"] = 100 * k.bytes / (us * 1e-6) / 1e9 / copy_gbps;
    }
    groups.push_back(std::move(row));
  }
  return groups;
}

void PrintText(const nlohmann::json& j) {
  fmt::print("model: {}  (cuda, {}{}; median of {} runs after {} warm-up, inputs rotated among {} copies)\n",
             j["model"].get<std::string>(), j["device"].get<std::string>(), j["tuned"].get<bool>() ? ", fused kernels tuned" : "",
             j["repeats"].get<int>(), j["warmup"].get<int>(), j["input_sets"].get<int>());
  fmt::print("graph inputs + outputs: {:.1f} MiB, {:.3g} GFLOP; device copy rate {:.0f} GB/s; a copy moving as many bytes: {:.1f} us\n",
             j["bytes"].get<double>() / (1 << 20), j["flops"].get<double>() / 1e9, j["copy_gbps"].get<double>(),
             j["same_size_copy_us"].get<double>());
  fmt::print("{:<8} {:>7} {:>6} {:>11} {:>8} {:>7} {:>7} {:>11} {:>11}\n", "", "kernels", "graph", "time us", "TF/s", "% copy", "% same",
             "cold ms", "warm ms");
  for (const char* name : {"fused", "unfused"}) {
    const nlohmann::json& v = j[name];
    if (v.is_null()) continue;  // --fused-only
    fmt::print("{:<8} {:>7} {:>6} {:>11.1f} {:>8.1f} {:>6.1f}% {:>6.1f}% {:>11.1f} {:>11.1f}\n", name, v["kernels"].get<int>(),
               v["cuda_graph"].get<bool>() ? "yes" : "no", v["ms"].get<double>() * 1000, v["tflops"].get<double>(),
               v["pct_of_copy"].get<double>(), v["pct_of_same_size_copy"].get<double>(), v["compile_cold_ms"].get<double>(),
               v["compile_warm_ms"].get<double>());
  }
  if (!j["speedup"].is_null()) fmt::print("speedup (unfused time / fused time): {:.2f}x\n", j["speedup"].get<double>());
  fmt::print("fused groups one by one (device events around each; their sum exceeds the graph's time by launch gaps):\n");
  fmt::print("  {:>5} {:<14} {:>9} {:>6} {:>7} {:>7}  {}\n", "group", "kind", "us", "share", "TF/s", "% copy", "how");
  for (const nlohmann::json& g : j["groups"]) {
    std::string tflops = g.contains("tflops") && g["gflop"].get<double>() > 0.001 ? fmt::format("{:.0f}", g["tflops"].get<double>()) : "-";
    std::string copy = g.contains("pct_of_copy") ? fmt::format("{:.0f}%", g["pct_of_copy"].get<double>()) : "-";
    fmt::print("  {:>5} {:<14} {:>9.1f} {:>5.1f}% {:>7} {:>7}  {}: {}\n", g["group"].get<int>(), g["kind"].get<std::string>(),
               g["us"].get<double>(), 100 * g["share"].get<double>(), tflops, copy, g["mode"].get<std::string>(),
               g["strategy"].get<std::string>());
  }
}

}  // namespace

Status BenchCuda(const BenchOptions& options) {
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModelWithShapes(options.model, options.shape));
  ASSIGN_OR_RETURN(Graph passed, CompiledModel::RunPasses(imported.graph, GpuModelOptions(options, true, "", false)));
  StatusOr<GpuInfo> device = DescribeGpu(options.device);
  if (!device.ok()) return NotFound("--backend cuda needs a GPU and its driver: " + device.status().message());
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeRandomInputs(passed, options.seed));
  double input_bytes = 0;
  for (const Tensor& t : inputs) input_bytes += static_cast<double>(t.num_bytes());
  ASSIGN_OR_RETURN(double copy_bytes_per_s, MeasureGpuCopyBandwidth(options.device));
  const double copy_gbps = copy_bytes_per_s / 1e9;
  ASSIGN_OR_RETURN(CudaVariant fused, BenchVariant(passed, true, inputs, options));
  std::optional<CudaVariant> unfused;
  if (!options.fused_only) {
    ASSIGN_OR_RETURN(unfused, BenchVariant(passed, false, inputs, options));
  }
  const double flops = fused.compiled->flops();
  const int input_sets = fused.input_sets;
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, fused.compiled->Run(inputs));
  double bytes = input_bytes;
  for (const Tensor& t : outputs) bytes += static_cast<double>(t.num_bytes());

  ASSIGN_OR_RETURN(double same_size_copy_us, MeasureGpuCopyMicroseconds(options.device, bytes, std::max(options.repeats, 10)));

  nlohmann::json j = {{"model", options.model}, {"backend", "cuda"}, {"device", device->name}, {"tuned", options.tune},
                      {"repeats", options.repeats}, {"warmup", options.warmup}, {"input_sets", input_sets}, {"bytes", bytes},
                      {"flops", flops}, {"copy_gbps", copy_gbps}, {"same_size_copy_us", same_size_copy_us}};
  j["fused"] = VariantJson(fused, bytes, flops, copy_gbps, same_size_copy_us);
  j["unfused"] = unfused ? VariantJson(*unfused, bytes, flops, copy_gbps, same_size_copy_us) : nlohmann::json();
  j["speedup"] = unfused ? nlohmann::json(unfused->run_ms / fused.run_ms) : nlohmann::json();
  ASSIGN_OR_RETURN(j["groups"], GroupsJson(*fused.compiled, inputs, copy_gbps));
  if (options.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    PrintText(j);
  }
  return Status::Ok();
}

}  // namespace tilefuse::cli

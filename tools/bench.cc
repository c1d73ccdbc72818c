// `tilefuse bench MODEL`: fused vs unfused on the CPU (the GPU: bench_cuda.cc), on random inputs. Whole-graph
// wall time (warm-up runs, then the median of repeats), the bandwidth that time implies
// for the graph's inputs and outputs against the host's measured copy bandwidth,
// GFLOP/s, compile time cold (empty cache) and warm (cache hit), and peak intermediate
// memory of the two plans. Run() takes each graph output from the host buffer pool
// (support/host_buffer_pool.h: a buffer freed by the previous run, pages already
// mapped), so in a loop it costs microseconds; the time is still measured apart.
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "cli_common.h"
#include "commands.h"
#include "cuda_path_options.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse::cli {
namespace {

struct Variant {  // fused or unfused
  double run_ms = 0;
  double compile_cold_ms = 0, compile_warm_ms = 0;
  int64_t jit_compiles_cold = 0, jit_compiles_warm = 0;
  int kernels = 0;
  int64_t peak_intermediate_bytes = 0;
};

// What a timed Run() spends outside the kernels on a graph's outputs: a zero-filled
// tensor each, freed again when the caller drops the result; median of 5.
double MeasureOutputAllocationMs(const std::vector<Tensor>& outputs) {
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    {
      std::vector<Tensor> fresh;
      for (const Tensor& t : outputs) fresh.push_back(Tensor::Uninitialized(t.dtype(), t.shape()));  // as Run() does
    }
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + 2, times.end());
  return times[2];
}

// The facade's options for one of bench's CPU compiles (`cache_dir`: a fresh cache or "").
ModelOptions CpuModelOptions(bool fuse, bool tune, const std::string& cache_dir) {
  ModelOptions model;
  model.backend = "cpu";
  model.fuse = fuse;
  model.tune = tune;
  model.cache_dir = cache_dir;
  return model;
}

StatusOr<Variant> BenchVariant(const Graph& passed, bool fuse, const std::vector<Tensor>& inputs,
                               const BenchOptions& options) {
  FreshCacheDir cache;
  if (cache.path().empty()) return Internal("cannot create a temporary kernel cache folder");
  Variant v;
  const ModelOptions model = CpuModelOptions(fuse, options.tune && fuse, cache.path());
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> cold, CompiledModel::FromPassedGraph(passed, model));
  v.compile_cold_ms = cold->backend_compile_ms();
  v.jit_compiles_cold = cold->jit_compiles();
  cold.reset();
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> warm, CompiledModel::FromPassedGraph(passed, model));
  v.compile_warm_ms = warm->backend_compile_ms();
  v.jit_compiles_warm = warm->jit_compiles();
  v.kernels = static_cast<int>(warm->kernels().size());
  ASSIGN_OR_RETURN(v.peak_intermediate_bytes, warm->PlannedIntermediateBytes());
  ASSIGN_OR_RETURN(BenchmarkResult timed, warm->Benchmark(inputs, {options.warmup, options.repeats, 1}));
  v.run_ms = timed.median_ms;
  return v;
}

nlohmann::json VariantJson(const Variant& v, double bytes, double flops) {
  return {{"ms", v.run_ms},
          {"gbps", bytes / (v.run_ms * 1e-3) / 1e9},
          {"gflops", flops / (v.run_ms * 1e-3) / 1e9},
          {"kernels", v.kernels},
          {"compile_cold_ms", v.compile_cold_ms},
          {"compile_warm_ms", v.compile_warm_ms},
          {"jit_compiles_cold", v.jit_compiles_cold},
          {"jit_compiles_warm", v.jit_compiles_warm},
          {"peak_intermediate_bytes", v.peak_intermediate_bytes}};
}

void PrintText(const nlohmann::json& j) {
  fmt::print("model: {}  (cpu{}; median of {} runs after {} warm-up)\n", j["model"].get<std::string>(),
             j["tuned"].get<bool>() ? ", fused kernels tuned" : "",
             j["repeats"].get<int>(), j["warmup"].get<int>());
  fmt::print("graph inputs + outputs: {:.1f} MiB, {:.3g} GFLOP; host copy bandwidth {:.1f} GB/s\n",
             j["bytes"].get<double>() / (1 << 20), j["flops"].get<double>() / 1e9, j["copy_gbps"].get<double>());
  fmt::print("{:<8} {:>7} {:>10} {:>8} {:>7} {:>9} {:>11} {:>11} {:>12}\n", "", "kernels", "time ms", "GB/s",
             "% copy", "GFLOP/s", "cold ms", "warm ms", "peak interm.");
  for (const char* name : {"fused", "unfused"}) {
    const nlohmann::json& v = j[name];
    if (v.is_null()) continue;  // --fused-only
    fmt::print("{:<8} {:>7} {:>10.3f} {:>8.2f} {:>6.1f}% {:>9.2f} {:>11.1f} {:>11.1f} {:>8.2f} MiB\n", name,
               v["kernels"].get<int>(), v["ms"].get<double>(), v["gbps"].get<double>(),
               100 * v["gbps"].get<double>() / j["copy_gbps"].get<double>(), v["gflops"].get<double>(),
               v["compile_cold_ms"].get<double>(), v["compile_warm_ms"].get<double>(),
               v["peak_intermediate_bytes"].get<double>() / (1 << 20));
  }
  if (!j["speedup"].is_null()) fmt::print("speedup (unfused time / fused time): {:.2f}x\n", j["speedup"].get<double>());
  fmt::print("of each run, {:.3f} ms allocate and free the graph outputs (outside the kernels)\n",
             j["output_alloc_ms"].get<double>());
  fmt::print("load average (1 min) before timing: {:.2f}\n", j["load_before"].get<double>());
}

Status BenchCpu(const BenchOptions& options) {
  double load_before = LoadAverage();
  ASSIGN_OR_RETURN(ImportedModel imported, LoadModelWithShapes(options.model, options.shape));
  ASSIGN_OR_RETURN(Graph passed, CompiledModel::RunPasses(imported.graph, CpuModelOptions(true, false, "")));
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeRandomInputs(passed, options.seed));
  // Groups on the reference interpreter: warned of (or, with --strict, refused) before any timing.
  ModelOptions checked = CpuModelOptions(true, false, "");
  checked.strict = options.strict;
  ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> compiled, CompiledModel::FromPassedGraph(passed, checked));
  for (const std::string& warning : compiled->warnings()) fmt::print(stderr, "warning: {}\n", warning);
  ASSIGN_OR_RETURN(Variant fused, BenchVariant(passed, true, inputs, options));
  std::optional<Variant> unfused;
  if (!options.fused_only) {
    ASSIGN_OR_RETURN(unfused, BenchVariant(passed, false, inputs, options));
  }
  const double flops = compiled->flops();
  double bytes = 0;
  for (const Tensor& t : inputs) bytes += t.num_bytes();
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, compiled->Run(inputs));
  for (const Tensor& t : outputs) bytes += t.num_bytes();

  nlohmann::json j = {{"model", options.model}, {"backend", "cpu"},  {"tuned", options.tune}, {"repeats", options.repeats},
                      {"warmup", options.warmup}, {"bytes", bytes}, {"flops", flops},
                      {"copy_gbps", MeasureHostCopyBandwidth(int64_t{options.copy_mib} << 20) / 1e9}, {"load_before", load_before},
                      {"output_alloc_ms", MeasureOutputAllocationMs(outputs)}};
  j["fused"] = VariantJson(fused, bytes, flops);
  j["unfused"] = unfused ? VariantJson(*unfused, bytes, flops) : nlohmann::json();
  j["speedup"] = unfused ? nlohmann::json(unfused->run_ms / fused.run_ms) : nlohmann::json();
  j["fused_pct_of_copy"] = 100 * j["fused"]["gbps"].get<double>() / j["copy_gbps"].get<double>();
  if (options.json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    PrintText(j);
  }
  return Status::Ok();
}

}  // namespace

void AddBenchCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand("bench", "Time a model fused vs unfused on the CPU or the GPU");
  bench->add_option("MODEL", options->model, "An .onnx file, an .onnxtxt file, or an ONNX backend-test folder")
      ->required();
  bench->add_option("--backend", options->backend,
                    "cpu: generated kernels on the host; cuda: on the GPU (whole CUDA graph, device events)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  bench->add_option("--repeats", options->repeats, "Timed runs (the median is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench->add_option("--warmup", options->warmup, "Untimed runs first")->check(CLI::NonNegativeNumber)->capture_default_str();
  bench->add_option("--copy-mib", options->copy_mib, "cpu: size of the buffer whose memcpy measures the copy bandwidth")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench->add_option("--seed", options->seed, "Seed of the random inputs")->capture_default_str();
  bench->add_option("--shape", options->shape, kShapeFlagHelp);
  bench->add_flag("--json", options->json, "Print the results as JSON");
  bench->add_flag("--fused-only", options->fused_only,
                  "Time the fused model alone: the unfused variant is neither compiled nor run (a large model's unfused plan "
                  "takes long to compile); unfused and speedup are null in the JSON");
  AddCudaPathOptions(*bench, options->cuda_paths);
  bench->add_flag("--strict", options->strict,
                  "A group that would run on the reference interpreter (cpu) or on the host (cuda), no generated\n"
                  "kernel for an op, is an error (exit 2), not a warning");
  bench->add_flag("--tune", options->tune,
                  "Tune the fused kernels first (tilefuse tune; the tuning cache is the default one, so once per model)");
  AddDeviceOption(*bench, options->device);
  bench->footer(
      "GB/s counts each graph input and output once (read or written); % copy compares it with a memcpy\n"
      "of a buffer larger than the last-level cache (read + write bytes). GFLOP/s uses the planner's\n"
      "flop counts. Compile cold uses an empty kernel cache, warm the same cache again.\n\n"
      "Run() takes each graph output from a pool of freed host buffers (no zero fill; the previous run's\n"
      "output, its pages already mapped); output_alloc_ms is that share of each run's time, measured\n"
      "apart (build/tilefuse_bench_cpu_kernels times the kernels alone).\n"
      "load_before is the 1-minute load average when the bench started.\n\n"
      "JSON: {model, backend, repeats, warmup, bytes, flops, copy_gbps, speedup, fused_pct_of_copy,\n"
      "       load_before, output_alloc_ms,\n"
      "       fused|unfused: {ms, gbps, gflops, kernels, compile_cold_ms, compile_warm_ms,\n"
      "                       jit_compiles_cold, jit_compiles_warm, peak_intermediate_bytes}}\n\n"
      "Examples:\n"
      "  tilefuse bench examples/softmax_manual.onnxtxt\n"
      "  tilefuse bench bench/cpu_cases/softmax_manual.onnxtxt   # the same at a size beyond the LLC\n"
      "  tilefuse bench tests/models/gpt2_2layer --repeats 20 --json\n\n"
      "--backend cuda times each plan as a whole (replayed as a CUDA graph where it could be captured)\n"
      "with device events, inputs rotated among copies so repeats do not find them in L2; TF/s from the\n"
      "planner's flop count, % copy against the device-to-device copy rate (a 1 GiB copy's), % same\n"
      "against one copy moving as many bytes as the graph (half read, half written: a short graph can\n"
      "reach the large copy's rate no more than such a copy can); compile cold/warm as on the\n"
      "CPU (nvrtc_compiles for jit_compiles: NVRTC runs, one per distinct kernel; nvrtc_cache_hits: the\n"
      "kernels found in the cache); then every fused group alone: its time, share, TF/s and\n"
      "% copy from its own flops and bytes, and how it ran (template, library, generated).\n"
      "JSON (cuda): {model, backend, device, tuned, repeats, warmup, input_sets, bytes, flops, copy_gbps,\n"
      "       same_size_copy_us, speedup, fused|unfused: {ms, tflops, gbps, pct_of_copy,\n"
      "       pct_of_same_size_copy, kernels, cuda_graph, compile_cold_ms,\n"
      "       compile_warm_ms, nvrtc_compiles_cold, nvrtc_compiles_warm, nvrtc_cache_hits_cold,\n"
      "       nvrtc_cache_hits_warm, arena_bytes},\n"
      "       groups: [{group, kind, mode, strategy, ops, us, share, gflop, mbytes, tflops, pct_of_copy}]}\n"
      "  tilefuse bench model.onnx --backend cuda\n"
      "Exit codes: 0 ok, 2 bad input, unsupported model or usage.");
  bench->callback([options, &exit_code] {
    ModelOptions asked;
    asked.backend = options->backend;
    asked.device = options->device;
    Status status = CheckModelOptions(asked);
    if (status.ok()) status = options->backend == "cuda" ? BenchCuda(*options) : BenchCpu(*options);
    if (!status.ok()) PrintError(status);
    exit_code = status.ok() ? kExitOk : kExitBadInput;
  });
}

}  // namespace tilefuse::cli

// `tilefuse fuzz --seed N --count K`: differential fuzzing from the command line. K random
// graphs from seed N are compiled for the CPU and compared with the f64 reference by the
// unit test's judge (testing/differential_fuzz.h); each failure prints the command that
// replays it alone.
//
// A developer's tool on library internals, not the facade (tilefuse/tilefuse.h), by design:
// the differential fuzzer generates IR graphs (testing/differential_fuzz.h), compiles them on
// each backend's executable directly (with deliberate lowering faults to test the judge), and
// judges them against the reference interpreter with its conditioning probes. Its CUDA --emit
// goes through the facade's BuildForCudaArch (compile_cuda.h), as `compile --backend cuda` does.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_driver.h"
#include "cli_common.h"
#include "commands.h"
#include "compile_cuda.h"
#include "driver/driver.h"
#include "ir/printer.h"
#include "backend/cpu/cpu_executable.h"
#include "api/backend_setup.h"
#include "support/file_util.h"
#include "testing/differential_fuzz.h"

namespace tilefuse::cli {
namespace {

struct FuzzCommandOptions {
  uint64_t seed = 0;
  int count = 100;
  std::string backend = "cpu";
  bool no_fusion = false;
  bool json = false;
  double max_ill_conditioned = 0.01;  // share of the graphs
  std::string emit_dir;
  std::string inject_fault;  // an op name: tests the judge (codegen/lowering_fault.h)
  bool measure_all = false;
  bool no_layer_patterns = false;
  bool symbolic = false;
};

// ill-conditioned graphs allowed in a run: a share of the count, at least one (a replay
// of one ill-conditioned seed is not a failure).
int IllConditionedAllowed(const FuzzCommandOptions& options) {
  return std::max(1, static_cast<int>(std::ceil(options.max_ill_conditioned * options.count)));
}

std::string ReplayCommand(uint64_t seed, const FuzzCommandOptions& options) {
  return fmt::format("tilefuse fuzz --seed {} --count 1{}{}{}{}{}", seed, options.symbolic ? " --symbolic" : "",
                     options.no_fusion ? " --no-fusion" : "",
                     options.backend == "cpu" ? "" : " --backend " + options.backend,
                     options.no_layer_patterns ? " --no-layer-patterns" : "",
                     options.inject_fault.empty() ? "" : " --inject-fault " + options.inject_fault);
}

bool Failed(const FuzzCase& c) { return c.verdict == FuzzVerdict::kMismatch || c.verdict == FuzzVerdict::kError; }
bool Reported(const FuzzCase& c) { return c.verdict != FuzzVerdict::kMatch || c.sensitivity_ratio > 1; }

// The run fails on any mismatch or error, and when more graphs than allowed were
// ill-conditioned (a judge that explained everything away would test nothing).
bool RunFailed(const FuzzReport& report, const FuzzCommandOptions& options) {
  for (const FuzzCase& c : report.cases)
    if (Failed(c)) return true;
  return report.Count(FuzzVerdict::kIllConditioned) > IllConditionedAllowed(options);
}

void PrintText(const FuzzReport& report, const FuzzCommandOptions& options, double seconds) {
  for (const FuzzCase& c : report.cases) {
    if (!Reported(c)) continue;
    fmt::print("{}: seed {}: {}  (replay: {})\n", FuzzVerdictName(c.verdict), c.seed, c.detail, ReplayCommand(c.seed, options));
  }
  fmt::print("fuzz: {} random graphs{} (seeds {}..{}) on the {} backend, {}, {:.0f} s: {} match, {} ill-conditioned "
             "(at most {} allowed), {} mismatch, {} error\n",
             options.count, options.symbolic ? fmt::format(" over symbolic dims, each at {} bindings", kSymbolicBindings) : "",
             options.seed, options.seed + options.count - (options.count > 0 ? 1 : 0), options.backend,
             options.no_fusion ? "unfused" : "fused", seconds, report.Count(FuzzVerdict::kMatch),
             report.Count(FuzzVerdict::kIllConditioned), IllConditionedAllowed(options), report.Count(FuzzVerdict::kMismatch),
             report.Count(FuzzVerdict::kError));
}

void PrintJson(const FuzzReport& report, const FuzzCommandOptions& options) {
  nlohmann::json j = {{"first_seed", options.seed},
                      {"count", options.count},
                      {"backend", options.backend},
                      {"fused", !options.no_fusion},
                      {"symbolic", options.symbolic},
                      {"match", report.Count(FuzzVerdict::kMatch)},
                      {"ill_conditioned", report.Count(FuzzVerdict::kIllConditioned)},
                      {"ill_conditioned_allowed", IllConditionedAllowed(options)},
                      {"mismatch", report.Count(FuzzVerdict::kMismatch)},
                      {"error", report.Count(FuzzVerdict::kError)}};
  // Mismatches and errors fail the run; ill-conditioned graphs (and, with --measure-all,
  // matches whose reference moved beyond the tolerance) come with the judge's numbers.
  j["failures"] = nlohmann::json::array();
  j["ill_conditioned_cases"] = nlohmann::json::array();
  for (const FuzzCase& c : report.cases) {
    if (!Reported(c)) continue;
    j[Failed(c) ? "failures" : "ill_conditioned_cases"].push_back({{"seed", c.seed},
                                                                   {"verdict", FuzzVerdictName(c.verdict)},
                                                                   {"detail", c.detail},
                                                                   {"error_ratio", c.error_ratio},
                                                                   {"sensitivity_ratio", c.sensitivity_ratio},
                                                                   {"replay", ReplayCommand(c.seed, options)}});
  }
  std::cout << j.dump(2) << "\n";
}

// --emit: each graph as the fuzzer compiles it (graph.txt), its CPU kernels (cpu.cc) and
// its CUDA kernels for sm_90a (cuda/, compiled by NVRTC: no GPU needed).
Status EmitGraphs(const DifferentialFuzzOptions& fuzz, const std::string& dir) {
  for (int i = 0; i < fuzz.count; ++i) {
    uint64_t seed = fuzz.first_seed + i;
    ASSIGN_OR_RETURN(Graph graph, GenerateFuzzGraph(fuzz, seed));
    std::string at = fmt::format("{}/seed{}", dir, seed);
    std::error_code ec;
    std::filesystem::create_directories(at, ec);
    if (ec) return InvalidArgument(fmt::format("cannot create '{}': {}", at, ec.message()));
    RETURN_IF_ERROR(WriteFileAtomically(at + "/graph.txt", PrintGraph(graph)));
    CpuCompileOptions cpu;
    cpu.fuse = fuzz.fuse;
    cpu.fault = fuzz.fault;
    ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> compiled, CompileForCpu(graph, cpu));
    std::string sources;
    for (const KernelInfo& k : compiled->kernels())
      sources += fmt::format("// {} ({}){}\n{}\n", k.name, GroupKindName(k.kind), k.generated ? "" : ": reference kernels, " + k.why_not,
                             k.source);
    RETURN_IF_ERROR(WriteFileAtomically(at + "/cpu.cc", sources));
    if (fuzz.backend != "cuda") continue;
    CudaCompileRequest request;
    request.model = fmt::format("fuzz seed {}", seed);
    request.emit_dir = at + "/cuda";
    request.fuse = fuzz.fuse;
    RETURN_IF_ERROR(CompileForCudaCommand(request, graph));
  }
  return Status::Ok();
}

int RunFuzz(const FuzzCommandOptions& options) {
  DifferentialFuzzOptions fuzz;
  fuzz.first_seed = options.seed;
  fuzz.count = options.count;
  fuzz.fuse = !options.no_fusion;
  fuzz.backend = options.backend;
  fuzz.measure_all = options.measure_all;
  fuzz.layer_patterns = !options.no_layer_patterns;
  fuzz.symbolic = options.symbolic;
  fuzz.channels_last = options.backend == "cuda" && CudaPassOptions().channels_last;
  if (!options.inject_fault.empty()) {
    const OpInfo* op = FindOpByName(options.inject_fault);
    if (!op) {
      PrintError(InvalidArgument(fmt::format("--inject-fault: no op named '{}'", options.inject_fault)));
      return kExitBadInput;
    }
    fuzz.fault.op = op->code;
  }
  if (!options.emit_dir.empty()) {
    Status emitted = EmitGraphs(fuzz, options.emit_dir);
    if (!emitted.ok()) {
      PrintError(emitted);
      return kExitBadInput;
    }
    fmt::print("fuzz: graphs, CPU kernels{} of seeds {}..{} written to {}\n", options.backend == "cuda" ? " and CUDA kernels" : "",
               options.seed, options.seed + options.count - 1, options.emit_dir);
    return kExitOk;
  }
  if (options.backend == "cuda")
    if (StatusOr<CudaDevice*> device = CudaDevice::Get(); !device.ok()) {
      PrintError(device.status());
      return kExitBadInput;
    }
  auto start = std::chrono::steady_clock::now();
  StatusOr<FuzzReport> report = RunDifferentialFuzz(fuzz);
  if (!report.ok()) {
    PrintError(report.status());
    return kExitBadInput;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.json) {
    PrintJson(*report, options);
  } else {
    PrintText(*report, options, seconds);
  }
  return RunFailed(*report, options) ? kExitMismatch : kExitOk;
}

}  // namespace

void AddFuzzCommand(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<FuzzCommandOptions>();
  CLI::App* fuzz = app.add_subcommand(
      "fuzz", "Differential fuzzing: random graphs compiled for the CPU vs the f64 reference interpreter");
  fuzz->add_option("--seed", options->seed, "Seed of the first graph; graph i uses seed + i")->capture_default_str();
  fuzz->add_option("--count", options->count, "How many graphs")->check(CLI::Range(0, 1000000))->capture_default_str();
  fuzz->add_option("--backend", options->backend, "Backend under test: cpu (generated C++) or cuda (generated CUDA, on the GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  fuzz->add_flag("--no-fusion", options->no_fusion, "Every op its own generated kernel (the unfused baseline)");
  fuzz->add_flag("--json", options->json, "Print a machine-readable JSON report on stdout");
  fuzz->add_option("--max-ill-conditioned", options->max_ill_conditioned,
                   "Largest share of graphs that may be ill-conditioned (at least one is allowed)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  fuzz->add_option("--emit", options->emit_dir,
                   "Write each graph (graph.txt), its CPU kernels (cpu.cc) and, with --backend cuda, its CUDA kernels "
                   "for sm_90a (no GPU needed) under DIR/seedN instead of fuzzing");
  fuzz->add_flag("--no-layer-patterns", options->no_layer_patterns,
                 "Without the GEMM-epilogue, multi-head attention and convolution patterns: each seed gives the "
                 "graph it gave before they were added (seeds reported before 2026-11-24)");
  fuzz->add_flag("--symbolic", options->symbolic,
                 "Graphs over symbolic dims (batch, seq, past: src/testing/symbolic_random_graph.h), each compiled "
                 "with its sizes over the symbols and checked at 3 bindings (seq 1 ... 40); --emit writes the first");
  fuzz->add_flag("--measure-all", options->measure_all,
                 "Measure every graph's sensitivity (the probes), not only failing graphs'; matching graphs whose "
                 "reference moves beyond the tolerance are listed as matches with the measurement");
  fuzz->add_option("--inject-fault", options->inject_fault,
                   "Testing the judge: every result of this op (e.g. exp) in generated loop kernels is off by 1e-3 "
                   "(relative); the run must then fail");
  fuzz->footer(
      "Each graph (src/testing/random_graph.h: pointwise, broadcast, view, reduction, matmul, mask and\n"
      "dropout ops, softmax/layer-norm/attention patterns, GEMM epilogues, multi-head attention and\n"
      "convolution blocks, f32 and f64) is compiled with kernel outputs poisoned and run on random\n"
      "inputs; the f64 reference interpreter runs the same graph. Outputs are compared norm-wise (f32\n"
      "graphs: rtol 1e-4, atol 2e-5 of the tensor's largest magnitude; f64-only graphs: 1e-9, 1e-11).\n"
      "No mismatch is tolerated: a graph outside that is measured by running the reference as other\n"
      "correct implementations may round (inputs moved by a few ulps of the compute precision; every\n"
      "rounded intermediate moved by 1-2 ulps of its dtype; sums and matmuls accumulated in their dtype\n"
      "in order). Only when those alone leave the tolerance on each failing output, and the kernel is\n"
      "within 10x of them, is the graph ill-conditioned; it is printed with both numbers. Each mismatch,\n"
      "error or ill-conditioned graph prints its seed and the command that replays it alone; a summary\n"
      "line ends the report.\n\n"
      "Examples:\n"
      "  tilefuse fuzz --seed 1 --count 20\n"
      "  tilefuse fuzz --seed 81 --count 1 --json\n"
      "  tilefuse fuzz --seed 10000 --count 150 --no-fusion\n"
      "  tilefuse fuzz --seed 0 --count 50 --symbolic\n"
      "  tilefuse fuzz --seed 100011 --count 1 --no-layer-patterns --backend cuda --emit out/\n"
      "Exit codes: 0 every graph matched (a few ill-conditioned allowed), 1 a mismatch or error, or more\n"
      "ill-conditioned graphs than --max-ill-conditioned allows, 2 bad usage.");
  fuzz->callback([options, &exit_code] { exit_code = RunFuzz(*options); });
}

}  // namespace tilefuse::cli

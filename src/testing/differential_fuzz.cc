#include "driver/driver.h"
#include "testing/differential_fuzz.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <fmt/format.h>
#include <memory>

#include "reference/conditioning.h"
#include "reference/interpreter.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"
#include "backend/cuda/cuda_executable.h"
#include "testing/tensor_compare.h"
#include "testing/random_graph.h"
#include "testing/symbolic_random_graph.h"

namespace tilefuse {

namespace {

// Norm-wise bounds that follow the least precise float dtype anywhere in the graph: an
// f64 output computed from f32 values carries f32 rounding (libm's expf and exp differ
// by an ulp).
Tolerance ToleranceFor(const Tensor& expected, DType least_precise) {
  if (!IsFloat(expected.dtype())) return {0, 0};
  if (least_precise == DType::kF64) return {1e-9, 1e-11};
  return {1e-4, 2e-5};
}

DType LeastPreciseDType(const Graph& graph) {
  DType least = DType::kF64;
  for (const Node& n : graph.nodes())
    if (IsFloat(n.dtype) && DTypeSize(n.dtype) < DTypeSize(least)) least = n.dtype;
  return least;
}

std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, seed * 7 + i));
  }
  return inputs;
}

// Each output's error in units of its tolerance (<= 1 passes), and the worst output.
struct Deviation {
  std::vector<double> ratios;        // per output
  std::vector<std::string> reasons;  // per output: why it fails ("" when it passes)
  size_t worst = 0;
  bool pass = true;
  double ratio() const { return ratios.empty() ? 0 : ratios[worst]; }
};

Deviation Deviate(const std::vector<Tensor>& got, const std::vector<Tensor>& expected, DType least_precise) {
  Deviation d;
  for (size_t o = 0; o < expected.size(); ++o) {
    Comparison c = CompareNormwise(got[o], expected[o], ToleranceFor(expected[o], least_precise));
    d.ratios.push_back(RatioToTolerance(c));
    d.reasons.push_back(c.reason);
    d.pass = d.pass && c.pass;
    if (d.ratios[o] > d.ratios[d.worst]) d.worst = o;
  }
  return d;
}

}  // namespace

FuzzCase JudgeGraph(const Graph& graph, uint64_t seed, const FuzzRunFunction& run, const DifferentialFuzzOptions& options) {
  FuzzCase c{seed, FuzzVerdict::kError, ""};
  std::vector<Tensor> inputs = RandomInputs(graph, seed);
  auto expected = RunReference(graph, inputs);
  auto actual = run(inputs);
  for (const Status* s : {&expected.status(), &actual.status()}) {
    if (s->ok()) continue;
    c.detail = s->ToString();
    return c;
  }
  DType least_precise = LeastPreciseDType(graph);
  Deviation kernel = Deviate(*actual, *expected, least_precise);
  c.error_ratio = kernel.ratio();
  bool pass = kernel.pass;
  if (pass && !options.measure_all) {
    c.verdict = FuzzVerdict::kMatch;
    return c;
  }
  // How far legitimate computations of the graph land from the reference (reference/conditioning.h).
  StatusOr<Sensitivity> measured =
      MeasureSensitivity(graph, inputs, *expected, ComputePrecision(graph),
                         [&](size_t, const Tensor& got, const Tensor& e) {
                           return RatioToTolerance(CompareNormwise(got, e, ToleranceFor(e, least_precise)));
                         });
  if (!measured.ok()) {
    c.detail = measured.status().ToString();
    return c;
  }
  const Sensitivity& sensitivity = *measured;
  // Ill-conditioned for this tolerance when, for every output the kernel fails, a
  // legitimate computation already fails it too and the kernel is no further off than
  // such computations go (within explain_factor, since a few random probes only sample
  // the worst legitimate rounding). An output is judged against its own probes: an
  // ill-conditioned output does not excuse a well-conditioned one.
  size_t shown = kernel.worst;
  bool explained = true;
  for (size_t o = 0; o < kernel.ratios.size(); ++o) {
    if (kernel.ratios[o] <= 1) continue;
    bool explains = ExplainedByConditioning(kernel.ratios[o], sensitivity.ratios[o], options.explain_factor);
    if (!explains && explained) shown = o;
    explained = explained && explains;
  }
  if (pass) shown = std::max_element(sensitivity.ratios.begin(), sensitivity.ratios.end()) - sensitivity.ratios.begin();
  c.sensitivity_ratio = sensitivity.ratios[shown];
  c.error_ratio = kernel.ratios[shown];
  c.verdict = pass ? FuzzVerdict::kMatch : explained ? FuzzVerdict::kIllConditioned : FuzzVerdict::kMismatch;
  std::string why = kernel.reasons[shown].empty() ? "" : " (" + kernel.reasons[shown] + ")";
  c.detail = fmt::format("output {}: kernel off by {:.3g}x the tolerance{}; the reference itself moves by up to {:.3g}x the "
                         "tolerance ({})",
                         shown, kernel.ratios[shown], why, sensitivity.ratios[shown], sensitivity.summaries[shown]);
  return c;
}

namespace {

// One compiler run for the batch; when it fails, each graph alone, so the error names
// the graph that caused it.
std::vector<StatusOr<std::unique_ptr<CpuExecutable>>> CompileEach(const std::vector<Graph>& graphs,
                                                                  const CpuCompileOptions& options) {
  std::vector<StatusOr<std::unique_ptr<CpuExecutable>>> compiled;
  auto batch = CompileBatchForCpu(graphs, options);
  if (batch.ok()) {
    for (auto& g : *batch) compiled.push_back(std::move(g));
    return compiled;
  }
  for (const Graph& g : graphs) compiled.push_back(CompileForCpu(g, options));
  return compiled;
}

// Each of `graphs` (with its seed) compiled on the options' backend and judged.
std::vector<FuzzCase> JudgeEach(const DifferentialFuzzOptions& options, const std::vector<Graph>& graphs,
                                const std::vector<uint64_t>& seeds) {
  std::vector<FuzzCase> cases;
  for (uint64_t seed : seeds) cases.push_back({seed, FuzzVerdict::kError, ""});
  if (options.backend == "cuda") {
    CudaCompileOptions gpu;
    gpu.fuse = options.fuse;
    gpu.poison_outputs = true;
    gpu.cache_dir = options.cache_dir;
    gpu.fault = options.fault;
    for (size_t g = 0; g < graphs.size(); ++g) {
      auto compiled = CompileForCuda(graphs[g], gpu);
      if (!compiled.ok()) {
        cases[g].detail = compiled.status().ToString();
        continue;
      }
      cases[g] = JudgeGraph(graphs[g], seeds[g], [&](const std::vector<Tensor>& in) { return (*compiled)->Run(in); }, options);
    }
    return cases;
  }
  CpuCompileOptions compile;
  compile.fuse = options.fuse;
  compile.poison_outputs = true;
  compile.cache_dir = options.cache_dir;
  compile.fault = options.fault;
  auto compiled = CompileEach(graphs, compile);
  for (size_t g = 0; g < graphs.size(); ++g) {
    if (!compiled[g].ok()) {
      cases[g].detail = compiled[g].status().ToString();
      continue;
    }
    cases[g] = JudgeGraph(graphs[g], seeds[g], [&](const std::vector<Tensor>& in) { return (*compiled[g])->Run(in); }, options);
  }
  return cases;
}

int Severity(FuzzVerdict verdict) {
  switch (verdict) {
    case FuzzVerdict::kMatch: return 0;
    case FuzzVerdict::kIllConditioned: return 1;
    case FuzzVerdict::kMismatch: return 2;
    case FuzzVerdict::kError: return 3;
  }
  return 3;
}

// The graphs of seeds first_seed ... at one binding index (symbolic fuzzing) or their only
// one, judged; `report` gets a case per seed (for symbolic graphs, the worst binding's, its
// detail naming the binding).
void FuzzBatch(const DifferentialFuzzOptions& options, uint64_t first_seed, int count, FuzzReport& report) {
  size_t first_case = report.cases.size();
  for (int i = 0; i < count; ++i) report.cases.push_back({first_seed + i, FuzzVerdict::kMatch, ""});
  int bindings = options.symbolic ? kSymbolicBindings : 1;
  for (int binding = 0; binding < bindings; ++binding) {
    std::vector<Graph> graphs;
    std::vector<uint64_t> seeds;
    std::vector<size_t> case_of_graph;
    for (int i = 0; i < count; ++i) {
      FuzzCase& c = report.cases[first_case + i];
      if (c.verdict == FuzzVerdict::kError) continue;  // it could not even be generated
      StatusOr<Graph> graph = GenerateFuzzGraph(options, c.seed, binding);
      if (!graph.ok()) {
        c = {c.seed, FuzzVerdict::kError, graph.status().ToString()};
        continue;
      }
      graphs.push_back(std::move(graph).value());
      seeds.push_back(c.seed);
      case_of_graph.push_back(first_case + i);
    }
    std::vector<FuzzCase> judged = JudgeEach(options, graphs, seeds);
    for (size_t g = 0; g < judged.size(); ++g) {
      FuzzCase& c = report.cases[case_of_graph[g]];
      // A later binding's verdict replaces the case only when it is no better and not a match.
      if (binding > 0 && (judged[g].verdict == FuzzVerdict::kMatch || Severity(judged[g].verdict) < Severity(c.verdict)))
        continue;
      if (options.symbolic && judged[g].verdict != FuzzVerdict::kMatch)
        judged[g].detail = fmt::format("at {}: {}", SymbolicBindingsFor(c.seed)[binding].ToString(), judged[g].detail);
      c = judged[g];
    }
  }
}

}  // namespace

StatusOr<Graph> GenerateFuzzGraph(const DifferentialFuzzOptions& options, uint64_t seed, int binding) {
  if (options.symbolic) {
    if (binding < 0 || binding >= kSymbolicBindings)
      return InvalidArgument(fmt::format("binding {} of a symbolic graph: there are {}", binding, kSymbolicBindings));
    std::vector<DType> dtypes;
    for (DType d : options.dtypes)
      if (d == DType::kF32 || d == DType::kF64) dtypes.push_back(d);
    if (dtypes.empty()) return InvalidArgument("symbolic random graphs are f32 or f64: no such dtype among the options'");
    ASSIGN_OR_RETURN(Graph graph, GenerateSymbolicGraph(seed, SymbolicBindingsFor(seed)[binding], dtypes[seed % dtypes.size()]));
    PassOptions passes;
    passes.channels_last = options.channels_last;
    return RunGraphPasses(std::move(graph), passes);
  }
  RandomGraphOptions graph_options;
  graph_options.seed = seed;
  graph_options.dtypes = options.dtypes;
  graph_options.allow_layer_patterns = options.layer_patterns;
  ASSIGN_OR_RETURN(Graph graph, GenerateRandomGraph(graph_options));
  PassOptions passes;
  passes.channels_last = options.channels_last;
  return RunGraphPasses(std::move(graph), passes);
}

int FuzzReport::Count(FuzzVerdict verdict) const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [&](const FuzzCase& c) { return c.verdict == verdict; }));
}

const char* FuzzVerdictName(FuzzVerdict verdict) {
  switch (verdict) {
    case FuzzVerdict::kMatch: return "match";
    case FuzzVerdict::kIllConditioned: return "ill-conditioned";
    case FuzzVerdict::kMismatch: return "mismatch";
    case FuzzVerdict::kError: return "error";
  }
  return "?";
}

StatusOr<FuzzReport> RunDifferentialFuzz(const DifferentialFuzzOptions& options) {
  if (options.count < 0) return InvalidArgument(fmt::format("graph count must be >= 0, got {}", options.count));
  if (options.batch_size < 1) return InvalidArgument(fmt::format("batch size must be >= 1, got {}", options.batch_size));
  FuzzReport report;
  for (int done = 0; done < options.count; done += options.batch_size)
    FuzzBatch(options, options.first_seed + done, std::min(options.batch_size, options.count - done), report);
  return report;
}

}  // namespace tilefuse

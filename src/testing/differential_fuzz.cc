#include "testing/differential_fuzz.h"

#include <algorithm>
#include <functional>
#include <fmt/format.h>
#include <memory>

#include "backend/cpu/interpreter.h"
#include "passes/pipeline.h"
#include "runtime/compiled_graph.h"
#include "runtime/gpu_compiled_graph.h"
#include "support/tensor_compare.h"
#include "testing/random_graph.h"

namespace tilefuse {

namespace {

// Norm-wise bounds that follow the least precise float dtype anywhere in the graph: an
// f64 output computed from f32 values carries f32 rounding (libm's expf and exp differ
// by an ulp).
Comparison Compare(const Tensor& actual, const Tensor& expected, DType least_precise) {
  Tolerance tol{1e-4, 2e-5};
  if (least_precise == DType::kF64) tol = {1e-9, 1e-11};
  if (!IsFloat(expected.dtype())) tol = {0, 0};
  return CompareNormwise(actual, expected, tol);
}

// The inputs nudged by a few f32 ulps, a different nudge per element (sign and size
// vary) so that rounding noise the elements share does not cancel out.
std::vector<Tensor> Nudged(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor n(t.dtype(), t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      double nudge = static_cast<double>(static_cast<int64_t>((i * 2654435761u) % 9) - 4) * 0x1p-22;
      n.SetDouble(i, t.GetDouble(i) * (1 + nudge));
    }
    out.push_back(n);
  }
  return out;
}

std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, seed * 7 + i));
  }
  return inputs;
}

using RunFunction = std::function<StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>;

FuzzCase Judge(const Graph& graph, uint64_t seed, const RunFunction& run) {
  FuzzCase c{seed, FuzzVerdict::kError, ""};
  std::vector<Tensor> inputs = RandomInputs(graph, seed);
  auto expected = RunReference(graph, inputs);
  auto nudged = RunReference(graph, Nudged(inputs));
  auto actual = run(inputs);
  for (const Status* s : {&expected.status(), &nudged.status(), &actual.status()}) {
    if (s->ok()) continue;
    c.detail = s->ToString();
    return c;
  }
  DType least_precise = DType::kF64;
  for (const Node& n : graph.nodes())
    if (n.dtype == DType::kF32) least_precise = DType::kF32;
  for (size_t o = 0; o < expected->size(); ++o) {
    if (Compare((*nudged)[o], (*expected)[o], DType::kF32).pass) continue;
    c.verdict = FuzzVerdict::kIllConditioned;
    return c;
  }
  for (size_t o = 0; o < expected->size(); ++o) {
    Comparison r = Compare((*actual)[o], (*expected)[o], least_precise);
    if (r.pass) continue;
    c.verdict = FuzzVerdict::kMismatch;
    c.detail = fmt::format("output {}: {}", o, r.reason);
    return c;
  }
  c.verdict = FuzzVerdict::kMatch;
  return c;
}

// One compiler run for the batch; when it fails, each graph alone, so the error names
// the graph that caused it.
std::vector<StatusOr<std::unique_ptr<CompiledGraph>>> CompileEach(const std::vector<Graph>& graphs,
                                                                  const CompileOptions& options) {
  std::vector<StatusOr<std::unique_ptr<CompiledGraph>>> compiled;
  auto batch = CompiledGraph::CompileBatch(graphs, options);
  if (batch.ok()) {
    for (auto& g : *batch) compiled.push_back(std::move(g));
    return compiled;
  }
  for (const Graph& g : graphs) compiled.push_back(CompiledGraph::Compile(g, options));
  return compiled;
}

void FuzzBatch(const DifferentialFuzzOptions& options, uint64_t first_seed, int count, FuzzReport& report) {
  std::vector<Graph> graphs;
  std::vector<size_t> case_of_graph;
  for (int i = 0; i < count; ++i) {
    RandomGraphOptions graph_options;
    graph_options.seed = first_seed + i;
    graph_options.dtypes = options.dtypes;
    report.cases.push_back({graph_options.seed, FuzzVerdict::kError, ""});
    StatusOr<Graph> graph = GenerateRandomGraph(graph_options);
    if (graph.ok()) graph = RunGraphPasses(std::move(graph).value(), PassOptions{});
    if (!graph.ok()) {
      report.cases.back().detail = graph.status().ToString();
      continue;
    }
    graphs.push_back(std::move(graph).value());
    case_of_graph.push_back(report.cases.size() - 1);
  }
  if (options.backend == "cuda") {
    GpuCompileOptions gpu;
    gpu.fuse = options.fuse;
    gpu.poison_outputs = true;
    gpu.cache_dir = options.cache_dir;
    for (size_t g = 0; g < graphs.size(); ++g) {
      FuzzCase& c = report.cases[case_of_graph[g]];
      auto compiled = GpuCompiledGraph::Compile(graphs[g], gpu);
      if (!compiled.ok()) {
        c.detail = compiled.status().ToString();
        continue;
      }
      c = Judge(graphs[g], c.seed, [&](const std::vector<Tensor>& in) { return (*compiled)->Run(in); });
    }
    return;
  }
  CompileOptions compile;
  compile.fuse = options.fuse;
  compile.poison_outputs = true;
  compile.cache_dir = options.cache_dir;
  auto compiled = CompileEach(graphs, compile);
  for (size_t g = 0; g < graphs.size(); ++g) {
    FuzzCase& c = report.cases[case_of_graph[g]];
    if (!compiled[g].ok()) {
      c.detail = compiled[g].status().ToString();
      continue;
    }
    c = Judge(graphs[g], c.seed, [&](const std::vector<Tensor>& in) { return (*compiled[g])->Run(in); });
  }
}

}  // namespace

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

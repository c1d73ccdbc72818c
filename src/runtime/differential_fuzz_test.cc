// Differential fuzzing (testing/differential_fuzz.h): random graphs compiled for the
// CPU, fused and unfused, must match the f64 reference interpreter. A failure names
// the seed; replay it with `tilefuse fuzz --seed N --count 1`.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "reference/interpreter.h"
#include "testing/differential_fuzz.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

DifferentialFuzzOptions Options(uint64_t first_seed, int count, bool fuse) {
  DifferentialFuzzOptions options;
  options.first_seed = first_seed;
  options.count = count;
  options.fuse = fuse;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  return options;
}

FuzzReport Fuzz(const DifferentialFuzzOptions& options) {
  auto report = RunDifferentialFuzz(options);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (!report.ok()) return {};
  for (const FuzzCase& c : report->cases) {
    EXPECT_NE(c.verdict, FuzzVerdict::kError) << "seed " << c.seed << ": " << c.detail;
    if (c.verdict != FuzzVerdict::kMatch)
      std::printf("%s: seed %llu %s %s\n", FuzzVerdictName(c.verdict), static_cast<unsigned long long>(c.seed),
                  options.fuse ? "fused" : "unfused", c.detail.c_str());
  }
  return std::move(report).value();
}

// No mismatch is tolerated. A graph is ill-conditioned only when the judge measured
// that legitimate roundings of the reference already leave the tolerance (each printed
// with its numbers); at most 1% of the graphs may be, so the judge cannot explain a
// run away.
void ExpectNoMismatch(const DifferentialFuzzOptions& options, int max_ill_conditioned) {
  FuzzReport r = Fuzz(options);
  int ill = r.Count(FuzzVerdict::kIllConditioned), mismatched = r.Count(FuzzVerdict::kMismatch);
  std::printf("%s: %d random graphs, %d ill-conditioned, %d mismatched\n", options.fuse ? "fused" : "unfused", options.count, ill,
              mismatched);
  EXPECT_EQ(mismatched, 0);
  EXPECT_LE(ill, max_ill_conditioned);
}

TEST(DifferentialFuzzTest, FusedMatchesReference) { ExpectNoMismatch(Options(0, 300, true), 3); }

TEST(DifferentialFuzzTest, UnfusedMatchesReference) { ExpectNoMismatch(Options(10000, 150, false), 2); }

// The graphs as the CUDA backend passes them (convolutions and pools channels-last, their
// transposes sunk), compiled for the CPU.
TEST(DifferentialFuzzTest, ChannelsLastMatchesReference) {
  DifferentialFuzzOptions options = Options(20000, 150, true);
  options.channels_last = true;
  ExpectNoMismatch(options, 2);
}

// Graphs over symbolic dims (batch, seq, past), each compiled with its sizes over the symbols
// and judged at three bindings (seq 1 ... 40).
TEST(DifferentialFuzzTest, SymbolicGraphsMatchReferenceAtThreeBindings) {
  DifferentialFuzzOptions options = Options(30000, 24, true);
  options.symbolic = true;
  ExpectNoMismatch(options, 1);
}

// The judge must not explain a lowering bug away: exp's results off by 1e-3 (ten times
// the tolerance's rtol) in every generated loop kernel. The same seeds match without it
// (FusedMatchesReference).
TEST(DifferentialFuzzTest, InjectedLoweringBugFailsTheRun) {
  DifferentialFuzzOptions options = Options(0, 100, true);
  options.fault.op = OpCode::kExp;
  options.fault.relative_error = 1e-3;
  FuzzReport r = Fuzz(options);
  int mismatched = r.Count(FuzzVerdict::kMismatch), ill = r.Count(FuzzVerdict::kIllConditioned);
  std::printf("exp off by 1e-3: 100 random graphs, %d mismatched, %d ill-conditioned\n", mismatched, ill);
  EXPECT_GE(mismatched, 10);
  EXPECT_LE(ill, 1);
}

// ---- the judge alone, on hand-built graphs and stand-in kernels

// A layer norm of values that differ by a few f32 ulps (1 + 1e-6 x) with a tiny epsilon:
// the rounding of the add alone decides the outputs' O(1) values.
void AddIllConditionedOutput(GraphBuilder& b, Value x) {
  Value v = b.AddScalar(b.MulScalar(x, 1e-6), 1);
  Value centred = b.Sub(v, b.Reduce(OpCode::kReduceMean, v, {1}, true));
  Value variance = b.Reduce(OpCode::kReduceMean, b.Mul(centred, centred), {1}, true);
  b.Output(b.Mul(centred, b.Unary(OpCode::kRsqrt, b.AddScalar(variance, 1e-14))), "normed");
}

void AddWellConditionedOutput(GraphBuilder& b, Value x) { b.Output(b.MulScalar(b.Unary(OpCode::kTanh, x), 2), "y"); }

// The graph of x: f32[4, 16] with the outputs `ill` and `well` ask for, in that order.
Graph ConditioningGraph(bool ill, bool well) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 16});
  if (ill) AddIllConditionedOutput(b, x);
  if (well) AddWellConditionedOutput(b, x);
  return std::move(b.Build()).value();
}

Graph IllConditionedGraph() { return ConditioningGraph(true, false); }
Graph WellConditionedGraph() { return ConditioningGraph(false, true); }
// Both in one graph: output 0 ill-conditioned, output 1 not.
Graph IllAndWellConditionedGraph() { return ConditioningGraph(true, true); }

// The reference's outputs (`only` one, or all when -1) transformed, as a stand-in for
// kernels.
FuzzRunFunction ReferenceThen(const Graph& graph, double scale, double shift, ReferenceRounding rounding = {}, int only = -1) {
  return [&graph, scale, shift, rounding, only](const std::vector<Tensor>& inputs) -> StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(std::vector<Tensor> outputs, RunReference(graph, inputs, rounding));
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (only >= 0 && static_cast<int>(o) != only) continue;
      Tensor& t = outputs[o];
      for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, t.GetDouble(i) * scale + shift);
    }
    return outputs;
  };
}

TEST(DifferentialFuzzJudgeTest, LegitimateRoundingOfAnIllConditionedGraphIsIllConditionedWithTheNumbers) {
  Graph graph = IllConditionedGraph();
  FuzzCase c = JudgeGraph(graph, 3, ReferenceThen(graph, 1, 0, ReferenceRounding{1, 12345}), Options(0, 1, true));
  EXPECT_EQ(c.verdict, FuzzVerdict::kIllConditioned) << c.detail;
  EXPECT_GT(c.error_ratio, 1);
  EXPECT_GT(c.sensitivity_ratio, 1);
  EXPECT_NE(c.detail.find("the reference itself moves by"), std::string::npos) << c.detail;
}

TEST(DifferentialFuzzJudgeTest, FarBeyondWhatRoundingExplainsIsAMismatchEvenWhenIllConditioned) {
  Graph graph = IllConditionedGraph();
  FuzzCase c = JudgeGraph(graph, 3, ReferenceThen(graph, 1, 1000), Options(0, 1, true));
  EXPECT_EQ(c.verdict, FuzzVerdict::kMismatch) << c.detail;
  EXPECT_GT(c.sensitivity_ratio, 1) << "measured, and still not enough";
}

// An ill-conditioned output does not excuse an error in a well-conditioned one.
TEST(DifferentialFuzzJudgeTest, EachOutputIsJudgedAgainstItsOwnSensitivity) {
  Graph graph = IllAndWellConditionedGraph();
  DifferentialFuzzOptions options = Options(0, 1, true);
  FuzzCase legit = JudgeGraph(graph, 3, ReferenceThen(graph, 1, 0, ReferenceRounding{1, 12345}), options);
  EXPECT_EQ(legit.verdict, FuzzVerdict::kIllConditioned) << legit.detail;
  FuzzCase off = JudgeGraph(graph, 3, ReferenceThen(graph, 1 + 1e-3, 0, ReferenceRounding{1, 12345}, 1), options);
  EXPECT_EQ(off.verdict, FuzzVerdict::kMismatch) << off.detail;
  EXPECT_EQ(off.detail.rfind("output 1:", 0), 0u) << off.detail;
}

TEST(DifferentialFuzzJudgeTest, SmallErrorOnAWellConditionedGraphIsAMismatch) {
  Graph graph = WellConditionedGraph();
  FuzzCase off = JudgeGraph(graph, 3, ReferenceThen(graph, 1 + 1e-3, 0), Options(0, 1, true));
  EXPECT_EQ(off.verdict, FuzzVerdict::kMismatch) << off.detail;
  EXPECT_LT(off.sensitivity_ratio, 1) << off.detail;
  FuzzCase exact = JudgeGraph(graph, 3, ReferenceThen(graph, 1, 0), Options(0, 1, true));
  EXPECT_EQ(exact.verdict, FuzzVerdict::kMatch) << exact.detail;
}

}  // namespace
}  // namespace tilefuse

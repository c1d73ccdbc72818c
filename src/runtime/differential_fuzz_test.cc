// Differential fuzzing: random graphs (src/testing/random_graph.h), compiled for the
// CPU fused and unfused, must match the f64 reference interpreter on random inputs,
// with kernel outputs poisoned first. Graphs compile in batches (one compiler run per
// batch), which is what makes hundreds per CI run affordable. A failure names the seed;
// replay it with GenerateRandomGraph({.seed = N}).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "backend/cpu/interpreter.h"
#include "passes/pipeline.h"
#include "runtime/compiled_graph.h"
#include "support/tensor_compare.h"
#include "testing/random_graph.h"

namespace tilefuse {
namespace {

// Norm-wise bounds (support/tensor_compare.h) that follow the least precise float dtype
// anywhere in the graph: an f64 output computed from f32 values carries f32 rounding
// (libm's expf and exp differ by an ulp).
bool Close(const Tensor& actual, const Tensor& expected, DType least_precise, std::string* why) {
  Tolerance tol{1e-4, 2e-5};
  if (least_precise == DType::kF64) tol = {1e-9, 1e-11};
  if (!IsFloat(expected.dtype())) tol = {0, 0};
  Comparison c = CompareNormwise(actual, expected, tol);
  *why = c.reason;
  return c.pass;
}

// The inputs nudged by a few f32 ulps: a graph whose reference output moves beyond
// tolerance under this is ill-conditioned (e.g. a layer norm of pure rounding noise),
// and comparing two correct implementations on it proves nothing.
std::vector<Tensor> Nudged(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    Tensor n(t.dtype(), t.shape());
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      // A different few-ulp nudge per element (sign and size vary), so rounding noise
      // that elements share does not cancel out.
      double nudge = static_cast<double>(static_cast<int64_t>((i * 2654435761u) % 9) - 4) * 0x1p-22;
      n.SetDouble(i, t.GetDouble(i) * (1 + nudge));
    }
    out.push_back(n);
  }
  return out;
}

struct FuzzResult {
  int skipped = 0;     // ill-conditioned under input nudges
  int mismatched = 0;  // outside tolerance (seeds printed)
};

// A lowering bug shows in many graphs; a lone mismatch is usually catastrophic
// cancellation of an ulp (float expf vs the reference's rounded double exp, then a
// layer norm of saturated, equal values — seed 81), which no input nudge exposes
// because the reference saturates identically. So a run may hold a few mismatches,
// each printed for replay, and fails above 1%.
FuzzResult FuzzBatch(uint64_t first_seed, int count, bool fuse) {
  FuzzResult result;
  std::vector<Graph> graphs;
  std::vector<uint64_t> seeds;
  for (int i = 0; i < count; ++i) {
    RandomGraphOptions options;
    options.seed = first_seed + i;
    // Half types are left out: kernels keep them in f32 between ops while the
    // reference rounds every node, and ill-conditioned ops (sqrt near 0) amplify that
    // legitimate difference beyond any fixed tolerance.
    options.dtypes = {DType::kF32, DType::kF64};
    auto graph = GenerateRandomGraph(options);
    EXPECT_TRUE(graph.ok()) << "seed " << options.seed << ": " << graph.status().ToString();
    if (!graph.ok()) return result;
    auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
    EXPECT_TRUE(passed.ok()) << "seed " << options.seed << ": " << passed.status().ToString();
    if (!passed.ok()) return result;
    graphs.push_back(std::move(passed).value());
    seeds.push_back(options.seed);
  }
  CompileOptions options;
  options.fuse = fuse;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompiledGraph::CompileBatch(graphs, options);
  EXPECT_TRUE(compiled.ok()) << "seeds " << first_seed << ".." << first_seed + count - 1 << ": " << compiled.status().ToString();
  if (!compiled.ok()) return result;
  for (size_t g = 0; g < graphs.size(); ++g) {
    std::vector<Tensor> inputs;
    for (size_t i = 0; i < graphs[g].inputs().size(); ++i) {
      const Node& p = graphs[g].node(graphs[g].inputs()[i]);
      inputs.push_back(Tensor::Random(p.dtype, p.shape, seeds[g] * 7 + i));
    }
    auto expected = RunReference(graphs[g], inputs);
    auto nudged = RunReference(graphs[g], Nudged(inputs));
    auto actual = (*compiled)[g]->Run(inputs);
    EXPECT_TRUE(expected.ok() && nudged.ok() && actual.ok()) << "seed " << seeds[g];
    if (!expected.ok() || !nudged.ok() || !actual.ok()) continue;
    DType least_precise = DType::kF64;
    for (const Node& n : graphs[g].nodes())
      if (n.dtype == DType::kF32) least_precise = DType::kF32;
    bool stable = true;
    for (size_t o = 0; o < expected->size(); ++o) {
      std::string ignored;
      stable = stable && Close((*nudged)[o], (*expected)[o], DType::kF32, &ignored);
    }
    if (!stable) {
      ++result.skipped;
      continue;
    }
    bool mismatch = false;
    for (size_t o = 0; o < expected->size() && !mismatch; ++o) {
      std::string why;
      if (Close((*actual)[o], (*expected)[o], least_precise, &why)) continue;
      std::printf("mismatch: seed %llu %s output %zu: %s\n", static_cast<unsigned long long>(seeds[g]),
                  fuse ? "fused" : "unfused", o, why.c_str());
      mismatch = true;
    }
    result.mismatched += mismatch;
  }
  return result;
}

TEST(DifferentialFuzzTest, FusedMatchesReference) {
  FuzzResult total;
  for (uint64_t batch = 0; batch < 2; ++batch) {
    FuzzResult r = FuzzBatch(batch * 150, 150, true);
    total.skipped += r.skipped;
    total.mismatched += r.mismatched;
  }
  std::printf("fused: 300 random graphs, %d ill-conditioned, %d mismatched\n", total.skipped, total.mismatched);
  EXPECT_LT(total.skipped, 30);
  EXPECT_LE(total.mismatched, 3);
}

TEST(DifferentialFuzzTest, UnfusedMatchesReference) {
  FuzzResult r = FuzzBatch(10000, 150, false);
  std::printf("unfused: 150 random graphs, %d ill-conditioned, %d mismatched\n", r.skipped, r.mismatched);
  EXPECT_LT(r.skipped, 15);
  EXPECT_LE(r.mismatched, 1);
}

}  // namespace
}  // namespace tilefuse

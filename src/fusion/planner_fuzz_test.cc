// Fuzzing the planner: thousands of random graphs from the differential-testing
// generator (pointwise, broadcast, view, reduction, matmul, mask and dropout ops over
// random shapes and dtypes), after the frontend passes, must give plans that verify
// (every node in one group, groups convex and in a runnable order, kinds legal) and
// that are the same when planned twice. A failure prints the options that replay it.
#include <gtest/gtest.h>

#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "testing/random_graph.h"

namespace tilefuse {
namespace {

TEST(PlannerFuzzTest, RandomGraphsGiveVerifiedDeterministicPlans) {
  const int kGraphs = 1500;
  int fused_somewhere = 0;
  for (int seed = 0; seed < kGraphs; ++seed) {
    RandomGraphOptions generator;
    generator.seed = seed;
    generator.max_ops = 4 + seed % 40;  // small graphs and deep ones
    std::string replay = DescribeRandomGraphOptions(generator);
    auto random = GenerateRandomGraph(generator);
    ASSERT_TRUE(random.ok()) << replay << ": " << random.status().ToString();
    auto graph = RunGraphPasses(*random, PassOptions{});
    ASSERT_TRUE(graph.ok()) << replay << ": " << graph.status().ToString();
    for (bool fuse : {true, false}) {
      PlannerOptions options;
      options.fuse = fuse;
      options.device = seed % 2 ? "h200" : "cpu";
      auto plan = PlanFusion(*graph, options);
      ASSERT_TRUE(plan.ok()) << replay << ": " << plan.status().ToString();
      Status verified = VerifyPlan(*graph, *plan);
      ASSERT_TRUE(verified.ok()) << replay << " fuse=" << fuse << ": " << verified.ToString();
      auto again = PlanFusion(*graph, options);
      ASSERT_TRUE(again.ok()) << replay;
      ASSERT_EQ(plan->group_of, again->group_of) << replay << ": plan is not deterministic";
      if (fuse && plan->groups.size() < static_cast<size_t>(plan->unfused_kernels)) ++fused_somewhere;
    }
  }
  EXPECT_GT(fused_somewhere, kGraphs * 3 / 4) << "the fuzzer should exercise real merges";
}

}  // namespace
}  // namespace tilefuse

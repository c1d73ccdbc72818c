// The fallback rule on real graphs (ONNX text examples and exported models) with
// injected timings: which groups fall back, the threshold, missing measurements, the
// applied plan's shape and validity, and that the applied plan still computes the
// reference's answer when compiled for the CPU.
#include "tune/fallback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "backend/cpu/interpreter.h"
#include "frontend/onnx/importer.h"
#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "runtime/compiled_graph.h"
#include "support/tensor_compare.h"
#include "testing/random_graph.h"

namespace tilefuse {
namespace {

struct Plans {
  Graph graph;
  FusionPlan fused, unfused;
};

Plans PlanBoth(Graph graph) {
  PlannerOptions options;
  options.device = "cpu";
  auto fused = PlanFusion(graph, options);
  EXPECT_TRUE(fused.ok()) << fused.status().ToString();
  options.fuse = false;
  auto unfused = PlanFusion(graph, options);
  EXPECT_TRUE(unfused.ok()) << unfused.status().ToString();
  return {std::move(graph), std::move(fused).value(), std::move(unfused).value()};
}

Plans LoadAndPlan(const std::string& relative_path) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/" + relative_path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return PlanBoth(std::move(graph).value());
}

// The unfused groups each fused group contains, worked out from the node lists alone.
std::vector<std::vector<int>> ExpectedInside(const Plans& p) {
  std::vector<std::vector<int>> inside(p.fused.groups.size());
  for (const FusionGroup& u : p.unfused.groups) inside[p.fused.group_of[u.nodes.front()]].push_back(u.id);
  return inside;
}

// Unfused groups take 1.5, 2.5, ... us; fused groups half their unfused sum (fusion
// pays), except `slow`, which takes `slow_factor` times it.
struct Timings {
  std::vector<GroupTiming> fused, unfused;
};

Timings InjectTimings(const Plans& p, int slow, double slow_factor) {
  Timings t;
  std::vector<double> sum(p.fused.groups.size(), 0);
  for (const FusionGroup& u : p.unfused.groups) {
    double us = 1.5 + u.id;
    t.unfused.push_back({u.id, us});
    sum[p.fused.group_of[u.nodes.front()]] += us;
  }
  for (const FusionGroup& g : p.fused.groups) t.fused.push_back({g.id, sum[g.id] * (g.id == slow ? slow_factor : 0.5)});
  return t;
}

// The fused group made of the most unfused kernels: the one a fallback changes most.
int LargestGroup(const Plans& p) {
  std::vector<std::vector<int>> inside = ExpectedInside(p);
  int best = 0;
  for (size_t g = 0; g < inside.size(); ++g)
    if (inside[g].size() > inside[best].size()) best = static_cast<int>(g);
  EXPECT_GT(inside[best].size(), 1u) << "the graph should fuse something";
  return best;
}

std::vector<FallbackDecision> Decide(const Plans& p, const Timings& t) {
  auto decisions = DecideFallbacks(p.graph, p.fused, p.unfused, t.fused, t.unfused);
  EXPECT_TRUE(decisions.ok()) << decisions.status().ToString();
  return decisions.ok() ? std::move(decisions).value() : std::vector<FallbackDecision>{};
}

std::map<std::vector<int>, GroupKind> GroupsByNodes(const std::vector<FusionGroup>& groups) {
  std::map<std::vector<int>, GroupKind> out;
  for (const FusionGroup& g : groups) out[g.nodes] = g.kind;
  return out;
}

class FallbackModelTest : public testing::TestWithParam<std::string> {};

TEST_P(FallbackModelTest, SlowFusedGroupIsReplacedByItsUnfusedGroups) {
  Plans p = LoadAndPlan(GetParam());
  int slow = LargestGroup(p);
  std::vector<FallbackDecision> decisions = Decide(p, InjectTimings(p, slow, 2.0));
  ASSERT_EQ(decisions.size(), p.fused.groups.size());
  std::vector<std::vector<int>> inside = ExpectedInside(p);
  for (const FallbackDecision& d : decisions) {
    EXPECT_EQ(d.unfused_groups, inside[d.fused_group]);
    EXPECT_EQ(d.use_unfused, d.fused_group == slow) << d.fused_group << ": " << d.reason;
  }
  EXPECT_EQ(decisions[slow].reason, "unfused: fused measured 2.00x slower (limit 1.10x)");

  auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, decisions);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_TRUE(VerifyPlan(p.graph, *applied).ok());
  ASSERT_EQ(applied->groups.size(), p.fused.groups.size() + inside[slow].size() - 1);
  // Exactly the slow group's nodes are now in its unfused groups; every other group stays.
  std::map<std::vector<int>, GroupKind> expected = GroupsByNodes(p.fused.groups);
  expected.erase(p.fused.groups[slow].nodes);
  for (int u : inside[slow]) expected[p.unfused.groups[u].nodes] = p.unfused.groups[u].kind;
  EXPECT_EQ(GroupsByNodes(applied->groups), expected);
  // Bookkeeping: consecutive ids, totals, and the decision visible among the rejected merges.
  double predicted = 0;
  for (size_t i = 0; i < applied->groups.size(); ++i) {
    EXPECT_EQ(applied->groups[i].id, static_cast<int>(i));
    predicted += applied->groups[i].predicted_us;
  }
  EXPECT_DOUBLE_EQ(applied->predicted_us, predicted);
  EXPECT_EQ(applied->unfused_kernels, p.fused.unfused_kernels);
  EXPECT_EQ(applied->unfused_predicted_us, p.fused.unfused_predicted_us);
  int fallback_edges = 0;
  for (const RejectedMerge& r : applied->rejected) {
    ASSERT_LT(r.consumer_group, static_cast<int>(applied->groups.size()));
    fallback_edges += r.reason.find("autotuner fallback from fused group") != std::string::npos;
  }
  EXPECT_GE(fallback_edges, static_cast<int>(inside[slow].size()) - 1);  // the split groups stay connected
}

TEST_P(FallbackModelTest, ExactlyTenPercentSlowerStaysFusedElevenFallsBack) {
  Plans p = LoadAndPlan(GetParam());
  int slow = LargestGroup(p);
  EXPECT_FALSE(Decide(p, InjectTimings(p, slow, 1.10))[slow].use_unfused);
  EXPECT_TRUE(Decide(p, InjectTimings(p, slow, 1.11))[slow].use_unfused);
  EXPECT_FALSE(Decide(p, InjectTimings(p, slow, 1.0))[slow].use_unfused);
  // The same with decimal times, where 1.1 x 100 is not 110 in binary: 33.3 + 66.7 us unfused.
  Timings t = InjectTimings(p, slow, 1.0);
  std::vector<int> inside = ExpectedInside(p)[slow];
  for (GroupTiming& u : t.unfused)
    if (std::find(inside.begin(), inside.end(), u.group) != inside.end())
      u.time_us = u.group == inside[0] ? 33.3 : u.group == inside[1] ? 66.7 : 0.0;
  for (auto [fused_us, falls_back] : {std::pair{110.0, false}, std::pair{111.0, true}}) {
    t.fused[slow].time_us = fused_us;
    EXPECT_EQ(Decide(p, t)[slow].use_unfused, falls_back) << fused_us;
  }
}

TEST_P(FallbackModelTest, MissingMeasurementsKeepTheGroupFused) {
  Plans p = LoadAndPlan(GetParam());
  int slow = LargestGroup(p);
  Timings no_fused = InjectTimings(p, slow, 2.0);
  std::erase_if(no_fused.fused, [&](const GroupTiming& t) { return t.group == slow; });
  FallbackDecision d = Decide(p, no_fused)[slow];
  EXPECT_FALSE(d.use_unfused);
  EXPECT_NE(d.reason.find("not measured"), std::string::npos) << d.reason;

  Timings no_unfused = InjectTimings(p, slow, 2.0);
  int missing = ExpectedInside(p)[slow].back();
  std::erase_if(no_unfused.unfused, [&](const GroupTiming& t) { return t.group == missing; });
  d = Decide(p, no_unfused)[slow];
  EXPECT_FALSE(d.use_unfused);
  EXPECT_EQ(d.reason, "kept fused: not measured (no time for unfused group " + std::to_string(missing) + ")");

  std::vector<FallbackDecision> none = Decide(p, Timings{});
  for (const FallbackDecision& n : none) EXPECT_FALSE(n.use_unfused);
  auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, none);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->group_of, p.fused.group_of);
}

// Compiles `plan` for the CPU and compares with the f64 reference on random inputs,
// kernel outputs poisoned first.
void ExpectPlanComputesReference(const Graph& graph, const FusionPlan& plan) {
  CompileOptions options;
  options.plan_override = &plan;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompiledGraph::Compile(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->plan().group_of, plan.group_of) << "the override was not used";
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& param = graph.node(graph.inputs()[i]);
    inputs.push_back(IsFloat(param.dtype) ? Tensor::Random(param.dtype, param.shape, 77 + i) : Tensor(param.dtype, param.shape));
  }
  auto expected = RunReference(graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t i = 0; i < expected->size(); ++i) {
    Tolerance tol = (*expected)[i].dtype() == DType::kF64 ? Tolerance{1e-9, 1e-12} : Tolerance{1e-4, 1e-5};
    Comparison c = CompareNormwise((*actual)[i], (*expected)[i], tol);
    EXPECT_TRUE(c.pass) << "output " << i << ": " << c.reason;
  }
}

TEST_P(FallbackModelTest, AppliedPlanComputesTheReferenceOnTheCpu) {
  Plans p = LoadAndPlan(GetParam());
  // Every other multi-kernel group falls back, so split and fused groups sit side by side.
  Timings t = InjectTimings(p, -1, 0.5);
  std::vector<std::vector<int>> inside = ExpectedInside(p);
  int multi = 0;
  for (GroupTiming& g : t.fused)
    if (inside[g.group].size() > 1 && multi++ % 2 == 0) g.time_us *= 8;  // 0.5x → 4x the unfused sum
  std::vector<FallbackDecision> decisions = Decide(p, t);
  int fell_back = 0;
  for (const FallbackDecision& d : decisions) fell_back += d.use_unfused;
  EXPECT_EQ(fell_back, (multi + 1) / 2);
  auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, decisions);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  ExpectPlanComputesReference(p.graph, *applied);
}

INSTANTIATE_TEST_SUITE_P(Models, FallbackModelTest,
                         testing::Values("examples/layernorm_manual.onnxtxt", "examples/mlp_block.onnxtxt",
                                         "examples/causal_attention.onnxtxt", "tests/models/mlp_block",
                                         "tests/models/gpt2_2layer"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::filesystem::path path(info.param);
                           return path.stem().string() + (path.extension().empty() ? "_model" : "");
                         });

TEST(FallbackTest, DescribesTimesAndDecisions) {
  std::vector<FallbackDecision> decisions = {
      {0, {0, 1}, 5.0, 9.0, false, "kept fused: 1.80x faster than unfused"},
      {1, {2, 3, 4}, 12.5, 10.0, true, "unfused: fused measured 1.25x slower (limit 1.10x)"},
      {2, {5}, NAN, 3.0, false, "kept fused: not measured (no time for the fused group)"}};
  EXPECT_EQ(DescribeFallbacks(decisions),
            "group 0: fused 5.00 us, unfused 9.00 us (unfused groups 0, 1) -> kept fused: 1.80x faster than unfused\n"
            "group 1: fused 12.50 us, unfused 10.00 us (unfused groups 2, 3, 4) -> unfused: fused measured 1.25x slower "
            "(limit 1.10x)\n"
            "group 2: fused not measured, unfused 3.00 us (unfused groups 5) -> kept fused: not measured (no time for the "
            "fused group)\n");
  nlohmann::json json = FallbacksToJson(decisions);
  ASSERT_EQ(json.size(), 3u);
  EXPECT_EQ(json[1]["fused_us"], 12.5);
  EXPECT_EQ(json[1]["unfused_groups"], nlohmann::json::array({2, 3, 4}));
  EXPECT_TRUE(json[1]["use_unfused"].get<bool>());
  EXPECT_TRUE(json[2]["fused_us"].is_null());
  EXPECT_EQ(json[0]["reason"], "kept fused: 1.80x faster than unfused");
}

TEST(FallbackTest, ReasonsSayHowMuchFasterOrSlower) {
  Plans p = LoadAndPlan("examples/layernorm_manual.onnxtxt");
  int slow = LargestGroup(p);
  EXPECT_EQ(Decide(p, InjectTimings(p, slow, 1.0 / 1.8))[slow].reason, "kept fused: 1.80x faster than unfused");
  EXPECT_EQ(Decide(p, InjectTimings(p, slow, 1.05))[slow].reason,
            "kept fused: 1.05x slower than unfused, within the 1.10x limit");
  EXPECT_EQ(Decide(p, InjectTimings(p, slow, 1.25))[slow].reason, "unfused: fused measured 1.25x slower (limit 1.10x)");
}

TEST(FallbackTest, RejectsBadTimingsAndMismatchedPlans) {
  Plans p = LoadAndPlan("examples/mlp_block.onnxtxt");
  auto decide = [&](std::vector<GroupTiming> fused, std::vector<GroupTiming> unfused) {
    return DecideFallbacks(p.graph, p.fused, p.unfused, fused, unfused).status().code();
  };
  int n = static_cast<int>(p.fused.groups.size());
  EXPECT_EQ(decide({{n, 1.0}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(decide({{0, 1.0}, {0, 2.0}}, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(decide({}, {{0, -1.0}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(decide({}, {{0, NAN}}), StatusCode::kInvalidArgument);
  // Plans swapped: the "unfused" groups straddle the "fused" ones.
  EXPECT_EQ(DecideFallbacks(p.graph, p.unfused, p.fused, {}, {}).status().code(), StatusCode::kInternal);

  std::vector<FallbackDecision> decisions = Decide(p, InjectTimings(p, LargestGroup(p), 2.0));
  decisions[LargestGroup(p)].unfused_groups.pop_back();
  EXPECT_EQ(ApplyFallbacks(p.graph, p.fused, p.unfused, decisions).status().code(), StatusCode::kInvalidArgument);
}

// Random graphs from the differential-fuzzing generator: every unfused group lies in
// one fused group, and falling back any subset of groups gives a plan that verifies.
TEST(FallbackTest, RandomGraphsAndRandomFallbacksGiveVerifiedPlans) {
  for (int seed = 0; seed < 300; ++seed) {
    RandomGraphOptions generator;
    generator.seed = seed;
    generator.max_ops = 4 + seed % 40;
    std::string replay = DescribeRandomGraphOptions(generator);
    auto random = GenerateRandomGraph(generator);
    ASSERT_TRUE(random.ok()) << replay << ": " << random.status().ToString();
    auto graph = RunGraphPasses(*random, PassOptions{});
    ASSERT_TRUE(graph.ok()) << replay << ": " << graph.status().ToString();
    Plans p = PlanBoth(std::move(graph).value());
    // Group g measures 1.5x its unfused sum when a bit of the seed says so.
    Timings t = InjectTimings(p, -1, 0.5);
    for (GroupTiming& g : t.fused)
      if ((seed >> (g.group % 8)) & 1) g.time_us *= 3;
    auto decisions = DecideFallbacks(p.graph, p.fused, p.unfused, t.fused, t.unfused);
    ASSERT_TRUE(decisions.ok()) << replay << ": " << decisions.status().ToString();
    auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, *decisions);
    ASSERT_TRUE(applied.ok()) << replay << ": " << applied.status().ToString();
  }
}

}  // namespace
}  // namespace tilefuse

// The fallback rule on real graphs (ONNX text examples and exported models) with
// injected timings: which groups fall back, the threshold, missing measurements, the
// applied plan's shape and validity, and that the applied plan still computes the
// reference's answer when compiled for the CPU.
#include "driver/driver.h"
#include "tune/fallback.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>

#include "reference/interpreter.h"
#include "frontend/onnx/importer.h"
#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"
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

// Per fused group, the unfused groups with a node in it (`touching`) and those whose
// last op is in it (`timed`), worked out from the node lists alone.
struct Overlap {
  std::vector<std::vector<int>> touching, timed;
};

Overlap OverlapOf(const Plans& p) {
  Overlap o{std::vector<std::vector<int>>(p.fused.groups.size()), std::vector<std::vector<int>>(p.fused.groups.size())};
  for (const FusionGroup& u : p.unfused.groups) {
    std::set<int> fused_groups;
    for (int id : u.nodes) fused_groups.insert(p.fused.group_of[id]);
    for (int g : fused_groups) o.touching[g].push_back(u.id);
    o.timed[p.fused.group_of[u.nodes.back()]].push_back(u.id);
  }
  return o;
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
    sum[p.fused.group_of[u.nodes.back()]] += us;
  }
  for (const FusionGroup& g : p.fused.groups) t.fused.push_back({g.id, sum[g.id] * (g.id == slow ? slow_factor : 0.5)});
  return t;
}

// The fused group timed against the most unfused kernels: the one a fallback changes most.
int LargestGroup(const Plans& p) {
  std::vector<std::vector<int>> timed = OverlapOf(p).timed;
  int best = 0;
  for (size_t g = 0; g < timed.size(); ++g)
    if (timed[g].size() > timed[best].size()) best = static_cast<int>(g);
  EXPECT_GT(timed[best].size(), 1u) << "the graph should fuse something";
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

bool IsViewLike(const Graph& graph, int id) {
  OpKind kind = graph.node(id).info().kind;
  return kind == OpKind::View || kind == OpKind::Broadcast;
}

// `applied` is `p.fused` with group `slow` cut along the unfused groups: the other groups
// unchanged, and in its place groups that partition its nodes, keep each unfused
// group's part whole, and hold real ops of one unfused group each (a shared view may
// join the piece computing its input). Without shared views: exactly the unfused groups.
void ExpectSplitAlongUnfusedGroups(const Plans& p, int slow, const FusionPlan& applied) {
  const FusionGroup& cut = p.fused.groups[slow];
  Overlap overlap = OverlapOf(p);
  std::map<std::vector<int>, GroupKind> others = GroupsByNodes(p.fused.groups);
  others.erase(cut.nodes);
  std::vector<FusionGroup> pieces;
  for (const FusionGroup& g : applied.groups) {
    if (p.fused.group_of[g.nodes.front()] == slow) pieces.push_back(g);
    else EXPECT_EQ(others.erase(g.nodes), 1u) << "group " << g.id << " is new but not from the slow group";
  }
  EXPECT_TRUE(others.empty()) << others.size() << " fused groups went missing";
  std::vector<int> covered;
  for (const FusionGroup& piece : pieces) {
    std::set<int> real_ops_from;
    for (int id : piece.nodes) {
      EXPECT_EQ(p.fused.group_of[id], slow) << "%" << id << " came from another group";
      covered.push_back(id);
      if (!IsViewLike(p.graph, id)) real_ops_from.insert(p.unfused.group_of[id]);
    }
    EXPECT_LE(real_ops_from.size(), 1u) << "group " << piece.id << " merges unfused kernels";
  }
  std::sort(covered.begin(), covered.end());
  EXPECT_EQ(covered, cut.nodes);
  bool shares_views = false;
  for (int u : overlap.touching[slow]) {
    std::set<int> holders;
    for (int id : p.unfused.groups[u].nodes)
      if (p.fused.group_of[id] == slow) holders.insert(applied.group_of[id]);
      else shares_views = true;
    EXPECT_EQ(holders.size(), 1u) << "unfused group " << u << "'s part was cut";
  }
  EXPECT_GE(pieces.size(), overlap.timed[slow].size());
  if (shares_views) return;
  std::map<std::vector<int>, GroupKind> expected, actual = GroupsByNodes(pieces);
  for (int u : overlap.touching[slow]) expected[p.unfused.groups[u].nodes] = p.unfused.groups[u].kind;
  EXPECT_EQ(actual, expected);
}

void ExpectBookkeeping(const FusionPlan& fused, const FusionPlan& applied) {
  double predicted = 0;
  for (size_t i = 0; i < applied.groups.size(); ++i) {
    EXPECT_EQ(applied.groups[i].id, static_cast<int>(i));
    predicted += applied.groups[i].predicted_us;
  }
  EXPECT_NEAR(applied.predicted_us, predicted, 1e-9 * predicted);
  EXPECT_EQ(applied.device, fused.device);
  EXPECT_EQ(applied.unfused_kernels, fused.unfused_kernels);
  EXPECT_EQ(applied.unfused_predicted_us, fused.unfused_predicted_us);
  for (const RejectedMerge& r : applied.rejected) {
    EXPECT_LT(r.producer_group, r.consumer_group);
    EXPECT_LT(r.consumer_group, static_cast<int>(applied.groups.size()));
  }
}

TEST_P(FallbackModelTest, SlowFusedGroupIsCutAlongItsUnfusedGroups) {
  Plans p = LoadAndPlan(GetParam());
  int slow = LargestGroup(p);
  std::vector<FallbackDecision> decisions = Decide(p, InjectTimings(p, slow, 2.0));
  ASSERT_EQ(decisions.size(), p.fused.groups.size());
  Overlap overlap = OverlapOf(p);
  for (const FallbackDecision& d : decisions) {
    EXPECT_EQ(d.unfused_groups, overlap.touching[d.fused_group]);
    EXPECT_EQ(d.use_unfused, d.fused_group == slow) << d.fused_group << ": " << d.reason;
  }
  EXPECT_TRUE(decisions[slow].reason.starts_with("unfused: fused measured 2.00x slower (limit 1.10x)"))
      << decisions[slow].reason;

  auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, decisions);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_TRUE(VerifyPlan(p.graph, *applied).ok());
  ExpectSplitAlongUnfusedGroups(p, slow, *applied);
  ExpectBookkeeping(p.fused, *applied);
  int fallback_edges = 0;
  for (const RejectedMerge& r : applied->rejected)
    fallback_edges += r.reason.find("autotuner fallback from fused group " + std::to_string(slow)) != std::string::npos;
  EXPECT_GE(fallback_edges, static_cast<int>(applied->groups.size() - p.fused.groups.size()));  // pieces stay connected
}

TEST_P(FallbackModelTest, ExactlyTenPercentSlowerStaysFusedElevenFallsBack) {
  Plans p = LoadAndPlan(GetParam());
  int slow = LargestGroup(p);
  EXPECT_FALSE(Decide(p, InjectTimings(p, slow, 1.10))[slow].use_unfused);
  EXPECT_TRUE(Decide(p, InjectTimings(p, slow, 1.11))[slow].use_unfused);
  EXPECT_FALSE(Decide(p, InjectTimings(p, slow, 1.0))[slow].use_unfused);
  // The same with decimal times, where 1.1 x 100 is not 110 in binary: 33.3 + 66.7 us unfused.
  Timings t = InjectTimings(p, slow, 1.0);
  std::vector<int> inside = OverlapOf(p).timed[slow];
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
  int missing = OverlapOf(p).timed[slow].back();
  std::erase_if(no_unfused.unfused, [&](const GroupTiming& t) { return t.group == missing; });
  d = Decide(p, no_unfused)[slow];
  EXPECT_FALSE(d.use_unfused);
  EXPECT_TRUE(d.reason.starts_with("kept fused: not measured (no time for unfused group " + std::to_string(missing) + ")"))
      << d.reason;

  std::vector<FallbackDecision> none = Decide(p, Timings{});
  for (const FallbackDecision& n : none) EXPECT_FALSE(n.use_unfused);
  auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, none);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->group_of, p.fused.group_of);
}

// Compiles `plan` for the CPU and compares with the f64 reference on random inputs,
// kernel outputs poisoned first.
void ExpectPlanComputesReference(const Graph& graph, const FusionPlan& plan) {
  CpuCompileOptions options;
  options.plan_override = &plan;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompileForCpu(graph, options);
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
  std::vector<std::vector<int>> timed = OverlapOf(p).timed;
  int multi = 0;
  for (GroupTiming& g : t.fused)
    if (timed[g.group].size() > 1 && multi++ % 2 == 0) g.time_us *= 8;  // 0.5x → 4x the unfused sum
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
                                         "tests/models/gpt2_2layer", "tests/models/llama_2layer"),
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

// gpt2: fusion keeps a layer norm's output reshape in the layer-norm group, the unfused
// plan runs it inside the next matmul's kernel (tune/plan_pairing.h).
TEST(FallbackTest, SharedViewsAreTimedWithTheKernelTheyFoldInto) {
  Plans p = LoadAndPlan("tests/models/gpt2_2layer");
  const FusionGroup* shared = nullptr;
  for (const FusionGroup& u : p.unfused.groups)
    if (!shared && p.fused.group_of[u.nodes.front()] != p.fused.group_of[u.nodes.back()]) shared = &u;
  ASSERT_NE(shared, nullptr) << "gpt2 should have a view fused apart from its consumer";
  int view_group = p.fused.group_of[shared->nodes.front()], last_group = p.fused.group_of[shared->nodes.back()];
  Timings t = InjectTimings(p, -1, 0.5);
  t.unfused[shared->id].time_us = 1000;  // counts for last_group alone
  std::vector<FallbackDecision> decisions = Decide(p, t);
  for (int g : {view_group, last_group})
    EXPECT_TRUE(std::count(decisions[g].unfused_groups.begin(), decisions[g].unfused_groups.end(), shared->id)) << g;
  EXPECT_LT(decisions[view_group].unfused_us, 1000);
  EXPECT_GE(decisions[last_group].unfused_us, 1000);
  EXPECT_NE(decisions[view_group].reason.find(fmt::format("views shared: unfused group {} with fused group {}", shared->id,
                                                          last_group)),
            std::string::npos)
      << decisions[view_group].reason;

  // Either side alone, or both, falls back; the shared reshape never becomes a copy kernel
  // of its own when the piece computing its input can take it.
  for (std::vector<int> slow : {std::vector<int>{view_group}, {last_group}, {view_group, last_group}}) {
    std::vector<FallbackDecision> forced = decisions;
    for (int g : slow) forced[g].use_unfused = true;
    auto applied = ApplyFallbacks(p.graph, p.fused, p.unfused, forced);
    ASSERT_TRUE(applied.ok()) << applied.status().ToString();
    if (slow.size() == 1) ExpectSplitAlongUnfusedGroups(p, slow[0], *applied);
    ExpectBookkeeping(p.fused, *applied);
    int view = shared->nodes.front();
    EXPECT_EQ(applied->group_of[view], applied->group_of[p.graph.node(view).inputs[0]]);
    if (slow.size() == 2) ExpectPlanComputesReference(p.graph, *applied);
  }
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
  // Plans that do not partition the same nodes.
  FusionPlan short_one = p.unfused;
  short_one.groups.pop_back();
  EXPECT_EQ(DecideFallbacks(p.graph, p.fused, short_one, {}, {}).status().code(), StatusCode::kInternal);
  Plans other = LoadAndPlan("examples/layernorm_manual.onnxtxt");
  EXPECT_EQ(DecideFallbacks(p.graph, p.fused, other.unfused, {}, {}).status().code(), StatusCode::kInternal);

  std::vector<FallbackDecision> decisions = Decide(p, InjectTimings(p, LargestGroup(p), 2.0));
  decisions[LargestGroup(p)].unfused_groups.pop_back();
  EXPECT_EQ(ApplyFallbacks(p.graph, p.fused, p.unfused, decisions).status().code(), StatusCode::kInvalidArgument);
}

// Random graphs from the differential-fuzzing generator: falling back any subset of
// groups, shared views included, gives a plan that verifies.
TEST(FallbackTest, RandomGraphsAndRandomFallbacksGiveVerifiedPlans) {
  int fell_back = 0, with_shared_views = 0;
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
    for (const FallbackDecision& d : *decisions) {
      fell_back += d.use_unfused;
      with_shared_views += d.use_unfused && d.reason.find("views shared") != std::string::npos;
    }
  }
  EXPECT_GT(fell_back, 200);
  EXPECT_GT(with_shared_views, 5) << "the generator should exercise views fused apart from their consumer";
}

}  // namespace
}  // namespace tilefuse

#include "runtime/memory_plan.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "frontend/onnx/importer.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using Role = BufferRole;

int AddBuffer(Schedule& s, int64_t bytes, Role role, std::string name = "") {
  s.buffers.push_back({bytes, role, -1, std::move(name)});
  return static_cast<int>(s.buffers.size()) - 1;
}

MemoryPlan MustPlan(const Schedule& s, MemoryPlanOptions options = {}) {
  StatusOr<MemoryPlan> plan = PlanMemory(s, options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return {};
  Status checked = CheckMemoryPlan(s, *plan);
  EXPECT_TRUE(checked.ok()) << checked.ToString();
  return *plan;
}

// input -> t0 -> t1 -> ... -> t{n-2} -> output, one step per arrow.
Schedule Chain(int steps, int64_t bytes) {
  Schedule s;
  int previous = AddBuffer(s, bytes, Role::kGraphInput, "input");
  for (int i = 0; i < steps; ++i) {
    int next = AddBuffer(s, bytes, i + 1 < steps ? Role::kIntermediate : Role::kGraphOutput);
    s.steps.push_back({fmt::format("step{}", i), {previous}, {next}});
    previous = next;
  }
  return s;
}

TEST(MemoryPlanTest, ChainNeedsTwoBuffers) {
  // Each intermediate is live for two steps (written, then read by the next one), so
  // two slots of 1000 bytes rounded up to 1024 suffice however long the chain.
  Schedule s = Chain(10, 1000);
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.num_intermediates, 9);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);
  EXPECT_EQ(plan.peak_live_bytes, 2 * 1000);
  EXPECT_EQ(plan.total_intermediate_bytes, 9 * 1000);
  EXPECT_EQ(plan.live_ranges[1].first, 0);
  EXPECT_EQ(plan.live_ranges[1].last, 1);
}

TEST(MemoryPlanTest, DisjointLifetimesShareBytes) {
  Schedule s;
  int in = AddBuffer(s, 4096, Role::kGraphInput);
  int a = AddBuffer(s, 4096, Role::kIntermediate), b = AddBuffer(s, 4096, Role::kIntermediate);
  int c = AddBuffer(s, 4096, Role::kIntermediate), out = AddBuffer(s, 4096, Role::kGraphOutput);
  s.steps = {{"a", {in}, {a}}, {"b", {a}, {b}}, {"c", {b}, {c}}, {"out", {c}, {out}}};
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.offsets[a], plan.offsets[c]);  // a dies at step 1, c is born at step 2
  EXPECT_NE(plan.offsets[a], plan.offsets[b]);
  EXPECT_EQ(plan.arena_bytes, 8192);
}

// A value a step's kernels read though its group does not list it (a template reading an
// operand through a view) stays its own until that step: it no longer shares bytes with a
// value born in between.
TEST(MemoryPlanTest, ReadsAddedToAStepExtendTheirValuesLives) {
  Schedule s;
  int in = AddBuffer(s, 4096, Role::kGraphInput);
  int a = AddBuffer(s, 4096, Role::kIntermediate), b = AddBuffer(s, 4096, Role::kIntermediate);
  int c = AddBuffer(s, 4096, Role::kIntermediate), out = AddBuffer(s, 4096, Role::kGraphOutput);
  s.buffers[a].node = 10;
  s.buffers[in].node = 11;
  s.steps = {{"a", {in}, {a}}, {"b", {a}, {b}}, {"c", {b}, {c}}, {"out", {c}, {out}}};
  // step 2 reads a and the input (listed once each); node 12 has no buffer and is left.
  AddStepReads({{}, {}, {10, 11, 10, 12}, {}}, s);
  EXPECT_EQ(s.steps[2].reads, (std::vector<int>{b, a, in}));
  EXPECT_EQ(s.steps[1].reads, (std::vector<int>{a}));
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.live_ranges[a].last, 2);
  EXPECT_NE(plan.offsets[a], plan.offsets[c]);  // shared before (DisjointLifetimesShareBytes)
  EXPECT_EQ(plan.arena_bytes, 3 * 4096);
}

TEST(MemoryPlanTest, OnlyIntermediatesAreInTheArena) {
  Schedule s;
  int in = AddBuffer(s, 100, Role::kGraphInput), weights = AddBuffer(s, 300, Role::kConstant);
  int mid = AddBuffer(s, 200, Role::kIntermediate), out = AddBuffer(s, 500, Role::kGraphOutput);
  int unused = AddBuffer(s, 700, Role::kIntermediate);
  s.steps = {{"first", {in, weights}, {mid}}, {"second", {mid, weights}, {out}}};
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.offsets[in], -1);
  EXPECT_EQ(plan.offsets[weights], -1);
  EXPECT_EQ(plan.offsets[out], -1);
  EXPECT_EQ(plan.offsets[unused], -1);
  EXPECT_EQ(plan.offsets[mid], 0);
  EXPECT_EQ(plan.arena_bytes, 256);
  EXPECT_EQ(plan.peak_live_bytes, 200);
  EXPECT_EQ(plan.num_intermediates, 1);
}

TEST(MemoryPlanTest, OffsetsRespectTheAlignment) {
  for (int64_t alignment : {1, 64, 256}) {
    Schedule s;
    int in = AddBuffer(s, 10, Role::kGraphInput);
    std::vector<int> all;
    for (int64_t bytes : {1, 65, 100, 257, 3}) all.push_back(AddBuffer(s, bytes, Role::kIntermediate));
    s.steps.push_back({"make", {in}, all});
    s.steps.push_back({"use", all, {AddBuffer(s, 10, Role::kGraphOutput)}});
    MemoryPlan plan = MustPlan(s, {alignment});
    int64_t padded_sum = 0;
    for (int id : all) {
      EXPECT_EQ(plan.offsets[id] % alignment, 0) << "alignment " << alignment;
      padded_sum += (s.buffers[id].bytes + alignment - 1) / alignment * alignment;
    }
    EXPECT_EQ(plan.arena_bytes, padded_sum);  // all live at once: no reuse possible
  }
  EXPECT_FALSE(PlanMemory(Chain(3, 10), {48}).ok());
  EXPECT_FALSE(PlanMemory(Chain(3, 10), {0}).ok());
}

TEST(MemoryPlanTest, MalformedSchedulesAreErrors) {
  Schedule s = Chain(3, 10);
  s.steps[1].reads = {2};  // reads its own output before anything wrote it
  EXPECT_EQ(PlanMemory(s).status().code(), StatusCode::kInvalidArgument);
  s = Chain(3, 10);
  s.steps[1].writes.push_back(0);  // the graph input
  EXPECT_NE(PlanMemory(s).status().message().find("graph input"), std::string::npos);
  s = Chain(3, 10);
  s.steps[2].reads.push_back(17);
  EXPECT_FALSE(PlanMemory(s).ok());
  s = Chain(3, 10);
  s.buffers[1].bytes = -1;
  EXPECT_FALSE(PlanMemory(s).ok());
}

TEST(MemoryPlanTest, CheckerCatchesBadPlans) {
  Schedule s = Chain(4, 1000);  // intermediates 1, 2, 3; 1 and 2 both live at step 1
  MemoryPlan plan = MustPlan(s);
  MemoryPlan overlapping = plan;
  overlapping.offsets[2] = overlapping.offsets[1];
  Status status = CheckMemoryPlan(s, overlapping);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("buffer 1"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("buffer 2"), std::string::npos) << status.message();

  MemoryPlan partly = plan;  // 512 bytes into the other one
  partly.offsets[2] = partly.offsets[1] + 512;
  partly.arena_bytes += 2048;
  EXPECT_FALSE(CheckMemoryPlan(s, partly).ok());

  MemoryPlan unaligned = plan;
  unaligned.offsets[1] += 8;
  EXPECT_FALSE(CheckMemoryPlan(s, unaligned).ok());

  MemoryPlan input_placed = plan;
  input_placed.offsets[0] = 0;
  EXPECT_FALSE(CheckMemoryPlan(s, input_placed).ok());

  MemoryPlan below = plan;  // ends 512 bytes into the other one
  below.offsets[1] = 1024;
  below.offsets[2] = 512;
  below.arena_bytes = 4096;
  EXPECT_FALSE(CheckMemoryPlan(s, below).ok());
  below.offsets[2] = 2048;
  EXPECT_TRUE(CheckMemoryPlan(s, below).ok()) << CheckMemoryPlan(s, below).ToString();

  MemoryPlan too_small = plan;
  too_small.arena_bytes = 1024;
  EXPECT_FALSE(CheckMemoryPlan(s, too_small).ok());
}

// Random valid schedules: each step reads some already-written buffers (or inputs and
// constants) and writes one or two new ones.
Schedule RandomSchedule(std::mt19937& rng) {
  Schedule s;
  std::uniform_int_distribution<int64_t> size(0, 5000);
  int sources = 1 + static_cast<int>(rng() % 3);
  std::vector<int> readable;
  for (int i = 0; i < sources; ++i)
    readable.push_back(AddBuffer(s, size(rng), i == 0 ? Role::kGraphInput : Role::kConstant));
  int steps = 1 + static_cast<int>(rng() % 40);
  for (int step = 0; step < steps; ++step) {
    ScheduleStep st{fmt::format("s{}", step), {}, {}};
    int reads = 1 + static_cast<int>(rng() % 4);
    // Mostly recent buffers, like a real graph, sometimes old ones (long lifetimes).
    for (int r = 0; r < reads; ++r) {
      int back = rng() % 4 == 0 ? static_cast<int>(rng() % readable.size()) : static_cast<int>(rng() % 3);
      st.reads.push_back(readable[std::max(0, static_cast<int>(readable.size()) - 1 - back)]);
    }
    int writes = 1 + static_cast<int>(rng() % 2);
    for (int w = 0; w < writes; ++w) {
      Role role = rng() % 8 == 0 ? Role::kGraphOutput : Role::kIntermediate;
      st.writes.push_back(AddBuffer(s, size(rng), role));
      readable.push_back(st.writes.back());
    }
    s.steps.push_back(std::move(st));
  }
  return s;
}

// The first pair of live-overlapping buffers that overlap in memory, by brute force over
// all pairs: independent of CheckMemoryPlan's sweep. {-1, -1} when there is none.
std::pair<int, int> BruteForceConflict(const Schedule& s, const MemoryPlan& plan) {
  for (size_t a = 0; a < s.buffers.size(); ++a) {
    for (size_t b = a + 1; b < s.buffers.size(); ++b) {
      if (plan.offsets[a] < 0 || plan.offsets[b] < 0) continue;
      if (s.buffers[a].bytes == 0 || s.buffers[b].bytes == 0) continue;
      if (!plan.live_ranges[a].Overlaps(plan.live_ranges[b])) continue;
      bool disjoint = plan.offsets[a] + s.buffers[a].bytes <= plan.offsets[b] ||
                      plan.offsets[b] + s.buffers[b].bytes <= plan.offsets[a];
      if (!disjoint) return {static_cast<int>(a), static_cast<int>(b)};
    }
  }
  return {-1, -1};
}

TEST(MemoryPlanTest, RandomSchedulesNeverOverlapLiveBuffers) {
  std::mt19937 rng(20261122);
  for (int iteration = 0; iteration < 500; ++iteration) {
    Schedule s = RandomSchedule(rng);
    int64_t alignment = iteration % 2 ? 64 : 256;
    MemoryPlan plan = MustPlan(s, {alignment});  // runs CheckMemoryPlan too
    auto [a, b] = BruteForceConflict(s, plan);
    ASSERT_EQ(a, -1) << "iteration " << iteration << " buffers " << a << ", " << b;
    EXPECT_GE(plan.arena_bytes, plan.peak_live_bytes);
    EXPECT_LE(plan.peak_live_bytes, plan.total_intermediate_bytes);
    if (HasFailure()) FAIL() << "iteration " << iteration;
  }
}

TEST(MemoryPlanTest, CheckerAgreesWithBruteForceOnDamagedPlans) {
  std::mt19937 rng(99);
  int conflicts = 0;
  for (int iteration = 0; iteration < 500; ++iteration) {
    Schedule s = RandomSchedule(rng);
    MemoryPlan plan = MustPlan(s);
    std::vector<int> placed;
    for (size_t i = 0; i < s.buffers.size(); ++i)
      if (plan.offsets[i] >= 0) placed.push_back(static_cast<int>(i));
    if (placed.empty()) continue;
    // Move one buffer to a random aligned offset inside the arena.
    int moved = placed[rng() % placed.size()];
    int64_t slots = std::max<int64_t>(1, (plan.arena_bytes - s.buffers[moved].bytes) / plan.alignment + 1);
    plan.offsets[moved] = static_cast<int64_t>(rng() % slots) * plan.alignment;
    bool brute_force_conflict = BruteForceConflict(s, plan).first >= 0;
    conflicts += brute_force_conflict;
    EXPECT_EQ(CheckMemoryPlan(s, plan).ok(), !brute_force_conflict) << "iteration " << iteration;
  }
  EXPECT_GT(conflicts, 50);  // the damage does produce conflicts to catch
}

TEST(MemoryPlanTest, Deterministic) {
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 50; ++iteration) {
    Schedule s = RandomSchedule(rng);
    EXPECT_EQ(MustPlan(s).offsets, MustPlan(s).offsets);
  }
}

// ---- schedules built from fusion plans

struct PlannedGraph {
  Graph graph;
  FusionPlan plan;
};

PlannedGraph PlanGraph(GraphBuilder& b, bool fuse) {
  auto built = b.Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(built).value(), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  PlannerOptions options;
  options.fuse = fuse;
  auto plan = PlanFusion(*graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return {std::move(graph).value(), std::move(plan).value()};
}

constexpr int64_t kRows = 256, kCols = 1024, kTensorBytes = kRows * kCols * 4;

// y = tanh(exp(x)) + x, with exp also a graph output when `exp_is_output`.
PlannedGraph ExpTanhAdd(bool fuse, bool exp_is_output = false) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
  Value e = b.Unary(OpCode::kExp, x);
  Value y = b.Add(b.Unary(OpCode::kTanh, e), x);
  b.Output(y, "y");
  if (exp_is_output) b.Output(e, "e");
  return PlanGraph(b, fuse);
}

TEST(MemoryPlanTest, UnfusedChainFromFusionPlan) {
  PlannedGraph g = ExpTanhAdd(/*fuse=*/false);
  Schedule s = ScheduleFromFusionPlan(g.graph, g.plan);
  ASSERT_EQ(s.steps.size(), 3u);  // exp, tanh, add
  ASSERT_EQ(s.buffers.size(), 4u);
  EXPECT_EQ(s.buffers[0].role, Role::kGraphInput);
  EXPECT_EQ(s.buffers[1].role, Role::kIntermediate);
  EXPECT_EQ(s.buffers[2].role, Role::kIntermediate);
  EXPECT_EQ(s.buffers[3].role, Role::kGraphOutput);
  for (const ScheduledBuffer& buffer : s.buffers) EXPECT_EQ(buffer.bytes, kTensorBytes);
  EXPECT_EQ(s.steps[2].reads.size(), 2u);  // tanh's result and x
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.arena_bytes, 2 * kTensorBytes);  // exp and tanh are both live at step 1
  EXPECT_EQ(plan.peak_live_bytes, 2 * kTensorBytes);
}

TEST(MemoryPlanTest, FusedPlanNeedsNoMoreThanUnfused) {
  for (bool exp_is_output : {false, true}) {
    PlannedGraph fused = ExpTanhAdd(true, exp_is_output), unfused = ExpTanhAdd(false, exp_is_output);
    auto fused_plan = PlanFusionPlanMemory(fused.graph, fused.plan);
    auto unfused_plan = PlanFusionPlanMemory(unfused.graph, unfused.plan);
    ASSERT_TRUE(fused_plan.ok() && unfused_plan.ok());
    EXPECT_EQ(fused_plan->arena_bytes, 0);  // one kernel: nothing intermediate
    EXPECT_LE(fused_plan->peak_live_bytes, unfused_plan->peak_live_bytes);
    // A graph output is the caller's, even when a later kernel reads it.
    EXPECT_EQ(unfused_plan->num_intermediates, exp_is_output ? 1 : 2);
  }
}

TEST(MemoryPlanTest, StepLocalValuesLiveDuringTheirStepOnly) {
  PlannedGraph g = ExpTanhAdd(/*fuse=*/true);
  Schedule s = ScheduleFromFusionPlan(g.graph, g.plan);
  ASSERT_EQ(s.steps.size(), 1u);
  const size_t before = s.buffers.size();  // x and y
  int x = g.graph.inputs()[0], y = g.graph.outputs()[0].node;
  std::vector<int> inner;  // exp and tanh, held by no buffer in the fused plan
  for (const Node& n : g.graph.nodes())
    if (n.id != x && n.id != y) inner.push_back(n.id);
  ASSERT_EQ(inner.size(), 2u);
  std::vector<int> local = inner;
  local.push_back(y);  // has its buffer (a graph output): keeps it
  AddStepLocalBuffers(g.graph, {local}, s);
  ASSERT_EQ(s.buffers.size(), before + 2);
  for (size_t b = before; b < s.buffers.size(); ++b) {
    EXPECT_EQ(s.buffers[b].role, Role::kIntermediate);
    EXPECT_EQ(s.buffers[b].bytes, kTensorBytes);
    EXPECT_NE(std::find(s.steps[0].writes.begin(), s.steps[0].writes.end(), static_cast<int>(b)), s.steps[0].writes.end());
  }
  MemoryPlan plan = MustPlan(s);
  EXPECT_EQ(plan.live_ranges[before].first, 0);
  EXPECT_EQ(plan.live_ranges[before].last, 0);
  EXPECT_EQ(plan.arena_bytes, 2 * kTensorBytes);  // live together, never with another step's
}

TEST(MemoryPlanTest, ConstantsAreBuffersGeneratorsAreNot) {
  // Large enough that constant folding keeps the iota (an expansion) as an op.
  constexpr int64_t kBig = 2048;
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kBig, kBig});
  Value weights = b.Constant(Tensor::Random(DType::kF32, {kBig, kBig}, 1));
  Value column = b.Iota({kBig, kBig}, 1, DType::kF32);
  Value y = b.Add(b.Mul(x, weights), b.AddScalar(column, 2.0));
  b.Output(y, "y");
  PlannedGraph g = PlanGraph(b, /*fuse=*/false);
  Schedule s = ScheduleFromFusionPlan(g.graph, g.plan);
  std::vector<Role> roles;
  for (const ScheduledBuffer& buffer : s.buffers) {
    OpCode op = g.graph.node(buffer.node).op;
    // column + 2 is recomputed by its reader: neither the iota nor the sum is stored.
    EXPECT_TRUE(op == OpCode::kParameter || op == OpCode::kConstant || op == OpCode::kMul || op == OpCode::kAdd)
        << buffer.name;
    if (op == OpCode::kConstant) {
      EXPECT_EQ(buffer.bytes, kBig * kBig * 4);
    }
    roles.push_back(buffer.role);
  }
  std::sort(roles.begin(), roles.end());
  EXPECT_EQ(roles, (std::vector<Role>{Role::kGraphInput, Role::kGraphOutput, Role::kConstant, Role::kIntermediate}));
  ASSERT_EQ(s.steps.size(), 2u);  // x * weights, then the sum
  EXPECT_EQ(MustPlan(s).arena_bytes, kBig * kBig * 4);
}

// The real exported models and the examples: both plans valid, fusion never needs more
// intermediate memory, and the numbers the report shows.
class MemoryPlanRealModelTest : public testing::TestWithParam<const char*> {};

TEST_P(MemoryPlanRealModelTest, FusedNeedsNoMoreIntermediateMemory) {
  std::string path = std::string(TILEFUSE_SOURCE_DIR) + "/" + GetParam();
  StatusOr<ImportedModel> model = ImportOnnx(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<Graph> graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  std::vector<MemoryPlan> plans;
  for (bool fuse : {true, false}) {
    PlannerOptions options;
    options.fuse = fuse;
    StatusOr<FusionPlan> fusion = PlanFusion(*graph, options);
    ASSERT_TRUE(fusion.ok()) << fusion.status().ToString();
    Schedule schedule = ScheduleFromFusionPlan(*graph, *fusion);
    plans.push_back(MustPlan(schedule));
    EXPECT_GE(plans.back().arena_bytes, plans.back().peak_live_bytes);
    std::cout << GetParam() << (fuse ? " fused:   " : " unfused: ") << DescribeMemoryPlan(plans.back()) << "\n";
  }
  EXPECT_LE(plans[0].peak_live_bytes, plans[1].peak_live_bytes);
  EXPECT_LE(plans[0].num_intermediates, plans[1].num_intermediates);
}

INSTANTIATE_TEST_SUITE_P(Models, MemoryPlanRealModelTest,
                         testing::Values("tests/models/mlp_block", "tests/models/attention_block",
                                         "tests/models/gpt2_2layer", "tests/models/llama_2layer",
                                         "examples/causal_attention.onnxtxt", "examples/layernorm_manual.onnxtxt",
                                         "examples/dropout_residual_layernorm.onnxtxt"));

}  // namespace
}  // namespace tilefuse

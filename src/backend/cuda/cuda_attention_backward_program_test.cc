// Attention's three gradients as one step of the attention backward template: how the program
// holds them (one step, the other two groups written there, scratch for the statistics), the
// kernels through NVRTC for sm_90a without spills (no GPU needed), what stays on the host and
// why, and on a GPU (skipped without one) the outputs against the f64 reference.
#include "backend/cuda/cuda_attention_backward_program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/cuda/attention_backward.h"
#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "driver/driver.h"
#include "fusion/group_classifier.h"
#include "runtime/memory_plan.h"
#include "testing/random_inputs.h"
#include "testing/reference_check.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct Call {
  DType dtype = DType::kBF16;
  int64_t batch = 2, heads = 4, kv_heads = 2, nq = 100, nk = 130, d = 64;
  bool causal = false;
  bool all_three = true;
};

// The three gradients of one call as the graph's outputs (only dQ where !all_three). The
// logsumexp is an input moved by log(nk), so the probabilities are of a softmax's size.
Graph AttentionGradGraph(const Call& c) {
  GraphBuilder b;
  Value q = b.Parameter("q", c.dtype, {c.batch, c.heads, c.nq, c.d});
  Value k = b.Parameter("k", c.dtype, {c.batch, c.kv_heads, c.nk, c.d});
  Value v = b.Parameter("v", c.dtype, {c.batch, c.kv_heads, c.nk, c.d});
  Value out = b.Parameter("out", c.dtype, {c.batch, c.heads, c.nq, c.d});
  Value dout = b.Parameter("dout", c.dtype, {c.batch, c.heads, c.nq, c.d});
  Value noise = b.Parameter("lse_noise", DType::kF32, {c.batch, c.heads, c.nq});
  Value lse = b.AddScalar(noise, std::log(static_cast<double>(c.nk)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const OpCode ops[] = {OpCode::kAttentionGradQ, OpCode::kAttentionGradK, OpCode::kAttentionGradV};
  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < (c.all_three ? 3 : 1); ++i) b.Output(b.AttentionGrad(ops[i], dout, q, k, v, out, lse, scale, c.causal), names[i]);
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(*g) : Graph{};
}

struct Built {
  Graph graph;
  CudaPlan plan;
  CudaProgram program;
};

Built Build(const Call& c) {
  Built out;
  out.graph = AttentionGradGraph(c);
  StatusOr<CudaPlan> plan = PlanFusionForCuda(out.graph, PlannerOptions{}, CudaTarget{});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return out;
  out.plan = std::move(*plan);
  StatusOr<CudaProgram> program = BuildCudaProgram(out.graph, out.plan.plan, FindInlinedGenerators(out.graph), "", {}, CudaTarget{});
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  if (program.ok()) out.program = std::move(*program);
  return out;
}

// The programs of the gradient groups, in plan order.
std::vector<const CudaGroupProgram*> GradientGroups(const Built& b) {
  std::vector<const CudaGroupProgram*> out;
  for (const CudaGroupProgram& p : b.program.groups)
    if (IsAttentionGrad(b.graph.node(b.plan.plan.groups[p.group].nodes.front()).op)) out.push_back(&p);
  return out;
}

TEST(CudaProgramAttentionBackwardTest, TheThreeGradientsAreOneStepOfThreeKernels) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Built b = Build({.causal = causal});
    std::vector<const CudaGroupProgram*> grads = GradientGroups(b);
    ASSERT_EQ(grads.size(), 3u);
    const CudaGroupProgram* head = grads.front();
    for (const CudaGroupProgram* p : grads) {
      EXPECT_EQ(p->mode, CudaGroupProgram::Mode::kAttentionBackwardTemplate) << p->why_host;
      EXPECT_EQ(p->grouped_into, p == head ? -1 : head->group);
      EXPECT_EQ(p->kernel.has_value(), p == head);
    }
    ASSERT_EQ(head->prologue.size(), 2u);
    ASSERT_TRUE(head->kernel.has_value());
    const int dq = b.graph.outputs()[0].node, dk = b.graph.outputs()[1].node, dv = b.graph.outputs()[2].node;
    EXPECT_TRUE(head->prologue[0].outputs.empty());
    EXPECT_EQ(head->prologue[1].outputs, (std::vector<int>{dk, dv}));
    EXPECT_EQ(head->kernel->outputs, std::vector<int>{dq});
    // The statistics and the dQ accumulator in scratch memory, past the split kernels' counters.
    AttentionBackwardProblem problem{.heads = 8, .group = 2, .nq = 100, .nk = 130, .d = 64};
    for (const CudaLaunchable* k : Launchables(*head))
      EXPECT_EQ(k->source.launch.scratch_bytes, kScratchCounterBytes + AttentionBackwardScratchBytes(problem)) << k->source.name;
    // dK and dV are written at the head's step, and the memory plan holds.
    Schedule schedule = ScheduleFromFusionPlan(b.graph, b.plan.plan);
    WriteGroupedOutputsAtTheirKernel(b.program, schedule);
    const std::vector<int>& writes = schedule.steps.at(head->group).writes;
    for (int node : {dq, dk, dv})
      EXPECT_EQ(std::count_if(writes.begin(), writes.end(), [&](int buffer) { return schedule.buffers[buffer].node == node; }), 1) << node;
    EXPECT_TRUE(PlanMemory(schedule).ok());
  }
}

// The three gradients reading copies of one reshaped logsumexp (as a pass may give each reader
// its own) are still one call, one step, reading the step's own group's copy (the others' may
// be computed later).
TEST(CudaProgramAttentionBackwardTest, OperandsReshapedApartAreStillOneCall) {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {1, 2, 64, 64});
  Value lse = b.Parameter("lse", DType::kF32, {1, 2, 64, 1});
  // dK first: its group is the step's, dQ's copy is made after it.
  const OpCode ops[] = {OpCode::kAttentionGradK, OpCode::kAttentionGradQ, OpCode::kAttentionGradV};
  for (OpCode op : ops) b.Output(b.AttentionGrad(op, q, q, q, q, q, b.Reshape(lse, {1, 2, 64}), 0.125, true), std::string(OpName(op)));
  StatusOr<Graph> graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  StatusOr<CudaPlan> plan = PlanFusionForCuda(*graph, PlannerOptions{}, CudaTarget{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  StatusOr<CudaProgram> program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, CudaTarget{});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const CudaGroupProgram* head = nullptr;
  for (const CudaGroupProgram& p : program->groups)
    if (p.mode == CudaGroupProgram::Mode::kAttentionBackwardTemplate && p.kernel) head = &p;
  ASSERT_NE(head, nullptr);
  const Node& head_node = graph->node(plan->plan.groups[head->group].nodes.front());
  const LaunchArg& lse_read = head->prologue[0].source.launch.args[2];  // prepare(out, dout, lse, ...)
  EXPECT_EQ(head_node.op, OpCode::kAttentionGradK);
  EXPECT_EQ(lse_read.node, head_node.inputs[5]);
  int grouped = 0;
  for (const CudaGroupProgram& p : program->groups) grouped += p.grouped_into == head->group;
  EXPECT_EQ(grouped, 2);
}

TEST(CudaProgramAttentionBackwardTest, KernelsCompileForSm90aWithoutSpills) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  for (const Call& call : {Call{.causal = true}, Call{.dtype = DType::kF16, .kv_heads = 4, .d = 128}}) {
    Built b = Build(call);
    std::vector<CudaKernelSource> sources;
    for (const CudaGroupProgram* p : GradientGroups(b))
      for (const CudaLaunchable* k : Launchables(*p)) sources.push_back(k->source);
    ASSERT_EQ(sources.size(), 3u);
    auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(sources), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubins->PtxasLog());
    ASSERT_EQ(report.size(), 3u);
    for (const PtxasKernelInfo& k : report) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
}

// What the template does not take stays off it, saying why (the pipeline rewrites such calls
// into primitives first: passes/attention_grads.h).
TEST(CudaProgramAttentionBackwardTest, CallsTheTemplateDoesNotTakeSayWhy) {
  const std::pair<Call, const char*> cases[] = {
      {Call{.dtype = DType::kF32}, "f32 operands"},
      {Call{.d = 96}, "head dim 96"},
      {Call{.all_three = false}, "not all three"},
  };
  for (const auto& [call, why] : cases) {
    SCOPED_TRACE(why);
    Built b = Build(call);
    std::vector<const CudaGroupProgram*> grads = GradientGroups(b);
    ASSERT_FALSE(grads.empty());
    for (const CudaGroupProgram* p : grads) {
      EXPECT_EQ(p->mode, CudaGroupProgram::Mode::kHost);
      EXPECT_NE(p->why_host.find(why), std::string::npos) << p->why_host;
    }
  }
}

// On a GPU: dQ, dK and dV against the f64 reference on random operands (outputs poisoned
// first), full and causal, grouped-query heads, ragged query and key blocks.
TEST(CudaProgramAttentionBackwardTest, GradientsMatchTheReferenceOnAGpu) {
  if (!CudaDevice::Get().ok()) GTEST_SKIP() << "no GPU: the attention backward step not run (scripts/gpu-check.sh runs it)";
  for (const Call& call : {Call{}, Call{.causal = true}, Call{.dtype = DType::kF16, .kv_heads = 4, .nq = 64, .nk = 64, .d = 128, .causal = true}}) {
    SCOPED_TRACE(testing::Message() << DTypeName(call.dtype) << " d" << call.d << (call.causal ? " causal" : ""));
    Graph graph = AttentionGradGraph(call);
    CudaCompileOptions options;
    options.poison_outputs = true;
    auto compiled = CompileForCuda(graph, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    const std::vector<Tensor> inputs = RandomInputs(graph, 7);
    ExpectMatchesReference(graph, inputs, (*compiled)->Run(inputs));
  }
}

}  // namespace
}  // namespace tilefuse

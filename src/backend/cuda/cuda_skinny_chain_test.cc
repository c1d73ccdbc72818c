// Two skinny products in one kernel (codegen/cuda/cuda_skinny_chain_emitter.h; off unless
// TILEFUSE_SKINNY_CHAINS=1): a decode step's MLP planned and lowered for the GPU and compiled by
// NVRTC (no GPU needed). The GPU run against the reference is bench/experiments/decode_folds.sh's
// checks stage (tests/gemm/gemm_skinny_*mlp_decode*.onnxtxt with the switch).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_program_test_util.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_skinny_chain_emitter.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "runtime/memory_plan.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct Mlp {
  int64_t rows = 1, hidden = 768, inner = 3072;
  bool norm = true;             // a layer norm before the first product
  bool h_returned = false;      // the GELU's output also a graph output
};

// GPT-2's MLP at a decode step: y = gelu(LN(x)·W1 + b1)·W2 + b2 + x.
Graph DecodeMlp(const Mlp& m) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {m.rows, m.hidden});
  Value a = x;
  if (m.norm) a = b.LayerNorm(x, b.Parameter("gamma", DType::kBF16, {m.hidden}), b.Parameter("beta", DType::kBF16, {m.hidden}), 1, 1e-5);
  Value w1 = b.Parameter("w1", DType::kBF16, {m.hidden, m.inner});
  Value b1 = b.Parameter("b1", DType::kBF16, {m.inner});
  Value h = b.Gelu(b.Add(b.MatMul(a, w1), b.BroadcastTo(b1, {m.rows, m.inner})), /*approximate_tanh=*/true);
  Value w2 = b.Parameter("w2", DType::kBF16, {m.inner, m.hidden});
  Value b2 = b.Parameter("b2", DType::kBF16, {m.hidden});
  b.Output(b.Add(b.Add(b.MatMul(h, w2), b.BroadcastTo(b2, {m.rows, m.hidden})), x), "y");
  if (m.h_returned) b.Output(h, "h");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

CudaProgram Lower(const Graph& g, bool chains) {
  CudaTarget target;
  target.overrides.skinny_chains = chains;
  return LowerForTest(g, target);
}

TEST(CudaSkinnyChainTest, ADecodeMlpIsOneKernel) {
  for (bool norm : {true, false}) {
    SCOPED_TRACE(norm ? "normed" : "no norm");
    const Graph g = DecodeMlp({.norm = norm});
    EXPECT_EQ(KernelSources(Lower(g, false)).size(), 2u) << "two skinny products";
    const CudaProgram program = Lower(g, true);
    const std::vector<CudaKernelSource> chained = KernelSources(program);
    ASSERT_EQ(chained.size(), 1u);
    const CudaKernelSource& k = chained.front();
    EXPECT_NE(k.strategy.find("skinny chain template"), std::string::npos) << k.strategy;
    EXPECT_EQ(k.strategy.find("layer norm") != std::string::npos, norm) << k.strategy;
    EXPECT_EQ(k.work_blocks, 3072 / 64);
    EXPECT_EQ(k.threads, 256);
    EXPECT_GT(k.launch.scratch_bytes, 48 * 768 * 4) << "every CTA's partials";
    EXPECT_NE(k.function.find("kN2 = 768"), std::string::npos) << k.function;
    EXPECT_NE(k.function.find("tf::GemmSkinnyChainSm90<Config>"), std::string::npos) << k.function;
    // The second product's group keeps no kernel; its output is written at the chain's step.
    int grouped = 0;
    for (const CudaGroupProgram& p : program.groups) grouped += p.grouped_into >= 0 && !p.kernel;
    EXPECT_EQ(grouped, 1);
    const CudaLaunchable& launchable = *std::find_if(program.groups.begin(), program.groups.end(), [&](const CudaGroupProgram& p) {
                                          return p.kernel && p.kernel->source.name == chained.front().name;
                                        })->kernel;
    ASSERT_EQ(launchable.outputs.size(), 1u);
    EXPECT_EQ(launchable.outputs[0], g.outputs()[0].node) << "y";
    // The GELU's output is never stored: no kernel names it, no step writes or reads it, and
    // the memory plan (y written at the chain's step) holds.
    int h = -1;
    for (const Node& n : g.nodes())
      if (n.op == OpCode::kMatMul && n.inputs[0] != g.inputs()[0]) h = n.inputs[0];
    ASSERT_GE(h, 0);
    EXPECT_EQ(std::count(launchable.buffer_nodes.begin(), launchable.buffer_nodes.end(), h), 0);
    StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, CudaTarget{});
    ASSERT_TRUE(plan.ok());
    Schedule schedule = ScheduleFromFusionPlan(g, plan->plan);
    WriteGroupedOutputsAtTheirKernel(program, schedule);
    std::vector<std::vector<int>> touched(program.groups.size());
    for (const CudaGroupProgram& p : program.groups)
      if (p.kernel)
        for (int node : GraphValuesOf(p.kernel->source.launch))
          for (size_t b = 0; b < schedule.buffers.size(); ++b)
            if (schedule.buffers[b].node == node) touched[static_cast<size_t>(p.group)].push_back(static_cast<int>(b));
    AddStepReads(touched, schedule);
    for (const ScheduleStep& step : schedule.steps)
      for (int b : step.reads) EXPECT_NE(schedule.buffers[static_cast<size_t>(b)].node, h) << "h read";
    const Status planned = PlanMemory(schedule).status();
    EXPECT_TRUE(planned.ok()) << planned.ToString();
  }
}

TEST(CudaSkinnyChainTest, OffUnlessAsked) { EXPECT_FALSE(CudaTarget{}.overrides.skinny_chains); }

TEST(CudaSkinnyChainTest, ProductsItDoesNotTakeKeepTheirKernels) {
  EXPECT_EQ(KernelSources(Lower(DecodeMlp({.h_returned = true}), true)).size(), 2u) << "the GELU's output is also returned";
  EXPECT_EQ(KernelSources(Lower(DecodeMlp({.hidden = 2048, .inner = 5632}), true)).size(), 2u) << "N2 past 768 and K1 past shared memory";
  EXPECT_EQ(KernelSources(Lower(DecodeMlp({.rows = 24}), true)).size(), 3u) << "24 rows: the norm and both products apart";
  CudaTarget few_sms;  // 48 CTAs that wait for each other need 48 SMs
  few_sms.overrides.skinny_chains = true;
  few_sms.sm_count = 40;
  const Graph g = DecodeMlp({});
  StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, few_sms);
  ASSERT_TRUE(plan.ok());
  StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, few_sms);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  EXPECT_EQ(KernelSources(*program).size(), 2u) << "40 SMs";
}

TEST(CudaSkinnyChainTest, CompilesForHopperWithoutSpills) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  for (const Mlp& m : {Mlp{}, Mlp{.rows = 5, .norm = false}, Mlp{.rows = 16}}) {
    const std::vector<CudaKernelSource> kernels = KernelSources(Lower(DecodeMlp(m), true));
    ASSERT_EQ(kernels.size(), 1u) << m.rows;
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
}

}  // namespace
}  // namespace tilefuse

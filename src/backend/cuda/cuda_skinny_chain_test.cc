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
    // The rule's form: a pair of CTAs a 64-column block, each half of K1 and of N2.
    EXPECT_EQ(k.work_blocks, 2 * 3072 / 64);
    EXPECT_EQ(k.launch.cluster, (std::array<int, 3>{2, 1, 1}));
    EXPECT_NE(k.strategy.find("in pairs"), std::string::npos) << k.strategy;
    EXPECT_EQ(k.threads, 256);
    EXPECT_GT(k.launch.scratch_bytes, 48 * 768 * 4) << "every block's partials";
    EXPECT_NE(k.function.find("kN2 = 768"), std::string::npos) << k.function;
    EXPECT_NE(k.function.find("kPair = 1"), std::string::npos) << k.function;
    EXPECT_NE(k.function.find("kStages = 6"), std::string::npos) << "half of K1's 12 steps: " << k.function;
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
    std::vector<std::vector<int>> touched(program.groups.size());  // the nodes each kernel's arguments name (AddStepReads)
    for (const CudaGroupProgram& p : program.groups)
      if (p.kernel) touched[static_cast<size_t>(p.group)] = GraphValuesOf(p.kernel->source.launch);
    AddStepReads(touched, schedule);
    for (const ScheduleStep& step : schedule.steps)
      for (int b : step.reads) EXPECT_NE(schedule.buffers[static_cast<size_t>(b)].node, h) << "h read";
    const Status planned = PlanMemory(schedule).status();
    EXPECT_TRUE(planned.ok()) << planned.ToString();
  }
}

// The chain's launchable in `program` (its only kernel).
const CudaLaunchable& ChainOf(const CudaProgram& program) {
  const auto it = std::find_if(program.groups.begin(), program.groups.end(), [](const CudaGroupProgram& p) { return p.kernel.has_value(); });
  EXPECT_NE(it, program.groups.end());
  return *it->kernel;
}

TEST(CudaSkinnyChainTest, TheWholeFormIsTheTunersOtherChoice) {
  const CudaProgram program = Lower(DecodeMlp({}), true);
  const CudaLaunchable& chain = ChainOf(program);
  ASSERT_TRUE(chain.template_kernel);
  const std::vector<nlohmann::json> forms = chain.template_kernel->SearchSpace(132);
  ASSERT_EQ(forms.size(), 2u);
  EXPECT_EQ(forms[0], (nlohmann::json{{"pair", true}})) << "the rule's first";
  EXPECT_EQ(forms[1], (nlohmann::json{{"pair", false}}));
  StatusOr<CudaKernelSource> whole = chain.template_kernel->Emit("whole", forms[1], 132);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->work_blocks, 3072 / 64);
  EXPECT_EQ(whole->launch.cluster, (std::array<int, 3>{1, 1, 1}));
  EXPECT_NE(whole->function.find("kPair = 0"), std::string::npos);
  EXPECT_NE(whole->function.find("kStages = 12"), std::string::npos);
  EXPECT_GT(whole->launch.dynamic_shared_bytes, 200 * 1024) << "both weights' tiles whole";
  EXPECT_LT(chain.source.launch.dynamic_shared_bytes, 120 * 1024) << "a pair's CTA holds half: it fits beside a CTA of the kernel ahead";
  EXPECT_FALSE(chain.template_kernel->Emit("bad", {{"pairs", 2}}, 132).ok()) << "an unknown key";
  // 96 CTAs in pairs on 64 SMs: more than fit at once (they wait for each other); the whole form's 48 do.
  EXPECT_FALSE(chain.template_kernel->Emit("few", forms[0], 64).ok());
  EXPECT_TRUE(chain.template_kernel->Emit("few", forms[1], 64).ok());
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
    const CudaProgram program = Lower(DecodeMlp(m), true);
    std::vector<CudaKernelSource> kernels = KernelSources(program);
    ASSERT_EQ(kernels.size(), 1u) << m.rows;
    StatusOr<CudaKernelSource> whole = ChainOf(program).template_kernel->Emit(kernels[0].name + "_whole", {{"pair", false}}, 132);
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    kernels.push_back(*whole);  // both forms: the pair (the rule's) and the whole
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
}

}  // namespace
}  // namespace tilefuse

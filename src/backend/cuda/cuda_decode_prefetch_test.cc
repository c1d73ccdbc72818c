// A decode step's prefetches, each behind a switch of the target's overrides that must reach
// the kernel's text: the decode attention's keys and values prefetched to L2 before its wait
// for the grid ahead (decode_prefetch, TILEFUSE_DECODE_PREFETCH=0 off), a skinny product's
// epilogue loads asked of L1 as its consumers start (skinny_prefetch, TILEFUSE_SKINNY_PREFETCH=0
// off), and the kernel behind released before a kernel's wait (trigger_before_wait,
// TILEFUSE_TRIGGER_FIRST=1 on). Lowered for the GPU without one.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/device_test_util.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_program_test_util.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// One query row a head over 200 cached keys: softmax(q · kᵀ / 8) · v.
Graph DecodeAttention() {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {1, 12, 1, 64});
  Value k = b.Parameter("k", DType::kBF16, {1, 12, 200, 64});
  Value v = b.Parameter("v", DType::kBF16, {1, 12, 200, 64});
  Value probs = b.Softmax(b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 0.125), -1);
  b.Output(b.MatMul(probs, v), "out");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

std::string AttentionText(const Graph& g, const CudaTarget& target) {
  const CudaProgram program = LowerForTest(g, target);
  for (const CudaGroupProgram& p : program.groups)
    for (const CudaLaunchable* k : Launchables(p))
      if (k->source.function.find("tf::AttentionDecode<Config>") != std::string::npos) return k->source.function;
  ADD_FAILURE() << "no decode attention kernel";
  return "";
}

TEST(CudaDecodePrefetchTest, TheTargetsSwitchReachesTheDecodeAttention) {
  const Graph g = DecodeAttention();
  CudaTarget target;
  EXPECT_NE(AttentionText(g, target).find("tf::AttentionDecodePrefetch<Config>"), std::string::npos) << "on by default";
  target.overrides.decode_prefetch = false;
  const std::string off = AttentionText(g, target);
  EXPECT_EQ(off.find("Prefetch"), std::string::npos) << off;
  EXPECT_NE(off.find("tf::tf_await_prior_grid();"), std::string::npos) << off;
}

// One token's row through a linear layer with its bias and the residual: the skinny template's.
TEST(CudaDecodePrefetchTest, TheTargetsSwitchReachesTheSkinnyProducts) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {1, 768});
  Value w = b.Parameter("w", DType::kBF16, {768, 768});
  Value bias = b.Parameter("bias", DType::kBF16, {768});
  b.Output(b.Add(b.Add(b.MatMul(x, w), bias), x), "y");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  StatusOr<Graph> g = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto skinny_text = [&](const CudaTarget& target) -> std::string {
    const CudaProgram program = LowerForTest(*g, target);
    for (const CudaGroupProgram& p : program.groups)
      for (const CudaLaunchable* k : Launchables(p))
        if (k->source.function.find("tf::GemmSkinnySm90<Config>") != std::string::npos) return k->source.function;
    ADD_FAILURE() << "no skinny product";
    return "";
  };
  CudaTarget target;
  const std::string on = skinny_text(target);
  EXPECT_NE(on.find("kPrefetchEpilogue = 1"), std::string::npos) << "on by default:\n" << on;
  EXPECT_NE(on.find("void Prefetch("), std::string::npos) << on;
  target.overrides.skinny_prefetch = false;
  const std::string off = skinny_text(target);
  EXPECT_NE(off.find("kPrefetchEpilogue = 0"), std::string::npos) << off;
  EXPECT_EQ(off.find("void Prefetch("), std::string::npos) << off;
}

// The switch reaches every kernel's unit (its first line defines TF_TRIGGER_BEFORE_WAIT, which
// puts launch_dependents before the wait) and its entry's name, and the unit compiles for sm_90a.
TEST(CudaDecodePrefetchTest, TheTargetsSwitchReleasesTheKernelBehindFirst) {
  const Graph g = DecodeAttention();
  auto units = [&](bool first) {
    CudaTarget target;
    target.overrides.trigger_before_wait = first;
    return SplitIntoCompileUnits(KernelSources(LowerForTest(g, target)));
  };
  const std::vector<CudaCompileUnit> off = units(false), on = units(true);
  ASSERT_EQ(off.size(), on.size());
  ASSERT_FALSE(on.empty());
  for (size_t u = 0; u < on.size(); ++u) {
    EXPECT_EQ(off[u].source.find("TF_TRIGGER_BEFORE_WAIT"), std::string::npos);
    EXPECT_NE(on[u].source.find("#define TF_TRIGGER_BEFORE_WAIT 1\n"), std::string::npos) << on[u].source.substr(0, 300);
    EXPECT_NE(on[u].entry, off[u].entry);
  }
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, on, "sm_90a");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
}

}  // namespace
}  // namespace tilefuse

// Loop kernels of a model with symbolic dims print the sizes derived from them over launch
// parameters: the same kernel text, so the same compiled unit, at every binding that makes
// the same code decisions. Needs NVRTC for the compile check, no GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "api/backend_setup.h"
#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// x [batch, seq, 64] through a layer norm, GELU, a residual and a softmax over the 64
// features, plus a position's iota added along seq: the loop kernels of a transformer's
// non-product part. Bound at `batch`, `seq`.
Graph NormAndActivation(int64_t batch, int64_t seq) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {batch, seq, 64});
  Value scale = b.Parameter("scale", DType::kF32, {64});
  Value normed = b.LayerNorm(x, scale, Value{}, 2, 1e-5);
  Value positions = b.Cast(b.Iota({1, seq, 1}, 1, DType::kI64), DType::kF32);
  Value y = b.Add(b.Gelu(normed, false), b.Mul(x, b.BroadcastTo(positions, {batch, seq, 64})));
  b.Output(b.Softmax(y, 2), "y");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().message();
  g->set_symbolic_inputs({{{"x", {"batch", "seq", ""}}}, {{"batch", batch}, {"seq", seq}}});
  return std::move(*g);
}

std::vector<CudaKernelSource> Kernels(Graph graph) {
  StatusOr<Graph> passed = RunGraphPasses(std::move(graph), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().message();
  CudaTarget target;
  StatusOr<CudaPlan> plan = PlanFusionForCuda(*passed, PlannerOptions{}, target);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  StatusOr<CudaProgram> program = BuildCudaProgram(*passed, plan->plan, FindInlinedGenerators(*passed), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().message();
  std::vector<CudaKernelSource> sources;
  for (const CudaGroupProgram& g : program->groups)
    for (const CudaLaunchable* k : Launchables(g)) sources.push_back(k->source);
  return sources;
}

std::set<std::string> UnitSources(const std::vector<CudaKernelSource>& kernels) {
  std::set<std::string> units;
  for (const CudaCompileUnit& u : SplitIntoCompileUnits(kernels)) units.insert(u.source);
  return units;
}

TEST(CudaSymbolicSizesTest, LoopKernelsAreTheSameTextAtEveryBinding) {
  const std::vector<CudaKernelSource> first = Kernels(NormAndActivation(2, 24));
  ASSERT_FALSE(first.empty());
  for (const CudaKernelSource& k : first) {
    EXPECT_NE(k.function.find("const long long tf_sym"), std::string::npos) << k.function;
    // The binding's values travel as the launch's scalars, after the buffers.
    std::vector<int64_t> scalars;
    for (const LaunchArg& a : k.launch.args)
      if (a.kind == LaunchArg::Kind::kScalar) scalars.push_back(a.scalar);
    EXPECT_FALSE(scalars.empty()) << k.name;
    for (int64_t s : scalars) EXPECT_TRUE(s == 2 || s == 24) << k.name << ": " << s;
  }
  for (auto [batch, seq] : {std::pair<int64_t, int64_t>{3, 24}, {5, 40}, {16, 128}})
    EXPECT_EQ(UnitSources(Kernels(NormAndActivation(batch, seq))), UnitSources(first)) << batch << " x " << seq;
}

TEST(CudaSymbolicSizesTest, WithoutSymbolsTheSizesAreLiterals) {
  Graph bound = NormAndActivation(2, 24);
  bound.set_symbolic_inputs({});
  const std::vector<CudaKernelSource> kernels = Kernels(std::move(bound));
  ASSERT_FALSE(kernels.empty());
  for (const CudaKernelSource& k : kernels) EXPECT_EQ(k.function.find("tf_sym"), std::string::npos) << k.function;
  // ... and the kernels differ from another binding's: what the symbols save.
  Graph other = NormAndActivation(3, 24);
  other.set_symbolic_inputs({});
  EXPECT_NE(UnitSources(Kernels(std::move(other))), UnitSources(kernels));
}

TEST(CudaSymbolicSizesTest, SymbolicKernelsCompileForHopper) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(Kernels(NormAndActivation(2, 24))), "sm_90a");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
}

}  // namespace
}  // namespace tilefuse

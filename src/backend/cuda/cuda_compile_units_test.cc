// Compile units: one per distinct kernel, cached per unit, compiled in parallel. NVRTC is
// needed (not a GPU) for all but the splitting; loading the cubins and launching through
// them needs a GPU (cuda_executable_test and scripts/gpu-check.sh run every model that way).
#include "backend/cuda/cuda_compile_units.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <set>

#include "backend/cuda/cuda_backend.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

CudaKernelSource Kernel(const std::string& name, const std::string& statement) {
  CudaKernelSource k;
  k.name = name;
  k.function = "extern \"C\" __global__ void " + name + "(float* __restrict__ b0) {\n  " + statement + "\n}\n";
  return k;
}

// A kernel cache of the test's own, removed at the end.
class CompileUnitsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tilefuse_units_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    cache_dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(cache_dir_, ec);
  }
  // A fresh compiler on the test's cache, as a new process would have.
  std::optional<NvrtcCompiler> Nvrtc() {
    StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(cache_dir_);
    if (!nvrtc.ok()) return std::nullopt;
    return std::move(nvrtc).value();
  }
  int CacheEntries() const {
    int entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(cache_dir_ + "/v1")) {
      EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos) << "a half-written insert: " << e.path();
      ++entries;
    }
    return entries;
  }
  std::string cache_dir_;
};

#define NVRTC_OR_SKIP(name)                                              \
  std::optional<NvrtcCompiler> name = Nvrtc();                           \
  if (!name) GTEST_SKIP() << "NVRTC not available: units not compiled"

TEST(SplitIntoCompileUnitsTest, IdenticalKernelsShareAUnitNamedByWhatTheyCompute) {
  std::vector<CudaCompileUnit> units = SplitIntoCompileUnits({
      Kernel("tf_group1_pointwise", "b0[threadIdx.x] *= 2.0f;"),
      Kernel("tf_group2_row_reduction", "b0[threadIdx.x] += 1.0f;"),
      Kernel("tf_group3_pointwise", "b0[threadIdx.x] *= 2.0f;"),       // as group 1
      Kernel("g1_tf_group1_pointwise", "b0[threadIdx.x] *= 2.0f;"),    // another graph's, as group 1
      Kernel("tf_group1_pointwise", "b0[threadIdx.x] *= 2.0f;"),       // listed twice
  });
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].kernels, (std::vector<std::string>{"tf_group1_pointwise", "tf_group3_pointwise", "g1_tf_group1_pointwise"}));
  EXPECT_EQ(units[1].kernels, std::vector<std::string>{"tf_group2_row_reduction"});
  EXPECT_EQ(units[0].entry.rfind("tf_pointwise_", 0), 0u) << units[0].entry;
  EXPECT_EQ(units[1].entry.rfind("tf_row_reduction_", 0), 0u) << units[1].entry;
  // The unit defines its entry, and no kernel's own name.
  EXPECT_NE(units[0].source.find("void " + units[0].entry + "("), std::string::npos) << units[0].source;
  EXPECT_EQ(units[0].source.find("tf_group"), std::string::npos) << units[0].source;
}

TEST(SplitIntoCompileUnitsTest, NamesTheKernelPrefixesAreRenamedWithIt) {
  // Each layer's attention kernel names its own block tables after itself; identical tables
  // must not keep identical kernels apart (GPT-2's 12 attention layers: one unit, not 12).
  auto with_table = [](const std::string& name, const std::string& values) {
    CudaKernelSource k = Kernel(name, "b0[0] = " + name + "_table[threadIdx.x];");
    k.function = "static __device__ const float " + name + "_table[] = {" + values + "};\n" + k.function;
    return k;
  };
  std::vector<CudaCompileUnit> units = SplitIntoCompileUnits({with_table("tf_group2_attention", "1, 2"),
                                                              with_table("tf_group9_attention", "1, 2"),
                                                              with_table("tf_group16_attention", "3, 4")});
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].kernels, (std::vector<std::string>{"tf_group2_attention", "tf_group9_attention"}));
  EXPECT_NE(units[0].source.find(units[0].entry + "_table[]"), std::string::npos) << units[0].source;
  EXPECT_EQ(units[0].source.find("tf_group"), std::string::npos) << units[0].source;
  // A name that merely ends like the kernel's is another identifier, and stays.
  units = SplitIntoCompileUnits({Kernel("tf_group1_gemm", "constexpr int x_tf_group1_gemm = 4; b0[0] = x_tf_group1_gemm;")});
  ASSERT_EQ(units.size(), 1u);
  EXPECT_NE(units[0].source.find("x_tf_group1_gemm = 4"), std::string::npos) << units[0].source;
}

TEST(SplitIntoCompileUnitsTest, TunerVariantsKeepTheirKind) {
  std::vector<CudaCompileUnit> units = SplitIntoCompileUnits(
      {Kernel("tf_group4_gemm_prologue1_variant3", "b0[1] = 3.0f;"), Kernel("custom", "b0[2] = 1.0f;")});
  ASSERT_EQ(units.size(), 2u);
  EXPECT_EQ(units[0].entry.rfind("tf_gemm_prologue_", 0), 0u) << units[0].entry;
  EXPECT_EQ(units[1].entry.rfind("tf_kernel_", 0), 0u) << units[1].entry;
}

TEST(NvrtcThreadsTest, TheEnvironmentSetsItAndUnitsBoundIt) {
  setenv("TILEFUSE_NVRTC_THREADS", "1", 1);
  EXPECT_EQ(NvrtcThreads(40), 1);
  setenv("TILEFUSE_NVRTC_THREADS", "6", 1);
  EXPECT_EQ(NvrtcThreads(40), 6);
  EXPECT_EQ(NvrtcThreads(3), 3);
  EXPECT_EQ(NvrtcThreads(0), 1);
  unsetenv("TILEFUSE_NVRTC_THREADS");
  EXPECT_GE(NvrtcThreads(1000), 1);
  EXPECT_LE(NvrtcThreads(1000), 32);
}

TEST_F(CompileUnitsTest, ASecondCompileFindsEveryUnitInTheCache) {
  NVRTC_OR_SKIP(first);
  std::vector<CudaKernelSource> kernels;
  for (int i = 0; i < 6; ++i) kernels.push_back(Kernel(fmt::format("tf_group{}_pointwise", i), fmt::format("b0[threadIdx.x] += {}.0f;", i % 4)));
  StatusOr<CudaCubins> cold = CompileUnits(*first, SplitIntoCompileUnits(kernels), "sm_90a");
  ASSERT_TRUE(cold.ok()) << cold.status().ToString();
  EXPECT_EQ(cold->units.size(), 4u) << "kernels 4 and 5 are kernels 0 and 1";
  EXPECT_EQ(cold->compiles, 4);
  EXPECT_EQ(first->compiles(), 4);
  NVRTC_OR_SKIP(second);
  StatusOr<CudaCubins> warm = CompileUnits(*second, SplitIntoCompileUnits(kernels), "sm_90a");
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_EQ(warm->compiles, 0);
  EXPECT_EQ(warm->cache_hits(), 4);
  EXPECT_EQ(second->cache_hits(), 4);
  for (size_t u = 0; u < warm->units.size(); ++u) EXPECT_EQ(warm->cubins[u].cubin, cold->cubins[u].cubin);
}

TEST_F(CompileUnitsTest, AChangedKernelRecompilesOnlyItsUnit) {
  NVRTC_OR_SKIP(nvrtc);
  std::vector<CudaKernelSource> kernels = {Kernel("tf_group0_pointwise", "b0[0] = 1.0f;"), Kernel("tf_group1_pointwise", "b0[1] = 2.0f;"),
                                           Kernel("tf_group2_pointwise", "b0[2] = 3.0f;")};
  ASSERT_TRUE(CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a").ok());
  kernels[1] = Kernel("tf_group1_pointwise", "b0[1] = 5.0f;");
  StatusOr<CudaCubins> again = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->compiles, 1);
  EXPECT_FALSE(again->cubins[1].from_cache);
  EXPECT_TRUE(again->cubins[0].from_cache && again->cubins[2].from_cache);
  // Another graph's identical kernel under another name: nothing to compile.
  StatusOr<CudaCubins> renamed = CompileUnits(*nvrtc, SplitIntoCompileUnits({Kernel("g7_tf_group9_pointwise", "b0[2] = 3.0f;")}), "sm_90a");
  ASSERT_TRUE(renamed.ok()) << renamed.status().ToString();
  EXPECT_EQ(renamed->compiles, 0);
}

// Each cubin defines its unit's entry (what the loader looks up in that unit's module), and
// ptxas's report names every kernel, shared units' once per kernel.
TEST_F(CompileUnitsTest, EveryKernelIsFoundInItsUnitsCubinAndReport) {
  NVRTC_OR_SKIP(nvrtc);
  StatusOr<CudaCubins> cubins = CompileUnits(
      *nvrtc, SplitIntoCompileUnits({Kernel("tf_group0_pointwise", "b0[0] = 1.0f;"), Kernel("tf_group1_reduction", "b0[1] = 2.0f;"),
                                     Kernel("tf_group2_pointwise", "b0[0] = 1.0f;")}),
      "sm_90a");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
  ASSERT_EQ(cubins->units.size(), 2u);
  for (size_t u = 0; u < 2; ++u) {
    EXPECT_NE(cubins->cubins[u].cubin.find(cubins->units[u].entry), std::string::npos) << "the cubin's symbols hold its entry";
    EXPECT_EQ(cubins->cubins[u].cubin.find(cubins->units[1 - u].entry), std::string::npos) << "and not the other unit's";
  }
  std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubins->PtxasLog());
  std::vector<std::string> names;
  for (const PtxasKernelInfo& k : report) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tf_group0_pointwise", "tf_group2_pointwise", "tf_group1_reduction"})) << cubins->PtxasLog();
  EXPECT_GT(cubins->bytes(), 0);
}

TEST_F(CompileUnitsTest, AFailingUnitNamesItsKernelsAndLeavesNothingInTheCache) {
  NVRTC_OR_SKIP(nvrtc);
  std::vector<CudaKernelSource> kernels = {Kernel("tf_group0_pointwise", "b0[0] = 1.0f;"), Kernel("tf_group1_pointwise", "b0[1] = undeclared;"),
                                           Kernel("tf_group2_pointwise", "b0[1] = undeclared;")};
  StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
  ASSERT_FALSE(cubins.ok());
  const std::string& message = cubins.status().message();
  EXPECT_NE(message.find("kernel tf_group1_pointwise (and 1 identical kernels)"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared"), std::string::npos) << "NVRTC's log: " << message;
  EXPECT_EQ(CacheEntries(), 2) << "the good unit's cubin and report, nothing of the bad one";
  // Alone, each unit gets its own answer: the bad one sinks no other.
  std::vector<StatusOr<CubinResult>> each = CompileEachUnit(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
  ASSERT_EQ(each.size(), 2u);
  EXPECT_TRUE(each[0].ok() && each[0]->from_cache);
  EXPECT_FALSE(each[1].ok());
}

// Many units on several threads into one cache: every one compiled once and counted once.
TEST_F(CompileUnitsTest, ParallelCompilesShareTheCompilerSafely) {
  NVRTC_OR_SKIP(nvrtc);
  setenv("TILEFUSE_NVRTC_THREADS", "4", 1);
  std::vector<CudaKernelSource> kernels;
  for (int i = 0; i < 12; ++i) kernels.push_back(Kernel(fmt::format("tf_group{}_pointwise", i), fmt::format("b0[{}] = 1.0f;", i)));
  StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
  unsetenv("TILEFUSE_NVRTC_THREADS");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
  EXPECT_EQ(cubins->compiles, 12);
  EXPECT_EQ(nvrtc->compiles(), 12);
  EXPECT_EQ(CacheEntries(), 24);
}

// Through the backend: a model's second build compiles nothing, and its identical layers
// share units.
TEST_F(CompileUnitsTest, TheBackendBuildsAModelPerUnit) {
  NVRTC_OR_SKIP(probe);
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/gpt2_2layer");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CudaCompileOptions options;
  options.cache_dir = cache_dir_;
  int64_t units = 0;
  for (int round = 0; round < 2; ++round) {
    auto backend = CudaBackend::ForArch("sm_90a", options);
    ASSERT_TRUE(backend.ok()) << backend.status().ToString();
    auto built = BuildGraphs(**backend, {*graph}, options);
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    const CudaCubins& cubins = CudaBackend::CubinsOf(*built->code);
    size_t kernels = 0;
    for (const CudaCompileUnit& u : cubins.units) kernels += u.kernels.size();
    EXPECT_LT(cubins.units.size(), kernels) << "the two layers' kernels are the same kernels";
    if (round == 0) units = cubins.compiles;
    else EXPECT_EQ(cubins.compiles, 0) << "the second build is all cache hits";
  }
  EXPECT_GT(units, 0);
}

// CudaCompileOptions::background_compile: a GEMM whose rule is the overlapped epilogue (seconds
// of NVRTC) is built with its ping-pong stand-in while its own form compiles on another
// thread. A second build meanwhile joins that compile instead of starting another, and once
// it has ended, the form is in the cache: the next build compiles it now, with no stand-in.
TEST_F(CompileUnitsTest, ASlowKernelCompilesInTheBackgroundBehindItsStandIn) {
  NVRTC_OR_SKIP(probe);
  const Graph graph = PlanOnnxText("g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[4096] b) => (bfloat16[2048,4096] y)",
                                   "  p = MatMul (x, w)\n  s = Add (p, b)\n  y = Relu (s)\n")
                          .graph;
  ASSERT_FALSE(HasFailure());
  CudaCompileOptions options;
  options.cache_dir = cache_dir_;
  options.background_compile = true;
  struct Built {
    std::shared_ptr<const BackgroundCubins> background;
    std::string compiled_now, own_unit, stand_in_unit, kernel;
    int64_t compiles = 0;
  };
  auto build = [&]() -> Built {
    auto backend = CudaBackend::ForArch("sm_90a", options);
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    auto built = BuildGraphs(**backend, {graph}, options);
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    const CudaGroupProgram* gemm = nullptr;
    for (const CudaGroupProgram& p : CudaBackend::ProgramOf(*built->lowered.front()).groups)
      if (p.mode == CudaGroupProgram::Mode::kGemmTemplate) gemm = &p;
    EXPECT_NE(gemm, nullptr);
    EXPECT_NE(gemm->kernel->stand_in, nullptr) << gemm->kernel->source.strategy;
    EXPECT_NE(gemm->kernel->source.strategy.find("epilogue overlapping"), std::string::npos) << gemm->kernel->source.strategy;
    EXPECT_NE(gemm->kernel->stand_in->source.strategy.find("ping-pong"), std::string::npos) << gemm->kernel->stand_in->source.strategy;
    EXPECT_EQ(gemm->kernel->stand_in->source.name, gemm->kernel->source.name);
    const CudaCubins& cubins = CudaBackend::CubinsOf(*built->code);
    EXPECT_EQ(cubins.units.size(), 1u);
    return {CudaBackend::BackgroundOf(*built->code), cubins.units.at(0).source, SplitIntoCompileUnits({gemm->kernel->source})[0].source,
            SplitIntoCompileUnits({gemm->kernel->stand_in->source})[0].source, gemm->kernel->source.name, cubins.compiles};
  };
  const Built first = build();
  ASSERT_NE(first.background, nullptr) << "the overlapped form compiles in the background";
  EXPECT_EQ(first.background->kernels, std::set<std::string>{first.kernel});
  EXPECT_EQ(first.compiled_now, first.stand_in_unit) << "the stand-in is what compiled now";
  // It takes seconds: a build meanwhile joins it.
  const bool still_compiling = !first.background->Ready();
  const Built second = build();
  if (still_compiling) {
    ASSERT_NE(second.background, nullptr);
    ASSERT_EQ(second.background->compiles.size(), 1u);
    EXPECT_EQ(second.background->compiles[0], first.background->compiles[0]) << "one compile of the unit, joined";
    EXPECT_EQ(second.compiles, 0) << "the stand-in came from the cache";
  }
  const StatusOr<CudaCubins> later = first.background->Get();
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ASSERT_EQ(later->units.size(), 1u);
  EXPECT_EQ(later->compiles, 1);
  EXPECT_EQ(later->units[0].kernels, std::vector<std::string>{first.kernel});
  const Built third = build();
  EXPECT_EQ(third.background, nullptr) << "the cache has the overlapped form now";
  EXPECT_EQ(third.compiles, 0);
  EXPECT_EQ(third.compiled_now, third.own_unit) << "the kernel's own form, from the cache";
}

// A process that ends while a background compile runs (a model kept to the end, as Python's
// torch.compile caches keep theirs) waits for it at exit: it exits cleanly, and the cubin is in
// the cache for the next process.
TEST_F(CompileUnitsTest, AProcessEndingDuringABackgroundCompileWaitsForIt) {
  NVRTC_OR_SKIP(probe);
  const Graph graph =
      PlanOnnxText("g (bfloat16[2048,1024] x, bfloat16[1024,4096] w) => (bfloat16[2048,4096] y)", "  p = MatMul (x, w)\n  y = Tanh (p)\n").graph;
  ASSERT_FALSE(HasFailure());
  // The child process runs this test again from its start, with a fixture (and cache) of its
  // own: the parent's cache reaches it through the environment, set only where unset.
  setenv("TILEFUSE_TEST_EXITING_CACHE", cache_dir_.c_str(), /*overwrite=*/0);
  CudaCompileOptions options;
  options.cache_dir = std::getenv("TILEFUSE_TEST_EXITING_CACHE");
  options.background_compile = true;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto backend = CudaBackend::ForArch("sm_90a", options);
        if (!backend.ok()) std::_Exit(3);
        auto built = BuildGraphs(**backend, {graph}, options);
        if (!built.ok() || !CudaBackend::BackgroundOf(*built->code)) std::_Exit(4);
        new BuiltGraphs(std::move(*built));  // never released: only the exit can wait for its compile
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
  unsetenv("TILEFUSE_TEST_EXITING_CACHE");
  auto backend = CudaBackend::ForArch("sm_90a", options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto built = BuildGraphs(**backend, {graph}, options);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(CudaBackend::BackgroundOf(*built->code), nullptr) << "the exiting process's compile reached the cache";
  EXPECT_EQ(CudaBackend::CubinsOf(*built->code).compiles, 0);
}

}  // namespace
}  // namespace tilefuse

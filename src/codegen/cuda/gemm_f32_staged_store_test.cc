// An f32 output staged like a 16-bit one (GemmTemplateKernel::stage_f32_output): written into
// the staging tile in boxes of 64 rows x 32 columns and stored by TMA, where asked for. What the
// emitter hands the skeleton, and that the kernels compile for sm_90a; running them needs a GPU
// (bench/experiments/tf32_epilogue_pairs.sh with TILEFUSE_GEMM_F32_STAGED=1).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// y = relu(x · wᵀ + b) in f32 (TF32 takes B K-major: the weight as [N][K]), rows x k -> n.
StatusOr<GemmTemplateKernel> F32Product(int64_t rows, int64_t k, int64_t n, bool tf32, bool staged) {
  PlannedText p = PlanOnnxText(fmt::format("g (float[{0},{1}] x, float[{2},{1}] w, float[{2}] b) => (float[{0},{2}] y)", rows, k, n),
                               "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  s = Add (p, b)\n  y = Relu (s)\n");
  for (const FusionGroup& group : p.plan.groups) {
    if (group.kind != GroupKind::kGemm) continue;
    StatusOr<GemmTemplateKernel> gemm = LowerGemmTemplate(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph), tf32);
    if (gemm.ok()) {
      gemm->name = fmt::format("f32_{}x{}x{}_{}{}", rows, k, n, tf32 ? "tf32" : "3xtf32", staged ? "_staged" : "");
      gemm->stage_f32_output = staged;
    }
    return gemm;
  }
  return Internal("no gemm group");
}

TEST(GemmF32StagedStoreTest, AnF32OutputIsStagedOnlyWhereAskedAndItsRowsAreWholeUnits) {
  auto element_stores = F32Product(4096, 64, 256, true, false);
  ASSERT_TRUE(element_stores.ok()) << element_stores.status().ToString();
  EXPECT_LT(gemm_layout::StagedStore(*element_stores), 0);
  auto staged = F32Product(4096, 64, 256, true, true);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_GE(gemm_layout::StagedStore(*staged), 0);
  EXPECT_EQ(gemm_layout::StagedStoreBytes(*staged), 4);
  EXPECT_FALSE(gemm_layout::StoreByThreads(*staged));
  auto ragged = F32Product(4096, 64, 260, true, true);  // 1040-byte rows: not whole 16-byte units of TMA's
  ASSERT_TRUE(ragged.ok()) << ragged.status().ToString();
  EXPECT_LT(gemm_layout::StagedStore(*ragged), 0);
}

TEST(GemmF32StagedStoreTest, TheOutputMapHasBoxesOf32ColumnsAndTheConfigFourByteStores) {
  auto gemm = F32Product(4096, 64, 256, true, true);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("using StoreElement = tf::F32;"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("kStagedStore = 1"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("kStoreBytes = 4"), std::string::npos) << source->function;
  bool found = false;
  for (const LaunchArg& arg : source->launch.args)
    if (arg.kind == LaunchArg::Kind::kTensorMap && arg.map.dtype == DType::kF32 && !arg.map.tf32) {
      found = true;  // the output's map (the operands' are TF32)
      EXPECT_EQ(arg.map.box[0], 32) << "one 128-byte swizzle row of f32 columns";
      EXPECT_EQ(arg.map.box[1], 64);
      EXPECT_TRUE(arg.map.swizzle_128b);
    }
  EXPECT_TRUE(found) << "no output map";
}

// The rule's forms of a short K (ping-pong) and a long one (cooperative), TF32 and 3xTF32, and
// a narrow tile: each compiles for sm_90a without spills, its staging in shared memory beside
// the ring.
TEST(GemmF32StagedStoreTest, TheStagedFormsCompileForSm90aWithoutSpills) {
  auto nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: the staged f32 stores not compiled";
  std::vector<CudaKernelSource> sources;
  struct Case {
    int64_t rows, k, n;
    bool tf32;
  };
  for (const Case& c : {Case{100352, 64, 256, true}, Case{4096, 4096, 1024, true}, Case{100352, 576, 64, true}, Case{8192, 768, 768, false}}) {
    auto gemm = F32Product(c.rows, c.k, c.n, c.tf32, true);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    ASSERT_GE(gemm_layout::StagedStore(*gemm), 0) << gemm->name;
    auto source = EmitCudaGemm(*gemm);
    ASSERT_TRUE(source.ok()) << gemm->name << ": " << source.status().ToString();
    sources.push_back(*source);
  }
  auto cubin = nvrtc->Compile(CudaTranslationUnit(sources), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  for (const PtxasKernelInfo& info : ParsePtxasLog(cubin->ptxas_log)) {
    EXPECT_EQ(info.spill_store_bytes, 0) << info.line;
    EXPECT_EQ(info.spill_load_bytes, 0) << info.line;
  }
}

}  // namespace
}  // namespace tilefuse

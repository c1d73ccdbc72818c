// The CUDA search space: every candidate is a configuration the template accepts (and,
// with NVRTC here, compiles for sm_90a without spills); constraints prune before compiling.
#include "tune/cuda_search_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "api/backend_setup.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"
#include "tune/tuner_core.h"

namespace tilefuse {
namespace {

// The kernel of a graph's last fusion group.
Kernel LastGroupKernel(Graph imported) {
  auto graph = RunGraphPasses(std::move(imported), PassOptions{});
  EXPECT_TRUE(graph.ok());
  auto plan = PlanFusion(*graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok());
  auto kernel = LowerGroup(*graph, plan->groups.back(), FindInlinedGenerators(*graph));
  EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  return *kernel;
}

Kernel FirstKernel(const std::string& model) {
  auto imported = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/" + model);
  EXPECT_TRUE(imported.ok()) << imported.status().ToString();
  return LastGroupKernel(std::move(imported->graph));
}

// The GEMM template form of an imported model's last fusion group, a gemm group.
StatusOr<GemmTemplateKernel> LastGemm(StatusOr<ImportedModel> imported, const PassOptions& passes = {}) {
  if (!imported.ok()) return imported.status();
  ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(imported->graph), passes));
  ASSIGN_OR_RETURN(FusionPlan plan, PlanFusion(graph, PlannerOptions{}));
  const FusionGroup& group = plan.groups.back();
  if (group.kind != GroupKind::kGemm) return InvalidArgument("the last group is not a gemm group");
  return LowerGemmTemplate(graph, group, SplitGemmGroup(graph, group), FindInlinedGenerators(graph));
}

// A norm over [rows, columns] of `dtype`: a layer norm with scale and bias, or an RMS norm
// with a weight (x * rsqrt(mean(x^2) + eps) * w).
Kernel NormKernel(DType dtype, int64_t rows, int64_t columns, bool rms) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {rows, columns});
  Value y;
  if (rms) {
    Value mean_square = b.Reduce(OpCode::kReduceMean, b.Mul(x, x), {-1}, /*keepdims=*/true);
    y = b.Mul(b.Mul(x, b.Unary(OpCode::kRsqrt, b.AddScalar(mean_square, 1e-6))), b.Parameter("w", dtype, {columns}));
  } else {
    y = b.LayerNorm(x, b.Parameter("scale", dtype, {columns}), b.Parameter("bias", dtype, {columns}), 1, 1e-5);
  }
  b.Output(y, "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return LastGroupKernel(std::move(graph).value());
}

// Every source in one NVRTC run for sm_90a, no kernel spilling (skipped without NVRTC).
void ExpectCompilesWithoutSpills(const std::vector<CudaKernelSource>& sources) {
  auto nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: candidates not compiled";
  auto cubin = nvrtc->Compile(CudaTranslationUnit(sources), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  for (const PtxasKernelInfo& info : ParsePtxasLog(cubin->ptxas_log)) EXPECT_EQ(info.spill_store_bytes, 0) << info.line;
}

void ExpectAllCandidatesCompile(const Kernel& kernel, const CudaSearchSpace& space) {
  std::vector<CudaKernelSource> sources;
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    const CudaKernelConfig& c = space.candidates[i];
    EXPECT_EQ(c.threads % 32, 0);
    EXPECT_LE(c.threads, 1024);
    Kernel k = kernel;
    k.name = "variant" + std::to_string(i);
    auto source = EmitCudaKernel(k, c);
    ASSERT_TRUE(source.ok()) << CudaConfigToJson(c).dump() << ": " << source.status().ToString();
    sources.push_back(*source);
  }
  ExpectCompilesWithoutSpills(sources);
}

TEST(CudaSearchSpaceTest, RowKernelCandidatesAreValidAndOverBudgetRowsArePruned) {
  Kernel k = FirstKernel("bench/cases/layernorm_bf16_16384x4096.onnxtxt");
  CudaSearchSpace space = CudaCandidates(k);
  ASSERT_GE(space.candidates.size(), 4u);
  EXPECT_TRUE(SameCudaConfig(space.candidates.front(), ResolveCudaConfig(k, {}))) << "the default comes first";
  bool pruned_for_registers = false;
  for (const std::string& why : space.pruned) pruned_for_registers |= why.find("register budget") != std::string::npos;
  EXPECT_TRUE(pruned_for_registers) << "a warp holding a 4096-element row in registers must be pruned";
  for (const CudaKernelConfig& c : space.candidates) {
    EXPECT_EQ(k.inner % c.vector, 0);
    if (c.threads_per_row > 32) {
      EXPECT_EQ(c.threads_per_row, c.threads);
    }
  }
  ExpectAllCandidatesCompile(k, space);
}

// A bf16 row of 65536 (softmax) does not fit 1024 threads' registers one value a register,
// but fits as pairs: read once, no spill. A row that fits unpacked stays unpacked.
TEST(CudaSearchSpaceTest, LongHalfPrecisionRowsAreHeldAsPairs) {
  Kernel long_row = FirstKernel("bench/cases/softmax_bf16_1024x65536.onnxtxt");
  CudaKernelConfig c = ResolveCudaConfig(long_row, {});
  EXPECT_EQ(c.threads_per_row, 1024);
  EXPECT_EQ(c.cache_row, 2);
  auto source = EmitCudaKernel(long_row, c);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("uint32_t c0[kChunks][kVec / 2];  // element pairs"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("if (i0 < kRows) {"), std::string::npos) << source->function;
  EXPECT_EQ(source->launch.grid[0], 1024);  // the loop-free form needs a block per row
  ExpectCompilesWithoutSpills({*source});

  Kernel short_row = FirstKernel("bench/cases/softmax_bf16_8192x8192.onnxtxt");
  EXPECT_EQ(ResolveCudaConfig(short_row, {}).cache_row, 1);
}

// On a GPU that launches clusters the rule shares that row among a cluster of 4 CTAs of 256
// threads holding their slices as pairs, and the tuner's space starts from it; every
// candidate, the clusters' pairs included, compiles without spills. Without clusters the
// space starts from the one block holding the pairs.
TEST(CudaSearchSpaceTest, LongHalfPrecisionRowsStartFromAClusterOfPairs) {
  Kernel long_row = FirstKernel("bench/cases/softmax_bf16_1024x65536.onnxtxt");
  const CudaSearchSpace hopper = CudaCandidates(long_row, /*clusters=*/true);
  ASSERT_FALSE(hopper.candidates.empty());
  const CudaKernelConfig& rule = hopper.candidates.front();
  EXPECT_EQ(rule.cluster, 4);
  EXPECT_EQ(rule.threads, 256);
  EXPECT_EQ(rule.cache_row, 2);
  int cluster_pairs = 0;
  for (const CudaKernelConfig& c : hopper.candidates) cluster_pairs += c.cluster > 1 && c.cache_row == 2;
  EXPECT_GE(cluster_pairs, 3) << "pairs in clusters of 2, 4 and 8";
  ExpectAllCandidatesCompile(long_row, hopper);
  const CudaSearchSpace other = CudaCandidates(long_row, /*clusters=*/false);
  ASSERT_FALSE(other.candidates.empty());
  EXPECT_EQ(other.candidates.front().cluster, 1);
  EXPECT_EQ(other.candidates.front().threads, 1024);
}

// Rows of 1024 bf16 (a layer norm over 65536 of them) are tried a warp to a row in blocks of
// one warp too, as Triton's persistent reductions run them, beside the rule's 64-thread block;
// both forms compile without spills. (Not all of this space does: the row re-read by a warp in
// 256-thread blocks spills 4 bytes of stack, 2026-11-28.)
TEST(CudaSearchSpaceTest, ShortRowsAreTriedAWarpToABlock) {
  Kernel k = FirstKernel("bench/cases/layernorm_bf16_65536x1024.onnxtxt");
  CudaSearchSpace space = CudaCandidates(k);
  ASSERT_FALSE(space.candidates.empty());
  EXPECT_EQ(space.candidates.front().threads_per_row, 32) << "the rule's warp per row, holding the scale and bias";
  EXPECT_EQ(CudaCandidates(FirstKernel("bench/cases/softmax_bf16_16384x1024.onnxtxt")).candidates.front().threads_per_row, 64)
      << "no row-invariant vectors: a 64-thread block per row";
  CudaSearchSpace warp_blocks;
  for (const CudaKernelConfig& c : space.candidates)
    if (c.threads == 32 && c.threads_per_row == 32) warp_blocks.candidates.push_back(c);
  EXPECT_EQ(warp_blocks.candidates.size(), 3u) << "a warp per row in 32-thread blocks: the row re-read, held, held with the scale and bias";
  ExpectAllCandidatesCompile(k, warp_blocks);
}

// The row template's form the rule resolved.
void ExpectRowForm(const CudaKernelConfig& c, int threads_per_row, int threads, int cache_row, bool beside) {
  SCOPED_TRACE(CudaConfigToJson(c).dump());
  EXPECT_EQ(c.threads_per_row, threads_per_row);
  EXPECT_EQ(c.threads, threads);
  EXPECT_EQ(c.cache_row, cache_row);
  EXPECT_EQ(c.broadcast_with_row, beside);
}

// The rule for rows of 3 or 4 vectors a lane (513 to 1024 bf16 columns): where every row
// reads vectors alike (a norm's scale, and bias) and they fit beside the row, a warp per row
// holds them with it, in blocks of 4 warps for two vectors and of one for one; without such
// vectors (softmax) and for longer rows, a block per row reading them after the reductions.
// An explicit ask (the tuner's twins) is kept as asked.
TEST(CudaSearchSpaceTest, NormsOverAThousandHalfColumnsTakeAWarpHoldingTheirVectors) {
  const Kernel layer_norm = FirstKernel("bench/cases/layernorm_bf16_65536x1024.onnxtxt");
  const CudaKernelConfig ln = ResolveCudaConfig(layer_norm, {});
  ExpectRowForm(ln, 32, 128, 1, true);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/rmsnorm_bf16_65536x1024.onnxtxt"), {}), 32, 32, 1, true);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/softmax_bf16_16384x1024.onnxtxt"), {}), 64, 64, 1, false);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/layernorm_bf16_16384x4096.onnxtxt"), {}), 128, 128, 1, false);
  // Asked without the vectors (the tuner's twin), and the row re-read asked: the rule's block.
  ExpectRowForm(ResolveCudaConfig(layer_norm, {64, 8, 64, 1}), 64, 64, 1, false);
  ExpectRowForm(ResolveCudaConfig(layer_norm, {0, 0, 0, 0}), 64, 64, 0, false);
  auto source = EmitCudaKernel(layer_norm, ln);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->strategy.find("row: warp per row, row and row-invariant vectors in registers"), std::string::npos) << source->strategy;
  ExpectCompilesWithoutSpills({*source});
}

// A block per row takes 4 vectors a thread, 2 for a row of one input written back after its
// one reduction (RMS norm): fewer registers a thread, no spills. A residual sum folded first
// (two row inputs) and layer norm's two reductions keep 4.
TEST(CudaSearchSpaceTest, RmsNormRowsTakeTwoVectorsAThread) {
  const Kernel rms = FirstKernel("bench/cases/rmsnorm_bf16_16384x4096.onnxtxt");
  const CudaKernelConfig wide = ResolveCudaConfig(rms, {});
  ExpectRowForm(wide, 256, 256, 1, false);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/residual_rmsnorm_bf16_16384x4096.onnxtxt"), {}), 128, 128, 1, false);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/layernorm_bf16_16384x4096.onnxtxt"), {}), 128, 128, 1, false);
  ExpectRowForm(ResolveCudaConfig(FirstKernel("bench/cases/softmax_bf16_8192x8192.onnxtxt"), {}), 256, 256, 1, false);
  auto source = EmitCudaKernel(rms, wide);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ExpectCompilesWithoutSpills({*source});
}

// The two rules' edges: 2 vectors a lane keep the plain warp, 3 (520 bf16 columns) take the
// held vectors; f32 rows of 512 take them, of 1024 a block; RMS norm's 2 vectors a thread
// stop at 512 threads (16384 bf16 columns: 4 a thread) and at a part-chunk (3072 columns: 128
// threads by 3 chunks); --row-cluster 1 (no cluster) keeps both rules, a cluster of 4 the
// block of 4 vectors a thread sliced. Each new form compiles without spills.
TEST(CudaSearchSpaceTest, NormRulesEdges) {
  const Kernel bf16_512 = NormKernel(DType::kBF16, 64, 512, false), bf16_520 = NormKernel(DType::kBF16, 64, 520, false);
  const Kernel f32_512 = NormKernel(DType::kF32, 64, 512, false), f32_1024 = NormKernel(DType::kF32, 64, 1024, false);
  const Kernel rms_f32_4096 = NormKernel(DType::kF32, 64, 4096, true), rms_16384 = NormKernel(DType::kBF16, 64, 16384, true);
  const Kernel rms_3072 = NormKernel(DType::kBF16, 64, 3072, true), rms_4096 = NormKernel(DType::kBF16, 64, 4096, true);
  ExpectRowForm(ResolveCudaConfig(bf16_512, {}), 32, 256, 1, false);
  ExpectRowForm(ResolveCudaConfig(bf16_520, {}), 32, 128, 1, true);
  ExpectRowForm(ResolveCudaConfig(f32_512, {}), 32, 128, 1, true);
  ExpectRowForm(ResolveCudaConfig(f32_1024, {}), 64, 64, 1, false);
  ExpectRowForm(ResolveCudaConfig(rms_f32_4096, {}), 512, 512, 1, false);
  ExpectRowForm(ResolveCudaConfig(rms_16384, {}), 512, 512, 1, false);
  ExpectRowForm(ResolveCudaConfig(rms_3072, {}), 128, 128, 1, false);
  ExpectRowForm(ResolveCudaConfig(rms_4096, {}), 256, 256, 1, false);
  CudaKernelConfig no_cluster;
  no_cluster.cluster = 1;
  ExpectRowForm(ResolveCudaConfig(rms_4096, no_cluster), 256, 256, 1, false);
  ExpectRowForm(ResolveCudaConfig(NormKernel(DType::kBF16, 64, 1024, false), no_cluster), 32, 128, 1, true);
  CudaKernelConfig four;
  four.cluster = 4;
  const CudaKernelConfig sliced = ResolveCudaConfig(rms_4096, four);
  EXPECT_EQ(sliced.cluster, 4);
  EXPECT_EQ(sliced.threads_per_row, 128);
  std::vector<CudaKernelSource> sources;
  for (const Kernel* k : {&bf16_520, &f32_512, &rms_f32_4096, &rms_4096}) {
    Kernel named = *k;
    named.name = "edge" + std::to_string(sources.size());
    auto source = EmitCudaKernel(named, ResolveCudaConfig(named, {}));
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    sources.push_back(*source);
  }
  ExpectCompilesWithoutSpills(sources);
}

// A layer norm's scale and bias (read alike by every row) are tried held beside the row, in
// whole vectors, only where the row is held (and a block holds at most 4 warps' rows).
TEST(CudaSearchSpaceTest, RowInvariantVectorsAreTriedBesideAHeldRow) {
  Kernel k = FirstKernel("bench/cases/layernorm_bf16_65536x1024.onnxtxt");
  CudaSearchSpace space = CudaCandidates(k);
  int held = 0, with_vectors = 0;
  for (const CudaKernelConfig& c : space.candidates) {
    held += c.cache_row == 1 && !c.broadcast_with_row;
    with_vectors += c.broadcast_with_row;
    if (c.broadcast_with_row) {
      EXPECT_EQ(c.cache_row, 1);
    }
    EXPECT_TRUE(SameCudaConfig(CudaConfigFromJson(CudaConfigToJson(c)), c)) << CudaConfigToJson(c).dump();
  }
  EXPECT_EQ(with_vectors, held - 2) << "every held row but a warp's in blocks of 256 and 512 threads beside its scale and bias";
  CudaSearchSpace beside;
  for (const CudaKernelConfig& c : space.candidates)
    if (c.broadcast_with_row) beside.candidates.push_back(c);
  ExpectAllCandidatesCompile(k, beside);
  // Held beside: the row, the scale and the bias are all loaded before the first reduction;
  // otherwise only the row.
  auto loads_before_reducing = [&](bool with_vectors) {
    CudaKernelConfig c{64, 8, 64, 1};
    c.broadcast_with_row = with_vectors;
    auto source = EmitCudaKernel(k, c);
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    const std::string before = source->function.substr(0, source->function.find("tf_block_reduce"));
    int loads = 0;
    for (size_t at = before.find("tf_vload"); at != std::string::npos; at = before.find("tf_vload", at + 1)) ++loads;
    return loads;
  };
  EXPECT_EQ(loads_before_reducing(true), 3);
  EXPECT_EQ(loads_before_reducing(false), 1);
  // More candidates than the tuner measures (16): every shape held beside the row is among
  // those measured, each twin that holds the vectors otherwise than the rule after the one
  // that holds them as the rule does (the rule holds them here: a warp per row).
  ASSERT_GT(space.candidates.size(), 16u);
  std::vector<nlohmann::json> all;
  for (const CudaKernelConfig& c : space.candidates) all.push_back(CudaConfigToJson(c));
  const CudaKernelConfig base = space.candidates.front();
  ASSERT_TRUE(base.broadcast_with_row);
  const std::vector<nlohmann::json> measured =
      Shortlist(all, 16, [&](const nlohmann::json& c) { return CudaConfigRank(base, CudaConfigFromJson(c)); });
  int measured_beside = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const CudaKernelConfig c = CudaConfigFromJson(measured[i]);
    measured_beside += c.broadcast_with_row;
    if (c.broadcast_with_row || c.cache_row != 1) continue;
    CudaKernelConfig as_the_rule = c;
    as_the_rule.broadcast_with_row = true;
    const auto twin = std::find(measured.begin(), measured.end(), CudaConfigToJson(as_the_rule));
    if (twin == measured.end()) continue;  // a warp's rows in blocks of 256 or 512 threads: none
    EXPECT_LT(twin - measured.begin(), static_cast<std::ptrdiff_t>(i)) << measured[i].dump();
  }
  EXPECT_EQ(measured_beside, with_vectors);
  EXPECT_FALSE(ResolveCudaConfig(FirstKernel("bench/cases/layernorm_bf16_16384x4096.onnxtxt"), {}).broadcast_with_row)
      << "a block per row of 4096 reads them after the reductions";
  // A kernel without such vectors (softmax) resolves the ask away: no duplicate candidates.
  Kernel softmax = FirstKernel("bench/cases/softmax_bf16_16384x1024.onnxtxt");
  CudaKernelConfig asked;
  asked.broadcast_with_row = true;
  EXPECT_FALSE(ResolveCudaConfig(softmax, asked).broadcast_with_row);
  for (const CudaKernelConfig& c : CudaCandidates(softmax).candidates) EXPECT_FALSE(c.broadcast_with_row);
  EXPECT_FALSE(ResolveCudaConfig(FirstKernel("bench/cases/gelu_tanh_bf16.onnxtxt"), asked).broadcast_with_row) << "pointwise";
}

// The dropout + residual + layer norm row (its inputs folded into one value the passes read)
// and the rows of 4096: every shape held beside the row compiles without spills.
TEST(CudaSearchSpaceTest, RowInvariantVectorsBesideFoldedAndLongerRowsCompile) {
  for (const char* model : {"bench/cases/dropout_residual_layernorm_bf16_16384x4096.onnxtxt", "bench/cases/layernorm_bf16_16384x4096.onnxtxt"}) {
    SCOPED_TRACE(model);
    Kernel k = FirstKernel(model);
    CudaSearchSpace beside;
    for (const CudaKernelConfig& c : CudaCandidates(k).candidates)
      if (c.broadcast_with_row) beside.candidates.push_back(c);
    EXPECT_FALSE(beside.candidates.empty());
    ExpectAllCandidatesCompile(k, beside);
  }
}

// Pointwise blocks: 128 threads where a thread's transcendentals are on 4 f32 elements (GELU
// f32), 256 for half types' 8 (GELU bf16) and for kernels without transcendentals.
TEST(CudaSearchSpaceTest, PointwiseBlocksNarrowForF32Transcendentals) {
  const CudaKernelConfig f32 = ResolveCudaConfig(FirstKernel("bench/cases/gelu_tanh_f32.onnxtxt"), {});
  EXPECT_EQ(f32.vector, 4);
  EXPECT_EQ(f32.threads, 128);
  const CudaKernelConfig bf16 = ResolveCudaConfig(FirstKernel("bench/cases/gelu_tanh_bf16.onnxtxt"), {});
  EXPECT_EQ(bf16.vector, 8);
  EXPECT_EQ(bf16.threads, 256);
  const CudaKernelConfig rotary = ResolveCudaConfig(FirstKernel("bench/cases/rotary_bf16_b8t2048h32d128.onnxtxt"), {});
  EXPECT_EQ(rotary.threads, 256);
}

TEST(CudaSearchSpaceTest, PointwiseCandidatesAreValid) {
  Kernel k = FirstKernel("examples/gelu_manual.onnxtxt");
  CudaSearchSpace space = CudaCandidates(k);
  EXPECT_GE(space.candidates.size(), 6u);
  ExpectAllCandidatesCompile(k, space);
}

// Kernels reading an operand transposed: the tiled template's edges and block sizes, and the
// flat template beside them; every one compiles without spills, ragged tiles included (bf16
// edges of 1020 and 64, f32 of 891 and 40 with an odd plane: scalar loads).
TEST(CudaSearchSpaceTest, TransposedPointwiseCandidatesAreValid) {
  for (const char* model : {"tests/conv/layout_edges_bf16.onnxtxt", "tests/conv/layout_edges_ragged_f32.onnxtxt"}) {
    SCOPED_TRACE(model);
    Kernel k = FirstKernel(model);
    CudaSearchSpace space = CudaCandidates(k);
    ASSERT_GT(space.candidates.front().tile, 0) << "the tiled form by default";
    int tiled = 0, flat = 0;
    for (const CudaKernelConfig& c : space.candidates) (c.tile > 0 ? tiled : flat) += 1;
    EXPECT_GE(tiled, 4);
    EXPECT_EQ(flat, 1);
    ExpectAllCandidatesCompile(k, space);
  }
}

// The GEMM template's candidates for a residual epilogue (a staged store; the residual staged
// by TMA, or through the overlapped epilogue's ring): the rule's first (overlapped), ping-pong
// and cooperative ones after it, no two alike, every one emitted and compiled for sm_90a
// without spills, and the configuration survives the tuning cache's JSON.
TEST(CudaSearchSpaceTest, GemmTemplateCandidatesAreValid) {
  auto gemm = LastGemm(ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/bench/cases/gemm_residual_bf16_16384x4096x1024.onnxtxt"));
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  GemmSearchSpace space = GemmCandidates(*gemm, 132);
  ASSERT_GE(space.candidates.size(), 6u);
  CudaGemmConfig rule;
  rule.sm_count = 132;
  EXPECT_EQ(GemmConfigToJson(space.candidates.front()), GemmConfigToJson(ResolveGemmConfig(*gemm, rule))) << "the rule's first";
  std::vector<CudaKernelSource> sources;
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    const nlohmann::json j = GemmConfigToJson(space.candidates[i]);
    EXPECT_EQ(GemmConfigToJson(GemmConfigFromJson(j)), j);
    for (size_t o = 0; o < i; ++o) EXPECT_NE(GemmConfigToJson(space.candidates[o]), j) << "listed twice";
    GemmTemplateKernel variant = *gemm;
    variant.name = "gemm_variant" + std::to_string(i);
    CudaGemmConfig config = GemmConfigFromJson(j);
    config.sm_count = 132;
    auto source = EmitCudaGemm(variant, config);
    ASSERT_TRUE(source.ok()) << j.dump() << ": " << source.status().ToString();
    EXPECT_LE(source->launch.dynamic_shared_bytes, 227 * 1024) << j.dump();
    sources.push_back(*source);
  }
  ExpectCompilesWithoutSpills(sources);
  EXPECT_TRUE(*space.candidates.front().overlap_epilogue) << "the residual through its ring";
  EXPECT_TRUE(std::any_of(space.candidates.begin(), space.candidates.end(), [](const CudaGemmConfig& c) { return *c.pingpong; }));
  EXPECT_TRUE(std::any_of(space.candidates.begin(), space.candidates.end(),
                          [](const CudaGemmConfig& c) { return !*c.pingpong && !*c.overlap_epilogue; }));
  // 2048 tiles of 128x256 leave 68 in a last round: stream-K forms, single CTAs.
  EXPECT_TRUE(std::any_of(space.candidates.begin(), space.candidates.end(),
                          [](const CudaGemmConfig& c) { return c.stream_k.value_or(false) && c.cluster_m == 1; }));
  // Each candidate that can also runs as clusters of two sharing B.
  EXPECT_TRUE(std::any_of(space.candidates.begin(), space.candidates.end(), [](const CudaGemmConfig& c) { return c.cluster_m == 2; }));
  EXPECT_EQ(space.candidates.front().cluster_m, 1);
  EXPECT_EQ(GemmConfigFromJson(nlohmann::json{{"block_n", 128}}).cluster_m, 1) << "a cache from before clusters";
  EXPECT_FALSE(*GemmConfigFromJson(nlohmann::json{{"block_n", 128}}).stream_k) << "a cache from before stream-K";
}

// FP8 products, per tensor and block-scaled with one weight scale per 128x128 block: every
// candidate is one the template takes; the per-tensor space holds the overlapped epilogue
// (promoted f32 sums held, 128 columns), the shared scales' none wider than 192 columns.
TEST(CudaSearchSpaceTest, Fp8CandidatesAreValid) {
  PassOptions passes = CudaPassOptions();
  passes.fp8_block_scales = true;
  for (bool weight_blocks : {false, true}) {
    const std::string model = weight_blocks ? "tests/gemm/gemm_fp8_e4m3_weight_block_scales.onnx" : "tests/gemm/gemm_fp8_e4m3_qdq_linear_4096_rows.onnx";
    SCOPED_TRACE(model);
    auto gemm = LastGemm(ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/" + model), passes);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    ASSERT_EQ(gemm->b_scale_columns, weight_blocks ? 128 : 0);
    GemmSearchSpace space = GemmCandidates(*gemm, 132);
    ASSERT_GE(space.candidates.size(), 3u);
    for (size_t i = 0; i < space.candidates.size(); ++i) {
      CudaGemmConfig config = space.candidates[i];
      auto source = EmitCudaGemm(*gemm, config);
      EXPECT_TRUE(source.ok()) << GemmConfigToJson(config).dump() << ": " << source.status().ToString();
      if (weight_blocks) EXPECT_LE(config.block_n, 192);
    }
    const bool overlapped = std::any_of(space.candidates.begin(), space.candidates.end(),
                                        [](const CudaGemmConfig& c) { return *c.overlap_epilogue && c.block_n <= 128; });
    EXPECT_EQ(overlapped, !weight_blocks) << "block scales are read in the main loop's chains only";
  }
}

// A product of few tiles (LLaMA-style's q projection at 128 rows, 32 steps of K): the small-M
// forms in the rule's ring and in one of 8 stages (more of B in flight an SM), each within
// shared memory, emitted, and the 8-stage ones compiled without spills.
TEST(CudaSearchSpaceTest, FewTileProductsAreTriedInDeeperRings) {
  auto gemm = LastGemm(ImportOnnxText(
      "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n"
      "g (bfloat16[128,2048] x, bfloat16[2048,2048] w) => (bfloat16[128,2048] y)\n{\n"
      "  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n}\n"));
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const GemmSearchSpace space = GemmCandidates(*gemm, 132);
  std::vector<CudaKernelSource> deep;
  int rule_rings = 0;
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    const CudaGemmConfig& config = space.candidates[i];
    GemmTemplateKernel variant = *gemm;
    variant.name = "gemm_ring" + std::to_string(i);
    auto source = EmitCudaGemm(variant, config);
    ASSERT_TRUE(source.ok()) << GemmConfigToJson(config).dump() << ": " << source.status().ToString();
    EXPECT_LE(source->launch.dynamic_shared_bytes, 227 * 1024) << GemmConfigToJson(config).dump();
    if (config.block_m == 64 && config.stages == 8) deep.push_back(*source);
    else if (config.block_m == 64 && config.stages <= 6) ++rule_rings;
  }
  EXPECT_GE(deep.size(), 4u) << "64-row tiles 64 and 128 wide, 1 and 2 units, in 8 stages";
  EXPECT_GE(rule_rings, 4);
  ExpectCompilesWithoutSpills(deep);
}

TEST(CudaSearchSpaceTest, ConfigJsonRoundTrips) {
  CudaKernelConfig c{256, 8, 32, 1};
  EXPECT_TRUE(SameCudaConfig(CudaConfigFromJson(CudaConfigToJson(c)), c));
  CudaKernelConfig tiled{128, 8, 0, 0, 0, 32};
  EXPECT_TRUE(SameCudaConfig(CudaConfigFromJson(CudaConfigToJson(tiled)), tiled));
  EXPECT_FALSE(SameCudaConfig(tiled, CudaKernelConfig{128, 8, 0, 0, 0, 64}));
  // The flat templates' resolved configurations keep the form tuning caches hold them in.
  CudaKernelConfig flat{256, 8, 0, 0, 0, -1};
  EXPECT_EQ(CudaConfigToJson(flat), nlohmann::json({{"threads", 256}, {"vector", 8}, {"threads_per_row", 0}, {"cache_row", 0}}));
  EXPECT_TRUE(SameCudaConfig(CudaConfigFromJson(CudaConfigToJson(flat)), flat));
}

}  // namespace
}  // namespace tilefuse

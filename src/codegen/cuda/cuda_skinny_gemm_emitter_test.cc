// The skinny GEMM template on the CPU side: which products it takes (and why not), the
// configuration its rule resolves, what it hands the skeleton and the launch it asks for.
// Running the kernels needs a GPU: scripts/gpu-check.sh (tests/gemm/gemm_skinny_*);
// TemplateSkeletonsTest compiles them for sm_90a.
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"

#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/lower.h"
#include "fusion/group_classifier.h"
#include "testing/file_check.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

StatusOr<GemmTemplateKernel> LowerOnlyGemm(const std::string& signature, const std::string& body) {
  const PlannedText p = PlanOnnxText(signature, body);
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      auto t = LowerGemmTemplate(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph));
      if (t.ok()) t->name = "gemm";
      return t;
    }
  return Internal("no gemm group");
}

TEST(CudaSkinnyGemmEmitterTest, TakesAFewRowsOfHalfPrecisionAgainstOneB) {
  auto tokens = LowerOnlyGemm("g (bfloat16[4,16,384] x, bfloat16[384,1536] w) => (bfloat16[4,16,1536] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(tokens->rows, 64);  // the batch folds into the rows: one B
  EXPECT_TRUE(SkinnyGemmFits(*tokens).ok());

  auto too_many = LowerOnlyGemm("g (bfloat16[65,384] x, bfloat16[384,1536] w) => (bfloat16[65,1536] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(too_many.ok());
  EXPECT_NE(SkinnyGemmFits(*too_many).message().find("65 rows"), std::string::npos) << SkinnyGemmFits(*too_many).message();

  auto batched = LowerOnlyGemm("g (bfloat16[4,16,384] x, bfloat16[4,384,512] w) => (bfloat16[4,16,512] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(batched.ok());
  EXPECT_FALSE(SkinnyGemmFits(*batched).ok());  // a B per batch entry

  auto a_transposed = LowerOnlyGemm("g (bfloat16[512,16] x, bfloat16[512,1024] dy) => (bfloat16[16,1024] y)",
                                    "  xt = Transpose <perm = [1, 0]> (x)\n  y = MatMul (xt, dy)\n");
  ASSERT_TRUE(a_transposed.ok());
  EXPECT_FALSE(SkinnyGemmFits(*a_transposed).ok());  // A read MN-major: the GEMM template's
}

// The rule: the fewest splits whose busiest SM streams the fewest K steps (rounds of units ×
// steps a unit), 128 columns a unit.
TEST(CudaSkinnyGemmEmitterTest, RuleBalancesTheStepsOverTheSms) {
  auto decode = LowerOnlyGemm("g (bfloat16[16,14336] x, bfloat16[14336,4096] w) => (bfloat16[16,4096] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(decode.ok());
  CudaSkinnyGemmConfig c = ResolveSkinnyGemmConfig(*decode, {});
  EXPECT_EQ(c.block_n, 128);
  EXPECT_EQ(c.splits, 4);  // 32 column blocks × 4 = 128 units on 132 SMs, 56 steps each
  EXPECT_EQ(c.stages, 6);
  CudaSkinnyGemmConfig fewer_sms;
  fewer_sms.sm_count = 32;
  EXPECT_EQ(ResolveSkinnyGemmConfig(*decode, fewer_sms).splits, 1);  // one column block an SM already
  // Splits are even: 9 steps of K in 4 units would leave 3+3+3+0.
  auto short_k = LowerOnlyGemm("g (bfloat16[8,520] x, bfloat16[520,256] w) => (bfloat16[8,256] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(short_k.ok());
  CudaSkinnyGemmConfig four;
  four.splits = 4;
  EXPECT_EQ(ResolveSkinnyGemmConfig(*short_k, four).splits, 3);
  // Every candidate is a kernel, the rule's first.
  const std::vector<CudaSkinnyGemmConfig> space = SkinnyGemmCandidates(*decode, 132);
  ASSERT_GE(space.size(), 3u);
  EXPECT_EQ(space[0].splits, 4);
  for (const CudaSkinnyGemmConfig& candidate : space) EXPECT_TRUE(EmitCudaSkinnyGemm(*decode, candidate).ok());
  CudaSkinnyGemmConfig odd;
  odd.block_n = 96;
  EXPECT_FALSE(EmitCudaSkinnyGemm(*decode, odd).ok());
}

TEST(CudaSkinnyGemmEmitterTest, PrintsConfigEpilogueAndTheSkeletonCall) {
  auto gemm = LowerOnlyGemm("g (float16[33,520] x, float16[776,520] w, float16[33,776] r) => (float16[33,776] y)",
                            "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, r)\n");
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->b_k_major, 0);
  auto source = EmitCudaSkinnyGemm(*gemm, {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->includes, std::vector<std::string>{"gemm_skinny_sm90.cuh"});
  EXPECT_EQ(source->threads, 384);  // a producer and two consumers of 64 columns
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __launch_bounds__(384, 1) gemm(
    CHECK-SAME: map_a
    CHECK-SAME: map_b
    CHECK-SAME: unsigned* __restrict__ tile_counters, float* __restrict__ partials) {
    CHECK: using Element = tf::F16;
    CHECK: kRows = 33, kN = 776, kK = 520, kMP = 48, kBN = 128, kStages = 6, kSplits = 9, kSplitSteps = 1, kBKMajor = 1
    CHECK: struct Epilogue {
    CHECK: float operator()(tf_index_t row, int col, float acc, float loaded) const {
    CHECK-NOT: return v
    CHECK: tf::GemmSkinnySm90<Config>(map_a, map_b, Epilogue{
    CHECK-SAME: tile_counters, partials);
  )"));
  // A's map: the padded rows in one box (TMA fills past row 33 with zeros); B's: [N][K].
  ASSERT_GE(source->launch.args.size(), 2u);
  EXPECT_EQ(source->launch.args[0].map.box[1], 48);
  EXPECT_EQ(source->launch.args[0].map.dims[1], 33);
  EXPECT_EQ(source->launch.args[1].map.dims[0], 520);
  EXPECT_EQ(source->launch.args[1].map.dims[1], 776);
  EXPECT_EQ(source->launch.args.back().kind, LaunchArg::Kind::kScratch);
  EXPECT_GT(source->launch.scratch_bytes, 0);
  EXPECT_EQ(source->work_blocks, 63);  // 7 column blocks × 9 splits, fewer than the SMs
}

// The epilogue's loads, asked of L1 as the consumers start (kPrefetchEpilogue): a decode
// product's bias (b1, its one row's index) and residual (b2), never the accumulator (a value
// in registers) nor the output (b3); without the switch, no Prefetch member and the skeleton
// told so.
TEST(CudaSkinnyGemmEmitterTest, PrefetchesTheEpiloguesLoadsOfAnElement) {
  auto gemm = LowerOnlyGemm("g (bfloat16[1,768] x, bfloat16[768,768] w, bfloat16[768] bias, bfloat16[1,768] r) => (bfloat16[1,768] y)",
                            "  p = MatMul (x, w)\n  biased = Add (p, bias)\n  y = Add (biased, r)\n");
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  auto source = EmitCudaSkinnyGemm(*gemm, {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: kPrefetchEpilogue = 1
    CHECK: struct Epilogue {
    CHECK: void Prefetch(tf_index_t row, int col) const {
    CHECK-NEXT: tf::PrefetchL1(b1 + ((row * 768 + col)));
    CHECK-NEXT: tf::PrefetchL1(b2 + ((row * 768 + col)));
    CHECK-NEXT: }
    CHECK-NEXT: };
  )")) << source->function;
  EXPECT_NE(source->strategy.find("the epilogue's loads prefetched to L1"), std::string::npos) << source->strategy;
  CudaSkinnyGemmConfig off;
  off.prefetch_epilogue = false;
  auto plain = EmitCudaSkinnyGemm(*gemm, off);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->function.find("void Prefetch("), std::string::npos) << plain->function;
  EXPECT_NE(plain->function.find("kPrefetchEpilogue = 0"), std::string::npos) << plain->function;
}

// With clusters asked for (TemplateOverrides::skinny_clusters), GPT-2 small's four decode
// products take the cluster form at the same stream of B for the busiest SM as the splits
// through memory: every unit a CTA, one wave of clusters of the splits, no scratch.
TEST(CudaSkinnyGemmEmitterTest, GptDecodeProductsSumTheirSplitsInAClusterWhereAsked) {
  struct Product {
    const char* label;
    int k, n, block_n, splits, memory_block_n, memory_splits;
  };
  // K steps of 64: 12 (768) and 48 (3072); 132 SMs hold 117 CTAs in clusters of 3, 90 of 6, 120 of 8.
  const Product products[] = {
      {"c_attn", 768, 2304, 64, 3, 128, 6},     // 108 CTAs, 4 steps of 64 columns (256 against 2 of 128)
      {"attn c_proj", 768, 768, 64, 6, 128, 12},  // 72 CTAs, 2 steps of 64 (1 of 128)
      {"c_fc", 768, 3072, 64, 2, 128, 4},      // 96 CTAs, 6 steps of 64 (3 of 128); fewer splits at equal bytes
      {"mlp c_proj", 3072, 768, 64, 8, 128, 16},  // 96 CTAs, 6 steps of 64 (3 of 128)
  };
  for (const Product& p : products) {
    SCOPED_TRACE(p.label);
    auto gemm = LowerOnlyGemm(fmt::format("g (bfloat16[1,{0}] x, bfloat16[{0},{1}] w) => (bfloat16[1,{1}] y)", p.k, p.n),
                              "  y = MatMul (x, w)\n");
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    const CudaSkinnyGemmConfig memory = ResolveSkinnyGemmConfig(*gemm, {});
    EXPECT_EQ(memory.in_cluster, 0);
    EXPECT_EQ(memory.block_n, p.memory_block_n);
    EXPECT_EQ(memory.splits, p.memory_splits);
    CudaSkinnyGemmConfig asked;
    asked.clusters = true;
    const CudaSkinnyGemmConfig c = ResolveSkinnyGemmConfig(*gemm, asked);
    EXPECT_EQ(c.in_cluster, 1);
    EXPECT_EQ(c.block_n, p.block_n);
    EXPECT_EQ(c.splits, p.splits);
    auto source = EmitCudaSkinnyGemm(*gemm, asked);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const int64_t units = (p.n + p.block_n - 1) / p.block_n * p.splits;
    EXPECT_LE(units, SkinnyClusterCapacity(132, p.splits));
    EXPECT_EQ(source->work_blocks, units);
    EXPECT_EQ(source->launch.cluster[0], p.splits);
    EXPECT_EQ(source->launch.scratch_bytes, 0);
    for (const LaunchArg& arg : source->launch.args) EXPECT_NE(arg.kind, LaunchArg::Kind::kScratch);
    EXPECT_NE(source->function.find("kSplitsInCluster = 1"), std::string::npos);
    EXPECT_NE(source->function.find("nullptr, nullptr"), std::string::npos);
    EXPECT_NE(source->strategy.find("summed in a cluster"), std::string::npos) << source->strategy;
    // The tuner's space holds the rule's cluster form first and the splits through memory.
    const std::vector<CudaSkinnyGemmConfig> space = SkinnyGemmCandidates(*gemm, 132, true);
    ASSERT_FALSE(space.empty());
    EXPECT_EQ(space[0].in_cluster, 1);
    EXPECT_TRUE(std::any_of(space.begin(), space.end(), [](const CudaSkinnyGemmConfig& o) { return o.in_cluster == 0; }));
    for (const CudaSkinnyGemmConfig& candidate : space) EXPECT_TRUE(EmitCudaSkinnyGemm(*gemm, candidate).ok());
    // A configuration round-trips through the tuner's JSON with its form.
    EXPECT_EQ(SkinnyGemmConfigFromJson(SkinnyGemmConfigToJson(c)).in_cluster, 1);
  }
}

// The cluster form's limits: at most 8 splits (a portable cluster); a product whose units
// overflow one wave of clusters (an LM head) keeps its splits through memory.
TEST(CudaSkinnyGemmEmitterTest, TheClusterFormTakesAtMostEightSplitsInOneWave) {
  auto head = LowerOnlyGemm("g (bfloat16[1,768] x, bfloat16[50257,768] w) => (bfloat16[1,50257] y)",
                            "  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n");
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  CudaSkinnyGemmConfig asked;
  asked.clusters = true;
  EXPECT_EQ(ResolveSkinnyGemmConfig(*head, asked).in_cluster, 0);
  auto deep = LowerOnlyGemm("g (bfloat16[1,3072] x, bfloat16[3072,768] w) => (bfloat16[1,768] y)", "  y = MatMul (x, w)\n");
  ASSERT_TRUE(deep.ok());
  CudaSkinnyGemmConfig sixteen;
  sixteen.splits = 16;
  sixteen.in_cluster = 1;
  auto refused = EmitCudaSkinnyGemm(*deep, sixteen);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("16 splits in a cluster"), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(SkinnyClusterCapacity(132, 8), 120);  // 15 clusters of 8
  EXPECT_EQ(SkinnyClusterCapacity(132, 2), 128);
  EXPECT_EQ(SkinnyClusterCapacity(132, 6), 90);
}

// A weight's B (an input or a constant, which no kernel of the model writes) has its first
// stages loaded before the kernel waits for the grid ahead; a B the grid ahead computes waits.
// Either way the skeleton waits itself, so the kernel's body does not start with the wait.
TEST(CudaSkinnyGemmEmitterTest, AWeightsFirstStagesLoadBeforeTheGridAheadEnds) {
  for (bool weight : {true, false}) {
    SCOPED_TRACE(weight ? "a weight" : "computed");
    auto gemm = weight ? LowerOnlyGemm("g (bfloat16[1,768] x, bfloat16[768,2304] w) => (bfloat16[1,2304] y)", "  y = MatMul (x, w)\n")
                       : LowerOnlyGemm("g (bfloat16[1,768] x, bfloat16[768,2304] w) => (bfloat16[1,2304] y)",
                                       "  w2 = Tanh (w)\n  y = MatMul (x, w2)\n");
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    EXPECT_EQ(gemm->b_read_only, weight);
    auto source = EmitCudaSkinnyGemm(*gemm, {});
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_NE(source->function.find(weight ? "kBBeforeWait = 1" : "kBBeforeWait = 0"), std::string::npos) << source->function;
    EXPECT_EQ(source->function.find("{\n  tf::tf_await_prior_grid();"), std::string::npos) << source->function;
    EXPECT_TRUE(source->launch.awaits_prior_grid);
  }
}

}  // namespace
}  // namespace tilefuse

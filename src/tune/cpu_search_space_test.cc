// The CPU search space: the default first, each constraint prunes with its reason, and
// every configuration survives the JSON round trip the tuning cache stores it through.
#include "tune/cpu_search_space.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "testing/tune_test_models.h"

namespace tilefuse {
namespace {

using tune_test::LowerLastGroup;

bool AnyPrunedWith(const CppSearchSpace& space, const std::string& part) {
  return std::any_of(space.pruned.begin(), space.pruned.end(), [&](const std::string& p) { return p.find(part) != std::string::npos; });
}

bool Has(const CppSearchSpace& space, const CppKernelConfig& config) {
  return std::find(space.candidates.begin(), space.candidates.end(), config) != space.candidates.end();
}

TEST(CpuSearchSpaceTest, DefaultFirstNoDuplicatesAndJsonRoundTrip) {
  CppSearchSpace space = CppCandidates(LowerLastGroup(tune_test::SoftmaxModel(64, 128)), 4);
  ASSERT_GT(space.candidates.size(), 4u);
  EXPECT_EQ(space.candidates.front(), CppKernelConfig{});
  for (size_t i = 0; i < space.candidates.size(); ++i) {
    const CppKernelConfig& c = space.candidates[i];
    EXPECT_EQ(CppConfigFromJson(CppConfigToJson(c)), c) << CppConfigToJson(c).dump();
    EXPECT_EQ(std::count(space.candidates.begin(), space.candidates.end(), c), 1) << CppConfigToJson(c).dump();
  }
  EXPECT_EQ(CppConfigFromJson(nlohmann::json::object()), CppKernelConfig{});
}

TEST(CpuSearchSpaceTest, TeamsPrunedByCoresAndOuterIterations) {
  // Two rows on 64 cores: teams of 1 and 2 remain; 4..32 have idle threads; 64 is "all".
  CppSearchSpace space = CppCandidates(LowerLastGroup(tune_test::SoftmaxModel(2, 128)), 64);
  for (const CppKernelConfig& c : space.candidates) EXPECT_LE(c.threads, 2) << CppConfigToJson(c).dump();
  EXPECT_TRUE(Has(space, {1, CppSchedule::kStatic, 0, true}));
  EXPECT_TRUE(Has(space, {2, CppSchedule::kStatic, 0, true}));
  EXPECT_TRUE(AnyPrunedWith(space, "threads 4: more than the 2 outer iterations"));
  EXPECT_TRUE(AnyPrunedWith(space, "threads 64: not fewer than the 64 cores"));
}

TEST(CpuSearchSpaceTest, ChunksPrunedWhenLargerOrNotDividing) {
  // 48 rows on 2 cores: 24 per thread (16 does not divide it, 256 is larger); a team of
  // one has 48, which 16 divides.
  CppSearchSpace space = CppCandidates(LowerLastGroup(tune_test::SoftmaxModel(48, 128)), 2);
  EXPECT_TRUE(AnyPrunedWith(space, "threads 0 static_chunk chunk 16: does not divide a thread's 24 outer iterations"));
  EXPECT_TRUE(AnyPrunedWith(space, "threads 0 dynamic chunk 256: larger than a thread's 24 outer iterations"));
  // (Chunks of 16 rows are too few to pipeline: they appear once, row by row.)
  EXPECT_TRUE(Has(space, {1, CppSchedule::kStaticChunk, 16, true, false}));
  EXPECT_TRUE(Has(space, {1, CppSchedule::kDynamic, 16, false, false}));
  for (const CppKernelConfig& c : space.candidates) EXPECT_FALSE(c.threads == 0 && c.chunk == 16);
}

TEST(CpuSearchSpaceTest, RowBufferChoiceOnlyWhereThereIsOne) {
  CppSearchSpace softmax = CppCandidates(LowerLastGroup(tune_test::SoftmaxModel(64, 128)), 2);
  EXPECT_TRUE(Has(softmax, {0, CppSchedule::kStatic, 0, false}));
  EXPECT_FALSE(AnyPrunedWith(softmax, "no row buffer"));
  for (const std::string& model : {tune_test::NormalizeModel(64, 128), tune_test::PointwiseModel(64, 128)}) {
    CppSearchSpace space = CppCandidates(LowerLastGroup(model), 2);
    EXPECT_TRUE(AnyPrunedWith(space, "row_buffer false: the kernel has no row buffer"));
    for (const CppKernelConfig& c : space.candidates) EXPECT_TRUE(c.row_buffer);
  }
}

// The row buffer the emitter would keep is decided on the kernel as emitted: x² is a
// product there (codegen/kernel_rewrites.h), cheap to recompute, so there is no row buffer
// to choose (a pow call would have been kept in one).
TEST(CpuSearchSpaceTest, RowBufferDecidedOnTheKernelAsEmitted) {
  const std::string squares = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64,128] x) => (float[64,128] y) {
  two = Constant <value = float {2.0}> ()
  sq = Pow (x, two)
  axes = Constant <value = int64[1] {1}> ()
  s = ReduceSum <keepdims = 1> (sq, axes)
  y = Div (sq, s)
})";
  CppSearchSpace space = CppCandidates(LowerLastGroup(squares), 2);
  EXPECT_TRUE(AnyPrunedWith(space, "row_buffer false: the kernel has no row buffer"));
}

// Pipelining is a choice only for row kernels the emitter pipelines, and a chunk too
// small to pipeline is measured once, as the row-by-row kernel it is.
TEST(CpuSearchSpaceTest, PipelineChoiceOnlyForPipelinedRowKernels) {
  CppSearchSpace softmax = CppCandidates(LowerLastGroup(tune_test::SoftmaxModel(8192, 128)), 2);
  EXPECT_TRUE(Has(softmax, {0, CppSchedule::kStatic, 0, true, true}));
  EXPECT_TRUE(Has(softmax, {0, CppSchedule::kStatic, 0, true, false}));
  EXPECT_TRUE(Has(softmax, {0, CppSchedule::kDynamic, 256, true, true}));
  EXPECT_FALSE(Has(softmax, {0, CppSchedule::kDynamic, 16, true, true}));
  EXPECT_TRUE(Has(softmax, {0, CppSchedule::kDynamic, 16, true, false}));
  EXPECT_TRUE(AnyPrunedWith(softmax, "threads 0 dynamic chunk 16 pipelined: too few rows per chunk to pipeline"));
  for (const std::string& model : {tune_test::PointwiseModel(64, 128), tune_test::SoftmaxModel(8, 128)}) {
    CppSearchSpace space = CppCandidates(LowerLastGroup(model), 2);
    EXPECT_TRUE(AnyPrunedWith(space, "pipeline_rows false: the kernel is not a pipelined row kernel"));
    for (const CppKernelConfig& c : space.candidates) EXPECT_TRUE(c.pipeline_rows);
  }
}

TEST(CpuSearchSpaceTest, RankPrefersTheDefaultsNeighbours) {
  EXPECT_LT(CppConfigRank({}), CppConfigRank({0, CppSchedule::kStatic, 0, false}));
  EXPECT_LT(CppConfigRank({0, CppSchedule::kStaticChunk, 256, true}), CppConfigRank({0, CppSchedule::kDynamic, 256, true}));
  EXPECT_LT(CppConfigRank({0, CppSchedule::kDynamic, 4096, true}), CppConfigRank({0, CppSchedule::kDynamic, 16, true}));
  EXPECT_LT(CppConfigRank({0, CppSchedule::kDynamic, 16, false}), CppConfigRank({1, CppSchedule::kStatic, 0, true}));
}

}  // namespace
}  // namespace tilefuse

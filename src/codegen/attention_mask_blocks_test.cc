// Key blocks a mask removes: proven for causal masks (computed from indices or folded to
// a constant table), never claimed for masks that are not huge negatives, masks read from
// inputs, or query blocks with rows masked everywhere.
#include "codegen/attention_mask_blocks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <optional>

#include "codegen/attention_template.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// The one attention group of a bf16 [1, 2, n, 64] self-attention whose scores go through
// `mask_body` (defining `masked` from `scaled`, the scores times 0.125), lowered.
struct Lowered {
  PlannedText planned;
  AttentionTemplateKernel attention;
  AttentionLogits Logits() const {
    const AttentionTemplateKernel& a = attention;
    return {a.logits, a.logit, a.buffers, a.score_batch_index, a.nq, a.nk};
  }
};

std::optional<Lowered> Lower(int n, const std::string& mask_body, const std::string& extra_inputs = "",
                             const std::string& batch_and_heads = "1,2") {
  std::string shape = fmt::format("bfloat16[{},{},64]", batch_and_heads, n);
  std::string body = fmt::format(
      "  mask_shape = Constant <value = int64[2] {{{0}, {0}}}> ()\n"
      "  ones = ConstantOfShape <value = float[1] {{1.0}}> (mask_shape)\n"
      "  c = Constant <value = float {{0.125}}> ()\n  scale = Cast <to = 16> (c)\n"
      "  big_f32 = Constant <value = float {{-1e9}}> ()\n  neg_big = Cast <to = 16> (big_f32)\n"
      "  zero = Constant <value = float {{0.0}}> ()\n"
      "  k_t = Transpose <perm = [0, 1, 3, 2]> (k)\n  s = MatMul (q, k_t)\n  scaled = Mul (s, scale)\n"
      "{1}"
      "  p = Softmax <axis = -1> (masked)\n  out = MatMul (p, v)\n",
      n, mask_body);
  Lowered out{PlanOnnxText(fmt::format("g ({0} q, {0} k, {0} v{1}) => ({0} out)", shape, extra_inputs), body), {}};
  for (const FusionGroup& group : out.planned.plan.groups) {
    if (group.kind != GroupKind::kAttention) continue;
    auto a = LowerAttentionTemplate(out.planned.graph, group, FindInlinedGenerators(out.planned.graph));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return std::nullopt;
    out.attention = std::move(*a);
    return out;
  }
  ADD_FAILURE() << "no attention group";
  return std::nullopt;
}

// The key blocks the mask leaves per query block, 128 × 128 blocks.
std::vector<KeyBlockRange> Ranges(int n, const std::string& mask_body, const std::string& extra_inputs = "") {
  std::optional<Lowered> l = Lower(n, mask_body, extra_inputs);
  if (!l) return {};
  return UnmaskedKeyBlocks(l->planned.graph, l->Logits(), 128, 128);
}

const char* kCausal =
    "  lower = Trilu <upper = 0> (ones)\n  future = Equal (lower, zero)\n  masked = Where (future, neg_big, scaled)\n";

void ExpectCausal(const std::vector<KeyBlockRange>& ranges, int blocks) {
  ASSERT_EQ(ranges.size(), static_cast<size_t>(blocks));
  for (int mb = 0; mb < blocks; ++mb) {
    EXPECT_EQ(ranges[mb].first, 0) << "query block " << mb;
    EXPECT_EQ(ranges[mb].last, mb) << "query block " << mb;
  }
}

TEST(AttentionMaskBlocksTest, CausalMaskFromIndicesLeavesTheLowerTriangle) {
  ExpectCausal(Ranges(1100, kCausal), 9);  // too large to fold: the mask is index arithmetic
}

TEST(AttentionMaskBlocksTest, CausalMaskFoldedToATableLeavesTheLowerTriangle) {
  ExpectCausal(Ranges(300, kCausal), 3);  // folded: the logits read a constant bool table
}

TEST(AttentionMaskBlocksTest, AdditiveCausalMaskLeavesTheLowerTriangle) {
  ExpectCausal(Ranges(1100, "  lower = Trilu <upper = 0> (ones)\n  future = Equal (lower, zero)\n"
                            "  zero_bf16 = Cast <to = 16> (zero)\n  bias = Where (future, neg_big, zero_bf16)\n"
                            "  masked = Add (scaled, bias)\n"),
               9);
}

TEST(AttentionMaskBlocksTest, AMaskValueThatIsNotHugeRemovesNothing) {
  // -1 is a bias, not a mask: every key still contributes.
  auto ranges = Ranges(1100, "  lower = Trilu <upper = 0> (ones)\n  future = Equal (lower, zero)\n"
                             "  m1 = Constant <value = float {-1.0}> ()\n  minus_one = Cast <to = 16> (m1)\n"
                             "  masked = Where (future, minus_one, scaled)\n");
  for (const KeyBlockRange& r : ranges) EXPECT_EQ(r.last - r.first, 8);
}

TEST(AttentionMaskBlocksTest, AMaskReadFromAnInputRemovesNothing) {
  auto ranges = Ranges(300, "  masked = Where (future, neg_big, scaled)\n", ", bool[300,300] future");
  for (const KeyBlockRange& r : ranges) EXPECT_EQ(r.last - r.first, 2);
}

TEST(AttentionMaskBlocksTest, QueryBlocksWithRowsMaskedEverywhereKeepEveryKey) {
  // Row r keeps keys <= r - 300: rows below 300 are masked everywhere (the graph averages
  // all keys there), so query blocks 0..2 compute everything; block 3 (rows 384..511)
  // keeps keys up to 211: key blocks 0 and 1.
  auto ranges = Ranges(1100, "  shift = Constant <value = int64 {-300}> ()\n  lower = Trilu <upper = 0> (ones, shift)\n"
                             "  future = Equal (lower, zero)\n  masked = Where (future, neg_big, scaled)\n");
  ASSERT_EQ(ranges.size(), 9u);
  for (int mb = 0; mb < 3; ++mb) EXPECT_EQ(ranges[mb].last - ranges[mb].first, 8) << "query block " << mb;
  EXPECT_EQ(ranges[3].first, 0);
  EXPECT_EQ(ranges[3].last, 1);
}

// A folded mask table of two batches, [2, 1, n, n] under three heads: causal in batch 0 and
// keeping every key in batch 1 (`full_first` swaps them). The analysis remembers answers by
// the table elements a binding reads, so the heads of a batch share them; batch 1's rows are
// other elements, and must keep every key whatever batch 0's said.
std::optional<Lowered> TwoBatchTable(int n, bool full_first) {
  const std::string first = full_first ? "o3" : "l3", second = full_first ? "l3" : "o3";
  return Lower(n, fmt::format("  ax0 = Constant <value = int64[1] {{0}}> ()\n  ax1 = Constant <value = int64[1] {{1}}> ()\n"
                              "  lower = Trilu <upper = 0> (ones)\n  l3 = Unsqueeze (lower, ax0)\n  o3 = Unsqueeze (ones, ax0)\n"
                              "  both = Concat <axis = 0> ({}, {})\n  table = Unsqueeze (both, ax1)\n"
                              "  future = Equal (table, zero)\n  masked = Where (future, neg_big, scaled)\n",
                              first, second),
               "", "2,3");
}

TEST(AttentionMaskBlocksTest, ATableOfSeveralBatchesIsAnalysedBatchByBatch) {
  for (bool full_first : {false, true}) {
    std::optional<Lowered> l = TwoBatchTable(300, full_first);
    ASSERT_TRUE(l);
    // One query block range serves every batch: where any batch keeps a key, it is computed.
    for (const KeyBlockRange& r : UnmaskedKeyBlocks(l->planned.graph, l->Logits(), 128, 128))
      EXPECT_EQ(r.last - r.first, 2) << "full first: " << full_first;
  }
}

TEST(AttentionMaskBlocksTest, HeadsSharingACausalTableLeaveTheLowerTriangle) {
  ExpectCausal(Ranges(300, kCausal), 3);
  std::optional<Lowered> l = Lower(300, kCausal, "", "2,3");
  ASSERT_TRUE(l);
  ExpectCausal(UnmaskedKeyBlocks(l->planned.graph, l->Logits(), 128, 128), 3);
}

// Interior key blocks: where a block's selects all go one way, the logits run without them.
InteriorLogits Interior(const Lowered& l) { return InteriorKeyBlocks(l.planned.graph, l.Logits(), 128, 128); }

void ExpectBelowDiagonal(const InteriorLogits& interior, int query_blocks, int full_key_blocks) {
  ASSERT_EQ(interior.blocks.size(), static_cast<size_t>(query_blocks));
  for (int mb = 0; mb < query_blocks; ++mb) {
    const int last = std::min(mb - 1, full_key_blocks - 1);
    if (last < 0) {
      EXPECT_GT(interior.blocks[mb].first, interior.blocks[mb].last) << "query block " << mb << " has no interior block";
      continue;
    }
    EXPECT_EQ(interior.blocks[mb].first, 0) << "query block " << mb;
    EXPECT_EQ(interior.blocks[mb].last, last) << "query block " << mb;
  }
}

TEST(AttentionInteriorBlocksTest, ATableOfSeveralBatchesHasTheInteriorOfEach) {
  for (bool full_first : {false, true}) {
    std::optional<Lowered> l = TwoBatchTable(300, full_first);
    ASSERT_TRUE(l);
    ExpectBelowDiagonal(Interior(*l), 3, 2);  // the causal batch's, whichever comes first
  }
}

TEST(AttentionInteriorBlocksTest, CausalMaskFromIndicesIsLeftOutBelowTheDiagonal) {
  std::optional<Lowered> l = Lower(1100, kCausal);
  ASSERT_TRUE(l);
  InteriorLogits interior = Interior(*l);
  // 1100 keys: 8 full blocks of 128 (the ninth, with keys past the end, is never interior).
  ExpectBelowDiagonal(interior, 9, 8);
  EXPECT_EQ(ScoreMultiplier(interior.program, interior.logit), 0.125) << "the interior logit is the scaled score";
  EXPECT_EQ(ScoreMultiplier(l->attention.logits, l->attention.logit), std::nullopt) << "the whole program has the mask";
}

TEST(AttentionInteriorBlocksTest, CausalMaskFoldedToATableIsLeftOutBelowTheDiagonal) {
  std::optional<Lowered> l = Lower(300, kCausal);
  ASSERT_TRUE(l);
  InteriorLogits interior = Interior(*l);
  ExpectBelowDiagonal(interior, 3, 2);
  EXPECT_EQ(ScoreMultiplier(interior.program, interior.logit), 0.125);
}

TEST(AttentionInteriorBlocksTest, AdditiveCausalMaskIsLeftOutBelowTheDiagonal) {
  std::optional<Lowered> l = Lower(1100, "  lower = Trilu <upper = 0> (ones)\n  future = Equal (lower, zero)\n"
                                         "  zero_bf16 = Cast <to = 16> (zero)\n  bias = Where (future, neg_big, zero_bf16)\n"
                                         "  masked = Add (scaled, bias)\n");
  ASSERT_TRUE(l);
  InteriorLogits interior = Interior(*l);
  ExpectBelowDiagonal(interior, 9, 8);
  EXPECT_EQ(ScoreMultiplier(interior.program, interior.logit), 0.125) << "scaled + 0 is the scaled score";
}

TEST(AttentionInteriorBlocksTest, WithoutAMaskEveryFullBlockIsInterior) {
  std::optional<Lowered> l = Lower(1100, "  masked = Identity (scaled)\n");
  ASSERT_TRUE(l);
  InteriorLogits interior = Interior(*l);
  ASSERT_EQ(interior.blocks.size(), 9u);
  for (const KeyBlockRange& r : interior.blocks) {
    EXPECT_EQ(r.first, 0);
    EXPECT_EQ(r.last, 7);
  }
  EXPECT_EQ(ScoreMultiplier(l->attention.logits, l->attention.logit), 0.125);
}

TEST(AttentionInteriorBlocksTest, AMaskReadFromAnInputHasNoInterior) {
  std::optional<Lowered> l = Lower(300, "  masked = Where (future, neg_big, scaled)\n", ", bool[300,300] future");
  ASSERT_TRUE(l);
  EXPECT_FALSE(Interior(*l).Any());
}

TEST(AttentionInteriorBlocksTest, ABiasIsKeptInTheInterior) {
  // A mask of -1 is a bias: the blocks it covers are still decided, but their logit is not the
  // scaled score alone, so the multiplier cannot be folded there.
  std::optional<Lowered> l = Lower(1100, "  lower = Trilu <upper = 0> (ones)\n  future = Equal (lower, zero)\n"
                                         "  m1 = Constant <value = float {-1.0}> ()\n  minus_one = Cast <to = 16> (m1)\n"
                                         "  masked = Where (future, minus_one, scaled)\n");
  ASSERT_TRUE(l);
  InteriorLogits interior = Interior(*l);
  ASSERT_TRUE(interior.Any());
  // Blocks above the diagonal (all -1) and below (all scaled) are both decided; below the
  // diagonal there are as many, and the first counted wins a tie — either way the program
  // matches its blocks: check it is one of the two.
  const std::optional<double> c = ScoreMultiplier(interior.program, interior.logit);
  if (c) {
    EXPECT_EQ(*c, 0.125);
    ExpectBelowDiagonal(interior, 9, 8);
  } else {
    for (int mb = 0; mb < 9; ++mb) {
      if (interior.blocks[mb].first <= interior.blocks[mb].last) {
        EXPECT_GT(interior.blocks[mb].first, mb) << "above the diagonal";
      }
    }
  }
}

}  // namespace
}  // namespace tilefuse

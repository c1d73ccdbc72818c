// Key blocks a mask removes: proven for causal masks (computed from indices or folded to
// a constant table), never claimed for masks that are not huge negatives, masks read from
// inputs, or query blocks with rows masked everywhere.
#include "codegen/attention_mask_blocks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen/attention_template.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// The ranges for the one attention group of a bf16 [1, 2, n, 64] self-attention whose
// scores go through `mask_body` (defining `masked` from `scaled`), 128 × 128 blocks.
std::vector<KeyBlockRange> Ranges(int n, const std::string& mask_body, const std::string& extra_inputs = "") {
  std::string shape = fmt::format("bfloat16[1,2,{},64]", n);
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
  PlannedText p = PlanOnnxText(fmt::format("g ({0} q, {0} k, {0} v{1}) => ({0} out)", shape, extra_inputs), body);
  for (const FusionGroup& group : p.plan.groups) {
    if (group.kind != GroupKind::kAttention) continue;
    auto a = LowerAttentionTemplate(p.graph, group, FindInlinedGenerators(p.graph));
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (!a.ok()) return {};
    return UnmaskedKeyBlocks(p.graph, {a->logits, a->logit, a->buffers, a->score_batch_index, a->nq, a->nk}, 128, 128);
  }
  ADD_FAILURE() << "no attention group";
  return {};
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

}  // namespace
}  // namespace tilefuse

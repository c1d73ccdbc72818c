// Which epilogues read the product at a partner column: rotary embeddings' rotated halves of
// heads of a power-of-two width, proven on the lowered program's indices and selects; any
// other shifted read is refused with the reason.
#include "codegen/gemm_partner_columns.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fmt/format.h>

#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// The gemm group's problem of `rows` × 256 · 256 × (heads · d), the product viewed as
// [rows, heads, d] and `body` (reading p3, writing y) after it.
StatusOr<GemmTemplateKernel> Problem(int64_t rows, int64_t heads, int64_t d, const std::string& body) {
  const std::string signature =
      fmt::format("g (bfloat16[{0},256] x, bfloat16[256,{1}] w, bfloat16[{0},1,{2}] cos, bfloat16[{0},1,{2}] sin) => (bfloat16[{0},{3},{2}] y)",
                  rows, heads * d, d, heads);
  const std::string head = fmt::format("  p = MatMul (x, w)\n  shape = Constant <value = int64[3] {{{}, {}, {}}}> ()\n  p3 = Reshape (p, shape)\n",
                                       rows, heads, d);
  PlannedText planned = PlanOnnxText(signature, head + body);
  for (const FusionGroup& group : planned.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      const bool whole = std::any_of(group.nodes.begin(), group.nodes.end(), [&](int id) { return planned.graph.node(id).op == OpCode::kConcat; });
      if (!whole) return Internal("the concat is not in the gemm group");
      return LowerGemmProblem(planned.graph, group, SplitGemmGroup(planned.graph, group), FindInlinedGenerators(planned.graph));
    }
  return Internal("no gemm group");
}

// y = p3·cos + concat(-p3[..., d/2:], p3[..., :d/2])·sin
std::string Rotary(int64_t d) {
  return fmt::format(
      "  zero = Constant <value = int64[1] {{0}}> ()\n  half = Constant <value = int64[1] {{{}}}> ()\n"
      "  whole = Constant <value = int64[1] {{{}}}> ()\n  last = Constant <value = int64[1] {{2}}> ()\n"
      "  lo = Slice (p3, zero, half, last)\n  hi = Slice (p3, half, whole, last)\n  hn = Neg (hi)\n"
      "  rot = Concat <axis = 2> (hn, lo)\n  a = Mul (p3, cos)\n  b = Mul (rot, sin)\n  y = Add (a, b)\n",
      d / 2, d);
}

TEST(GemmPartnerColumnsTest, RotatedHalvesOfPowerOfTwoHeadsReadTheirPartnerColumn) {
  for (int64_t d : {128, 64}) {
    SCOPED_TRACE(d);
    auto gemm = Problem(200, 4, d, Rotary(d));
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    EXPECT_EQ(gemm->partner, d / 2);
    EXPECT_EQ(gemm->partner_loads.size(), 2u);  // each half of the concat loads the product once
  }
}

TEST(GemmPartnerColumnsTest, OtherShiftedReadsAreRefusedWithTheReason) {
  // Heads of 96: column c reads c + 48 or c - 48, which is not c XOR 48 for every c.
  auto odd_heads = Problem(64, 4, 96, Rotary(96));
  ASSERT_FALSE(odd_heads.ok());
  EXPECT_NE(odd_heads.status().message().find("one partner column only"), std::string::npos) << odd_heads.status().ToString();
  // A roll by one column: c reads c + 1 (or the head's first), no partner.
  auto roll = Problem(64, 4, 128,
                      "  zero = Constant <value = int64[1] {0}> ()\n  one = Constant <value = int64[1] {1}> ()\n"
                      "  whole = Constant <value = int64[1] {128}> ()\n  last = Constant <value = int64[1] {2}> ()\n"
                      "  first = Slice (p3, zero, one, last)\n  rest = Slice (p3, one, whole, last)\n"
                      "  rolled = Concat <axis = 2> (rest, first)\n  a = Mul (rolled, cos)\n  y = Add (a, sin)\n");
  ASSERT_FALSE(roll.ok());
  EXPECT_NE(roll.status().message().find("reads the product"), std::string::npos) << roll.status().ToString();
}

}  // namespace
}  // namespace tilefuse

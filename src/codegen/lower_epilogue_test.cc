// A template's epilogue stores an output that is a transpose of one of its values from where
// that value is computed (the product's position), not by computing it again at the
// output's own position; and which of its accesses move column pairs as words.
#include <gtest/gtest.h>

#include <algorithm>

#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "codegen/lower.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// tanh of a [200, 256] product viewed as [1, 200, 4, 64] heads, output as it is (y) and with
// the heads moved before the rows (cache, [1, 4, 200, 64]), or another transpose.
PlannedText Heads(const std::string& perm, const std::string& cache_shape) {
  return PlanOnnxText("g (bfloat16[200,96] x, bfloat16[96,256] w) => (bfloat16[1,200,4,64] y, bfloat16[" + cache_shape + "] cache)",
                      "  p = MatMul (x, w)\n  shape = Constant <value = int64[4] {1, 200, 4, 64}> ()\n  p4 = Reshape (p, shape)\n"
                      "  y = Tanh (p4)\n  cache = Transpose <perm = " + perm + "> (y)\n");
}

const FusionGroup* GemmGroup(const PlannedText& p) {
  for (const FusionGroup& g : p.plan.groups)
    if (g.kind == GroupKind::kGemm) return &g;
  return nullptr;
}

TEST(LowerEpilogueTest, ATransposedOutputIsStoredFromItsSourcesValue) {
  PlannedText p = Heads("[0, 2, 1, 3]", "1,4,200,64");
  const FusionGroup* group = GemmGroup(p);
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->outputs.size(), 2u) << "both outputs from the product's group";
  auto gemm = LowerGemmProblem(p.graph, *group, SplitGemmGroup(p.graph, *group), FindInlinedGenerators(p.graph));
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const Kernel& k = gemm->epilogue;
  ASSERT_EQ(k.stores.size(), 2u);
  EXPECT_EQ(k.stores[0].value, k.stores[1].value) << "tanh computed once, stored twice";
  EXPECT_TRUE(gemm->partner_loads.empty()) << "every load of the product at its position";
  const KernelStore& cache = k.buffers[k.stores[0].buffer].node == p.graph.outputs()[1].node ? k.stores[0] : k.stores[1];
  EXPECT_FALSE(AtProductPosition(*gemm, cache.index));
  // Product element (row t, column h·64 + d) lands at cache[0][h][t][d].
  for (int64_t t : {0, 7, 199})
    for (int64_t c : {0, 1, 63, 64, 130, 255})
      EXPECT_EQ(EvaluateIndex(cache.index, {t, c}), (c / 64) * 200 * 64 + t * 64 + c % 64) << t << " " << c;
  EXPECT_TRUE(PairsAreAdjacent(*gemm, cache.index)) << "a column pair's elements stay adjacent";
}

TEST(LowerEpilogueTest, PairsThatATransposeSeparatesMoveAsElements) {
  // The heads' columns moved to the front: a column pair's two elements land 200 · 4 apart.
  PlannedText p = Heads("[0, 3, 1, 2]", "1,64,200,4");
  const FusionGroup* group = GemmGroup(p);
  ASSERT_NE(group, nullptr);
  auto gemm = LowerGemmProblem(p.graph, *group, SplitGemmGroup(p.graph, *group), FindInlinedGenerators(p.graph));
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  bool separated = false;
  for (const KernelStore& st : gemm->epilogue.stores)
    if (!AtProductPosition(*gemm, st.index)) separated = !PairsAreAdjacent(*gemm, st.index);
  EXPECT_TRUE(separated);
}

}  // namespace
}  // namespace tilefuse

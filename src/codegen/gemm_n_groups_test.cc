#include "codegen/gemm_n_groups.h"

#include <gtest/gtest.h>

#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_gemm_search_space.h"
#include "testing/gemm_problem_test_util.h"

namespace tilefuse {
namespace {

// A linear layer's product of hidden 1024.
GemmTemplateKernel Linear(int product, int weight, int64_t rows, int64_t n, int64_t k = 1024) {
  return LinearProblem(product, weight, rows, n, k);
}

TEST(GemmNGroupsTest, PartsSideBySideKeepTheirOwnWeightsAndOutputs) {
  auto grouped = GroupOverN({Linear(10, 1, 128, 2048), Linear(11, 2, 128, 512), Linear(12, 3, 128, 512)});
  ASSERT_TRUE(grouped.ok()) << grouped.status().ToString();
  EXPECT_EQ(grouped->n, 3072);
  EXPECT_EQ(grouped->k, 1024);
  EXPECT_EQ(grouped->b_k_major, 1);
  EXPECT_EQ(grouped->outputs, (std::vector<int>{10, 11, 12}));
  ASSERT_EQ(grouped->n_parts.size(), 3u);
  EXPECT_EQ(grouped->n_parts[2].b_k_major, 3);
  EXPECT_TRUE(PartsTakeWidth(*grouped, 256));
  EXPECT_FALSE(PartsTakeWidth(*grouped, 192));
  EXPECT_TRUE(PartsTakeWidth(Linear(10, 1, 128, 100), 192));  // a single product has no parts
}

TEST(GemmNGroupsTest, OnlyProductsOfOneAByWholeWeightsGroup) {
  GemmTemplateKernel other_a = Linear(11, 2, 128, 512);
  other_a.a = 5;
  EXPECT_FALSE(GroupOverN({Linear(10, 1, 128, 512), other_a}).ok());
  EXPECT_FALSE(GroupOverN({Linear(10, 1, 128, 512), Linear(11, 2, 128, 512, 768)}).ok());  // another K
  EXPECT_FALSE(GroupOverN({Linear(10, 1, 128, 512)}).ok());                                  // one product
  GemmTemplateKernel computed_b = Linear(11, 2, 128, 512);
  computed_b.b_read_only = false;  // a kernel of the model writes it
  EXPECT_FALSE(GroupableOverN(computed_b).ok());
  EXPECT_FALSE(GroupableOverN(Linear(11, 2, 128, 500)).ok());  // a part's columns in whole 64s
  GemmTemplateKernel batched = Linear(11, 2, 128, 512);
  batched.batch = 4;
  EXPECT_FALSE(GroupableOverN(batched).ok());
  std::vector<GemmTemplateKernel> five;
  for (int i = 0; i < 5; ++i) five.push_back(Linear(10 + i, i, 128, 64));
  EXPECT_FALSE(GroupOverN(five).ok());
}

// The rule and the tuner's forms give a grouped product only tiles within one part: parts of
// 320 and 192 columns take 64-column tiles, where 320 + 192 alone would take wider ones.
TEST(GemmNGroupsTest, TilesKeepToOnePart) {
  auto grouped = GroupOverN({Linear(10, 1, 4096, 320), Linear(11, 2, 4096, 192)});
  ASSERT_TRUE(grouped.ok());
  CudaGemmConfig rule;
  EXPECT_EQ(ResolveGemmConfig(*grouped, rule).block_n, 64);
  EXPECT_GT(ResolveGemmConfig(Linear(10, 1, 4096, 512), rule).block_n, 64);
  for (const CudaGemmConfig& c : GemmCandidates(*grouped, 132, std::nullopt).candidates) {
    EXPECT_EQ(c.block_n, 64);
    EXPECT_FALSE(c.overlap_epilogue.value_or(false));  // the parts store from the main loop's tail
  }
}

}  // namespace
}  // namespace tilefuse

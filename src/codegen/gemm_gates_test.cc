#include "codegen/gemm_gates.h"

#include <gtest/gtest.h>

#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_gemm_search_space.h"
#include "codegen/gemm_n_groups.h"
#include "testing/gemm_problem_test_util.h"

namespace tilefuse {
namespace {

// A linear layer's product of hidden 2048 (the LLaMA-style model's).
GemmTemplateKernel Linear(int product, int weight, int64_t rows, int64_t n, int64_t k = 2048) {
  return LinearProblem(product, weight, rows, n, k);
}

GemmTemplateKernel Gated(int64_t rows, int64_t n) {
  GemmTemplateKernel g = Linear(11, 2, rows, n);
  g.gate.push_back(Linear(10, 1, rows, n));
  g.gate.back().output_in_registers = true;
  g.gate_value = 10;
  return g;
}

// A tile of a gated product computes half its width of output columns: the same columns of
// both products.
TEST(GemmGatesTest, ATileHoldsHalfItsWidthOfEachProduct) {
  const GemmTemplateKernel g = Gated(128, 5632);
  EXPECT_EQ(TileOutputColumns(g, 256), 128);
  EXPECT_EQ(TileOutputColumns(Linear(11, 2, 128, 5632), 256), 256);
  EXPECT_EQ(gemm_layout::Tiles(g, 64, 256), 2 * 44);
  EXPECT_EQ(gemm_layout::Tiles(Linear(11, 2, 128, 5632), 64, 256), 2 * 22);
  // Halves of whole 64-column boxes that tile N.
  EXPECT_TRUE(GateTakesWidth(g, 128));
  EXPECT_TRUE(GateTakesWidth(g, 256));
  EXPECT_FALSE(GateTakesWidth(g, 64));
  EXPECT_FALSE(GateTakesWidth(g, 192));
  EXPECT_FALSE(GateTakesWidth(Gated(128, 5632 - 64), 256));  // 87 halves of 64: no whole 128s
  EXPECT_FALSE(PartsTakeWidth(g, 64));
  EXPECT_TRUE(GateTakesWidth(Linear(11, 2, 128, 100), 64));  // no gate
  EXPECT_FALSE(GroupableOverN(g).ok());                       // nor grouped over N besides
}

// The rule and the tuner's forms give a gated product only widths it takes: at 128 rows the
// wider tiles where the narrower would leave a second round (88 tiles of 64x256 on 132 SMs,
// not 176 of 64x128), and at 4096 rows none of 64 or 192 columns.
TEST(GemmGatesTest, RuleAndSearchSpaceTakeWholeBoxesAHalf) {
  CudaGemmConfig rule;
  rule.sm_count = 132;
  const CudaGemmConfig few = ResolveGemmConfig(Gated(128, 5632), rule);
  EXPECT_EQ(few.block_m, 64);
  EXPECT_EQ(few.block_n, 256);
  EXPECT_EQ(ResolveGemmConfig(Gated(128, 1024), rule).block_n, 128);  // 32 tiles of 64x128 fill no round
  const CudaGemmConfig many = ResolveGemmConfig(Gated(4096, 5632), rule);
  EXPECT_TRUE(GateTakesWidth(Gated(4096, 5632), many.block_n)) << many.block_n;
  for (const CudaGemmConfig& c : GemmCandidates(Gated(4096, 5632), 132, std::nullopt).candidates)
    EXPECT_TRUE(c.block_n == 128 || c.block_n == 256) << c.block_n;
  // f32 at f32's accuracy (3xTF32): 64 columns of each a tile where an ungated product's are 64.
  GemmTemplateKernel exact = Gated(100, 2816);
  exact.dtype = exact.operand_dtype = exact.gate[0].dtype = exact.gate[0].operand_dtype = DType::kF32;
  exact.split_f32 = exact.gate[0].split_f32 = true;
  EXPECT_EQ(ResolveGemmConfig(exact, rule).block_n, 128);
  exact.rows = 4096;
  EXPECT_EQ(ResolveGemmConfig(exact, rule).block_n, 128);  // 3xTF32's tiles stay 128 wide
}

}  // namespace
}  // namespace tilefuse

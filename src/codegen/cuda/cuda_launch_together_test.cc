#include "codegen/cuda/cuda_launch_together.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

// A kernel in the loop emitter's form: a grid-stride loop over `elements`, `blocks` blocks.
CudaKernelSource GridStride(const std::string& name, int64_t elements, int64_t blocks, int first_node) {
  CudaKernelSource s;
  s.name = name;
  s.threads = 256;
  s.function = "extern \"C\" __global__ void __launch_bounds__(256) " + name +
               "(const float* __restrict__ b0, float* __restrict__ b1) {\n" + kAwaitPriorGrid +
               "  const int thread = (int)blockIdx.x * blockDim.x + threadIdx.x;\n"
               "  const int threads = (int)gridDim.x * blockDim.x;\n"
               "  for (int i = thread; i < " + std::to_string(elements) + "; i += threads) b1[i] = b0[i] * 2.0f;\n}\n";
  s.launch.grid = {blocks, 1, 1};
  s.launch.block = {256, 1, 1};
  s.launch.awaits_prior_grid = true;
  s.launch.args = {{LaunchArg::Kind::kBuffer, first_node, {}, 0}, {LaunchArg::Kind::kBuffer, first_node + 1, {}, 0}};
  s.num_params = 2;
  s.work_blocks = blocks;
  s.strategy = "pointwise x1";
  return s;
}

// Each part becomes a device function of its own block and grid; the kernel hands blocks
// [0, 8) to the first as a grid of 8 and [8, 10) to the second as a grid of 2, and takes both
// parts' arguments in order, renamed apart.
TEST(LaunchTogetherTest, EachPartRunsItsBlocksAsItsOwnGrid) {
  auto together = LaunchTogether("k", {GridStride("a", 2048, 8, 10), GridStride("b", 512, 2, 20)});
  ASSERT_TRUE(together.ok()) << together.status().ToString();
  const std::string& f = together->function;
  EXPECT_NE(f.find("__device__ __forceinline__ void k_part0(const float* __restrict__ b0, float* __restrict__ b1, const unsigned "
                   "tf_block_x, const unsigned tf_grid_x)"),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("(int)tf_block_x * blockDim.x"), std::string::npos) << f;
  EXPECT_NE(f.find("(int)tf_grid_x * blockDim.x"), std::string::npos) << f;
  EXPECT_EQ(f.find("blockIdx.x * blockDim.x"), std::string::npos) << f;
  EXPECT_NE(f.find("extern \"C\" __global__ void __launch_bounds__(256) k(const float* __restrict__ p0_b0, float* __restrict__ p0_b1, "
                   "const float* __restrict__ p1_b0, float* __restrict__ p1_b1) {\n  tf::tf_await_prior_grid();\n"),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("if (block < 8u) {\n    k_part0(p0_b0, p0_b1, block - 0u, 8u);"), std::string::npos) << f;
  EXPECT_NE(f.find("if (block < 10u) {\n    k_part1(p1_b0, p1_b1, block - 8u, 2u);"), std::string::npos) << f;
  // The parts' own waits are gone: the kernel awaits the prior grid once, first.
  EXPECT_EQ(f.find(kAwaitPriorGrid), f.find("{\n  tf::tf_await_prior_grid();") + 2);
  EXPECT_EQ(together->launch.grid[0], 10);
  ASSERT_EQ(together->launch.args.size(), 4u);
  EXPECT_EQ(together->launch.args[2].node, 20);
  EXPECT_TRUE(together->launch.awaits_prior_grid);
}

TEST(LaunchTogetherTest, OnlyPlainLoopKernelsOfOneBlockSize) {
  CudaKernelSource shared = GridStride("a", 2048, 8, 10);
  shared.launch.dynamic_shared_bytes = 1024;
  EXPECT_FALSE(CanLaunchTogether(shared).ok());
  CudaKernelSource templated = GridStride("a", 2048, 8, 10);
  templated.includes = {"gemm_sm90.cuh"};
  EXPECT_FALSE(CanLaunchTogether(templated).ok());
  CudaKernelSource two_d = GridStride("a", 2048, 8, 10);
  two_d.function.insert(two_d.function.find("  for"), "  const int y = blockIdx.y;\n");
  EXPECT_FALSE(CanLaunchTogether(two_d).ok());
  CudaKernelSource renamed = GridStride("a", 2048, 8, 10);
  renamed.name = "other";
  EXPECT_FALSE(CanLaunchTogether(renamed).ok());
  CudaKernelSource wider = GridStride("b", 2048, 8, 10);
  wider.launch.block = {512, 1, 1};
  EXPECT_FALSE(LaunchTogether("k", {GridStride("a", 2048, 8, 10), wider}).ok());
  EXPECT_FALSE(LaunchTogether("k", {GridStride("a", 2048, 8, 10)}).ok());  // one part
}

}  // namespace
}  // namespace tilefuse

// Every configuration the tuner may pick for a row kernel, run on a GPU against the f64
// reference: layer norms with scale and bias and an RMS norm with a weight (the row-invariant
// vectors, held beside the row or read after the reductions), in bf16 and f32, of one input
// and of a sum folded first, over rows that leave the last block of 4 warps part-full and rows
// a block prefetches.
// Needs a GPU; skipped without one, and run by scripts/gpu-check.sh.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "codegen/kernel_fingerprint.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "testing/random_inputs.h"
#include "testing/reference_check.h"
#include "tilefuse/builder.h"
#include "tune/cuda_search_space.h"

namespace tilefuse {
namespace {

struct RowCase {
  const char* name;
  int64_t rows, columns;
  DType dtype;
  bool residual;  // the layer norm of x + r: the rows' inputs folded into one value first
  bool rms = false;  // an RMS norm with a weight (x * rsqrt(mean(x^2) + eps) * w) instead
};

// A layer norm with scale and bias, or an RMS norm with a weight (of x + r, with `residual`).
Graph ScaledNorm(const RowCase& c) {
  GraphBuilder b;
  Value x = b.Parameter("x", c.dtype, {c.rows, c.columns});
  if (c.residual) x = b.Add(x, b.Parameter("r", c.dtype, {c.rows, c.columns}));
  if (c.rms) {
    Value mean_square = b.Reduce(OpCode::kReduceMean, b.Mul(x, x), {-1}, /*keepdims=*/true);
    b.Output(b.Mul(b.Mul(x, b.Unary(OpCode::kRsqrt, b.AddScalar(mean_square, 1e-6))), b.Parameter("w", c.dtype, {c.columns})), "y");
  } else {
    Value scale = b.Parameter("scale", c.dtype, {c.columns});
    Value bias = b.Parameter("bias", c.dtype, {c.columns});
    b.Output(b.LayerNorm(x, scale, bias, 1, 1e-5), "y");
  }
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

class CudaCandidatesOnGpuTest : public testing::TestWithParam<RowCase> {};

TEST_P(CudaCandidatesOnGpuTest, EveryRowCandidateOfANormMatchesTheReference) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the row candidates not run";
  const Graph graph = ScaledNorm(GetParam());
  const std::vector<Tensor> inputs = RandomInputs(graph, 5);
  CudaCompileOptions options;
  options.poison_outputs = true;
  auto rule = CompileForCuda(graph, options);
  ASSERT_TRUE(rule.ok()) << rule.status().ToString();
  std::vector<const CudaLaunchable*> kernels = (*rule)->launchables();
  ASSERT_EQ(kernels.size(), 1u) << (*rule)->source();
  const Kernel& kernel = kernels[0]->kernel;
  const CudaSearchSpace space = CudaCandidates(kernel, /*clusters=*/true);
  int beside = 0;
  for (const CudaKernelConfig& c : space.candidates) {
    SCOPED_TRACE(CudaConfigToJson(c).dump());
    options.configs[KernelFingerprint(kernel)] = c;
    auto compiled = CompileForCuda(graph, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    std::vector<const CudaLaunchable*> emitted = (*compiled)->launchables();
    ASSERT_EQ(emitted.size(), 1u);
    EXPECT_TRUE(SameCudaConfig(emitted[0]->source.config, c)) << "ran " << CudaConfigToJson(emitted[0]->source.config).dump();
    const bool held_beside = emitted[0]->source.strategy.find("row and row-invariant vectors in registers") != std::string::npos;
    EXPECT_EQ(held_beside, c.broadcast_with_row) << emitted[0]->source.strategy;
    beside += held_beside;
    ExpectMatchesReference(graph, inputs, (*compiled)->Run(inputs));
  }
  EXPECT_GT(beside, 0) << "no candidate held the row-invariant vectors beside the row";
}

// 301 rows: blocks of 4 rows end with one; 768 columns: 3 vectors of 8 a lane for a warp;
// 8192 bf16 columns over 300 rows: 1024-thread blocks, one an SM prefetching its next row;
// RMS norm over 4096 bf16 columns: the rule's 256-thread block, 2 vectors a thread.
INSTANTIATE_TEST_SUITE_P(Rows, CudaCandidatesOnGpuTest,
                         testing::Values(RowCase{"bf16_301x768", 301, 768, DType::kBF16, false},
                                         RowCase{"f32_301x1024", 301, 1024, DType::kF32, false},
                                         RowCase{"residual_bf16_301x768", 301, 768, DType::kBF16, true},
                                         RowCase{"bf16_300x8192", 300, 8192, DType::kBF16, false},
                                         RowCase{"rms_bf16_301x4096", 301, 4096, DType::kBF16, false, true}),
                         [](const testing::TestParamInfo<RowCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tilefuse

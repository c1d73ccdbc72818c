// Every configuration the tuner may pick for a row kernel, run on a GPU against the f64
// reference: a layer norm with scale and bias (the row-invariant vectors, held beside the row
// or read after the reductions) over rows that leave the last block of 4 warps part-full.
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

Graph ScaledLayerNorm(int64_t rows, int64_t columns) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {rows, columns});
  Value scale = b.Parameter("scale", DType::kBF16, {columns});
  Value bias = b.Parameter("bias", DType::kBF16, {columns});
  b.Output(b.LayerNorm(x, scale, bias, 1, 1e-5), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

TEST(CudaCandidatesOnGpuTest, EveryRowCandidateOfALayerNormMatchesTheReference) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the row candidates not run";
  // 301 rows: blocks of 4 rows end with one; 768 columns: 3 vectors of 8 a lane for a warp.
  const Graph graph = ScaledLayerNorm(301, 768);
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
    ASSERT_EQ((*compiled)->kernels().size(), 1u);
    const std::string& strategy = (*compiled)->kernels()[0].strategy;
    const bool held_beside = strategy.find("row and row-invariant vectors in registers") != std::string::npos;
    EXPECT_EQ(held_beside, c.broadcast_with_row) << strategy;
    beside += held_beside;
    ExpectMatchesReference(graph, inputs, (*compiled)->Run(inputs));
  }
  EXPECT_GT(beside, 0) << "no candidate held the scale and bias beside the row";
}

}  // namespace
}  // namespace tilefuse

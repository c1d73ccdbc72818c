// f32 products on the GEMM template's 3xTF32 form (--precision highest, the default): f32's
// accuracy from TF32 tensor cores. Needs a GPU (skipped without one; run by
// scripts/gpu-check.sh's `tests` stage). Each product is held to 1e-5 of its output's scale
// against the f64 reference, which f32 sums meet (~1e-7 here) and TF32's rounded inputs miss
// (~1e-4): the same graph under --precision high must fail it, so a form that quietly ran
// one TF32 product would fail too.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "api/backend_setup.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// y = x · w + b + r with w a constant [K][N] (stored K-major by the graph passes, as the
// template's TF32 forms read it) or, `weight_input`, an input read [K][N] (MN-major: 3xTF32
// transposes its parts itself).
Graph Linear(int64_t rows, int64_t k, int64_t n, bool weight_input) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {rows, k});
  Value w = weight_input ? b.Parameter("w", DType::kF32, {k, n}) : b.Constant(Tensor::Random(DType::kF32, {k, n}, 11));
  Value bias = b.Constant(Tensor::Random(DType::kF32, {n}, 12));
  b.Output(b.Add(b.Add(b.MatMul(x, w), bias), b.Parameter("r", DType::kF32, {rows, n})), "y");
  StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

struct Result {
  std::string strategy;
  double error_to_scale = 0;  // the worst |y - reference| over max |reference|
};

Result RunLinear(int64_t rows, int64_t k, int64_t n, MatmulPrecision precision, bool weight_input = false) {
  Result result;
  StatusOr<Graph> passed = RunGraphPasses(Linear(rows, k, n, weight_input), CudaPassOptions());
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  if (!passed.ok()) return result;
  CudaCompileOptions options;
  options.precision = precision;
  options.gemm = GemmPath::kTemplate;
  StatusOr<std::unique_ptr<CudaExecutable>> compiled = CompileForCuda(*passed, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return result;
  for (const CudaKernelInfo& k : (*compiled)->kernels())
    if (k.mode == "gemm template") result.strategy = k.strategy;
  std::vector<Tensor> inputs = {Tensor::Random(DType::kF32, {rows, k}, 21)};
  if (weight_input) inputs.push_back(Tensor::Random(DType::kF32, {k, n}, 11));
  inputs.push_back(Tensor::Random(DType::kF32, {rows, n}, 22));
  StatusOr<std::vector<Tensor>> got = (*compiled)->Run(inputs);
  StatusOr<std::vector<Tensor>> expected = RunReference(*passed, inputs);
  EXPECT_TRUE(got.ok() && expected.ok());
  if (!got.ok() || !expected.ok()) return result;
  const Comparison c = CompareNormwise((*got)[0], (*expected)[0], {.rtol = 0, .atol = 1e-5});
  result.error_to_scale = c.max_abs_err / std::max(1.0, MaxFiniteMagnitude((*expected)[0]));
  EXPECT_EQ(c.mismatches == 0, c.pass);
  EXPECT_FALSE(std::isnan(c.max_abs_err));
  return result;
}

class Gemm3xTf32GpuTest : public testing::Test {
 protected:
  void SetUp() override {
    auto device = CudaDevice::Get();
    if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; 3xTF32 products not run";
    if ((*device)->arch() != "sm_90a") GTEST_SKIP() << "the GEMM template needs sm_90a, not " << (*device)->arch();
  }
};

// Ragged tiles and a K tail (520 = 16 steps of 32 + 8), a persistent grid whose CTAs take
// several tiles (2304 x 2304 in 128-row tiles), and few rows with K split (40 x 4096).
TEST_F(Gemm3xTf32GpuTest, MatchesF32AndTf32DoesNot) {
  struct Shape {
    int64_t rows, k, n;
  };
  for (const Shape& s : {Shape{300, 520, 200}, Shape{2304, 520, 2304}, Shape{40, 4096, 1000}}) {
    SCOPED_TRACE(fmt::format("{} x {} x {}", s.rows, s.k, s.n));
    const Result exact = RunLinear(s.rows, s.k, s.n, MatmulPrecision::kHighest);
    EXPECT_NE(exact.strategy.find("3xTF32"), std::string::npos) << exact.strategy;
    EXPECT_LE(exact.error_to_scale, 1e-5) << exact.strategy;
    const Result tf32 = RunLinear(s.rows, s.k, s.n, MatmulPrecision::kHigh);
    EXPECT_NE(tf32.strategy.find(" TF32"), std::string::npos) << tf32.strategy;
    EXPECT_GT(tf32.error_to_scale, 1e-5) << "TF32 itself meets the bound: it cannot tell 3xTF32 from TF32";
    std::printf("  %lld x %lld x %lld: error to scale 3xTF32 %.2e, TF32 %.2e (%s)\n", static_cast<long long>(s.rows),
                static_cast<long long>(s.k), static_cast<long long>(s.n), exact.error_to_scale, tf32.error_to_scale,
                exact.strategy.c_str());
  }
}

// B given as [K][N] (an input): 3xTF32 writes its parts K-major itself, in the same three
// shapes' forms (TF32 does not take such a B: cuBLASLt's TF32 runs it).
TEST_F(Gemm3xTf32GpuTest, TransposesAnMnMajorWeightAndMatchesF32) {
  struct Shape {
    int64_t rows, k, n;
  };
  for (const Shape& s : {Shape{300, 520, 200}, Shape{2304, 520, 2304}, Shape{40, 4096, 1000}}) {
    SCOPED_TRACE(fmt::format("{} x {} x {}, B [K][N]", s.rows, s.k, s.n));
    const Result exact = RunLinear(s.rows, s.k, s.n, MatmulPrecision::kHighest, /*weight_input=*/true);
    EXPECT_NE(exact.strategy.find("3xTF32"), std::string::npos) << exact.strategy;
    EXPECT_EQ(exact.strategy.find("B K-major"), std::string::npos) << exact.strategy;
    EXPECT_LE(exact.error_to_scale, 1e-5) << exact.strategy;
    std::printf("  %lld x %lld x %lld, B [K][N]: error to scale 3xTF32 %.2e (%s)\n", static_cast<long long>(s.rows),
                static_cast<long long>(s.k), static_cast<long long>(s.n), exact.error_to_scale, exact.strategy.c_str());
  }
}

}  // namespace
}  // namespace tilefuse

// The device library's division by a constant (tf_div_by_constant: the reciprocal's product
// corrected once by its FMA remainder) against the device's IEEE division, bit for bit, for
// quantization-like scales and others: x across the range where it is exact (2^-100 to 2^100,
// both signs, every binade, random significands) and zeros, infinities and NaN. Compiling needs
// NVRTC only (CI); running needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"

namespace tilefuse {
namespace {

constexpr float kDivisors[] = {0.005523681640625f, 0.003082275390625f, 1.0f / 448, 0.1f, 3.0f, -7.0f, 0x1p-24f, 0x1.fffffep23f};

// For each divisor d: fast[d * n + i] = tf_div_by_constant(x[i], c, 1 / c), exact[...] = x[i] / c.
constexpr char kKernel[] = R"(
extern "C" __global__ void __launch_bounds__(256) division(const float* __restrict__ x, const float* __restrict__ divisors,
                                                          float* __restrict__ fast, float* __restrict__ exact, long long n) {
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    for (int d = 0; d < 8; ++d) {
      const float c = divisors[d];
      fast[d * n + i] = tf_div_by_constant(x[i], c, __frcp_rn(c));
      exact[d * n + i] = __fdiv_rn(x[i], c);
    }
}
)";

std::vector<float> Inputs() {
  std::vector<float> x = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  std::mt19937 rng(2026);
  std::uniform_int_distribution<uint32_t> significand(0, (1u << 23) - 1);
  for (int e = -100; e < 100; ++e)
    for (int i = 0; i < 2000; ++i) {
      const uint32_t bits = (i % 2 ? 0x80000000u : 0u) | uint32_t(e + 127) << 23 | significand(rng);
      float v;
      std::memcpy(&v, &bits, 4);
      x.push_back(v);
    }
  return x;
}

TEST(DeviceDivisionTest, KernelCompilesForSm90a) {
  const CompiledTestKernel compiled = CompileTestKernelForSm90a(kKernel);
  if (!compiled.skip.empty()) GTEST_SKIP() << compiled.skip << "; the division kernel not compiled";
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.ToString();
}

TEST(DeviceDivisionTest, DivisionByAConstantIsIeeeDivision) {
  LoadedTestKernel kernel;
  LoadTestKernel(kKernel, "division", kernel);
  if (!kernel.skip.empty()) GTEST_SKIP() << kernel.skip << "; the device's division by a constant not run";
  ASSERT_TRUE(kernel.status.ok()) << kernel.status.ToString();
  const CudaDevice& gpu = *kernel.gpu;
  const CudaDriverApi& api = gpu.api();
  const std::vector<float> x = Inputs();
  const size_t n = x.size(), divisors = std::size(kDivisors);
  DeviceBuffers buffers{&gpu, {0, 0, 0, 0}};
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[0], n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[1], divisors * 4), CUDA_SUCCESS);
  for (int i = 2; i < 4; ++i) ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[i], divisors * n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], x.data(), n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[1], kDivisors, divisors * 4), CUDA_SUCCESS);
  Status ran = LaunchOverElements(gpu, kernel.function, buffers.pointers, static_cast<int64_t>(n), 132, "division");
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  std::vector<float> fast(divisors * n), exact(divisors * n);
  ASSERT_EQ(api.cuMemcpyDtoH(fast.data(), buffers.pointers[2], divisors * n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyDtoH(exact.data(), buffers.pointers[3], divisors * n * 4), CUDA_SUCCESS);
  int wrong = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    const bool same = std::isnan(exact[i]) ? std::isnan(fast[i]) : std::memcmp(&fast[i], &exact[i], 4) == 0;
    if (!same && wrong++ < 8)
      ADD_FAILURE() << fmt::format("{:a} / {:a}: {:a} where IEEE division gives {:a}", x[i % n], kDivisors[i / n], fast[i], exact[i]);
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tilefuse

// The device library's tf_one_plus_erf_fast (erf GELU's 1 + erf(t) where the result is rounded
// to 16 bits) against the host's erfc(-t) in double: within 1.2e-5 relatively for |t| <= 6 (the
// fit's range: 1e-5 in f32 arithmetic, the SFU's exp2 a few ulp more), a few 1e-17 absolutely
// beyond (1 + erf(t) is then below 2e-17 or within an ulp of 2), and the ends: 2 at +inf, 0 at
// -inf, NaN for NaN. Compiling needs NVRTC only (CI); running needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <limits>

#include "backend/cuda/device_test_util.h"

namespace tilefuse {
namespace {

constexpr char kKernel[] = R"(
extern "C" __global__ void __launch_bounds__(256) one_plus_erf(const float* __restrict__ t, float* __restrict__ y, long long n) {
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = tf_one_plus_erf_fast(t[i]);
}
)";

TEST(DeviceOnePlusErfTest, KernelCompilesForSm90a) {
  const CompiledTestKernel compiled = CompileTestKernelForSm90a(kKernel);
  if (!compiled.skip.empty()) GTEST_SKIP() << compiled.skip << "; the kernel not compiled";
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.ToString();
}

TEST(DeviceOnePlusErfTest, WithinItsBoundOfErfcEverywhere) {
  LoadedTestKernel kernel;
  LoadTestKernel(kKernel, "one_plus_erf", kernel);
  if (!kernel.skip.empty()) GTEST_SKIP() << kernel.skip << "; tf_one_plus_erf_fast not run";
  ASSERT_TRUE(kernel.status.ok()) << kernel.status.ToString();
  const CudaDevice& gpu = *kernel.gpu;
  const CudaDriverApi& api = gpu.api();

  // Every 1/4096 over [-10, 10] (both sides of the fit's end at 6), and the ends.
  std::vector<float> t;
  for (int i = -40960; i <= 40960; ++i) t.push_back(static_cast<float>(i) / 4096.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {inf, -inf, std::numeric_limits<float>::quiet_NaN(), 6.0f, -6.0f, std::nextafter(6.0f, 7.0f), 1e-30f, -1e-30f})
    t.push_back(special);
  const size_t bytes = t.size() * 4;
  DeviceBuffers buffers{&gpu, {0, 0}};
  for (CUdeviceptr& p : buffers.pointers) ASSERT_EQ(api.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], t.data(), bytes), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD8Async(buffers.pointers[1], 0xA5, bytes, gpu.stream()), CUDA_SUCCESS);  // poisoned

  Status ran = LaunchOverElements(gpu, kernel.function, buffers.pointers, static_cast<int64_t>(t.size()), 128, "one_plus_erf");
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  std::vector<float> y(t.size());
  ASSERT_EQ(api.cuMemcpyDtoH(y.data(), buffers.pointers[1], bytes), CUDA_SUCCESS);

  int wrong = 0;
  double worst = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const double want = std::erfc(-static_cast<double>(t[i])), got = y[i];
    bool ok;
    if (std::isnan(t[i])) {
      ok = std::isnan(got);
    } else if (std::fabs(t[i]) <= 6.0f) {
      const double relative = std::fabs(got - want) / want;
      worst = std::max(worst, relative);
      ok = relative <= 1.2e-5;
    } else {
      ok = std::fabs(got - want) <= 1e-16 + 2.5e-7 * want;  // below 2e-17, or within an ulp of 2
    }
    if (!ok && wrong++ < 8) ADD_FAILURE() << fmt::format("t = {}: got {:.9g}, 1 + erf(t) = {:.9g}", t[i], got, want);
  }
  EXPECT_EQ(wrong, 0);
  RecordProperty("worst_relative_error", fmt::format("{:.3g}", worst));
}

}  // namespace
}  // namespace tilefuse

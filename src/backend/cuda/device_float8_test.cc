// The device library's 8-bit float conversions against the host's (ir/dtype.cc, what the
// reference interpreter converts with), bit for bit, for all four types: the hardware
// conversions of e4m3 and e5m2 (cvt.*.satfinite on sm_89 and later) and the FNUZ forms'
// software ones. Inputs: every value of each type, the midpoints between neighbours (ties to
// even), zeros of both signs, overflow, infinities and NaN. A store saturates (ONNX's Cast by
// default); NaN must stay NaN. Compiling needs NVRTC only (CI); running needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"
#include "tilefuse/dtype.h"

namespace tilefuse {
namespace {

constexpr DType kTypes[] = {DType::kF8E4M3, DType::kF8E5M2, DType::kF8E4M3Fnuz, DType::kF8E5M2Fnuz};

// For each type t: bytes[t * n + i] = x[i] stored as t, back[t * n + i] those bytes read.
constexpr char kKernel[] = R"(
extern "C" __global__ void __launch_bounds__(256) float8_conversions(const float* __restrict__ x, uint8_t* __restrict__ bytes,
                                                                    float* __restrict__ back, long long n) {
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    bytes[i] = tf_pack_f8e4m3(x[i]);
    bytes[n + i] = tf_pack_f8e5m2(x[i]);
    bytes[2 * n + i] = tf_pack_f8e4m3fnuz(x[i]);
    bytes[3 * n + i] = tf_pack_f8e5m2fnuz(x[i]);
    back[i] = tf_cvt_f8e4m3(bytes[i]);
    back[n + i] = tf_cvt_f8e5m2(bytes[n + i]);
    back[2 * n + i] = tf_cvt_f8e4m3fnuz(bytes[2 * n + i]);
    back[3 * n + i] = tf_cvt_f8e5m2fnuz(bytes[3 * n + i]);
  }
}
)";

std::vector<float> Inputs() {
  std::vector<float> values = {0.0f, -0.0f, 1e6f, -1e6f, INFINITY, -INFINITY, NAN, -NAN, 1e-30f, -1e-30f};
  for (DType d : kTypes)
    for (int bits = 0; bits < 256; ++bits) {
      const double v = Float8BitsToFloat(static_cast<uint8_t>(bits), d), next = Float8BitsToFloat(static_cast<uint8_t>(bits + 1), d);
      values.push_back(static_cast<float>(v));
      if (bits % 128 != 127 && std::isfinite(v) && std::isfinite(next)) values.push_back(static_cast<float>((v + next) / 2));
    }
  return values;
}

TEST(DeviceFloat8Test, KernelCompilesForSm90a) {
  const CompiledTestKernel compiled = CompileTestKernelForSm90a(kKernel);
  if (!compiled.skip.empty()) GTEST_SKIP() << compiled.skip << "; the conversion kernel not compiled";
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.ToString();
}

TEST(DeviceFloat8Test, EveryTypeConvertsAsTheHostDoes) {
  LoadedTestKernel kernel;
  LoadTestKernel(kKernel, "float8_conversions", kernel);
  if (!kernel.skip.empty()) GTEST_SKIP() << kernel.skip << "; the device's 8-bit float conversions not run";
  ASSERT_TRUE(kernel.status.ok()) << kernel.status.ToString();
  const CudaDevice& gpu = *kernel.gpu;
  const CudaDriverApi& api = gpu.api();

  const std::vector<float> x = Inputs();
  const size_t n = x.size(), types = std::size(kTypes);
  DeviceBuffers buffers{&gpu, {0, 0, 0}};
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[0], n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[1], types * n), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemAlloc(&buffers.pointers[2], types * n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], x.data(), n * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD8Async(buffers.pointers[1], 0xA5, types * n, gpu.stream()), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD8Async(buffers.pointers[2], 0xA5, types * n * 4, gpu.stream()), CUDA_SUCCESS);
  Status ran = LaunchOverElements(gpu, kernel.function, buffers.pointers, static_cast<int64_t>(n), 64, "float8_conversions");
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  std::vector<uint8_t> bytes(types * n);
  std::vector<float> back(types * n);
  ASSERT_EQ(api.cuMemcpyDtoH(bytes.data(), buffers.pointers[1], types * n), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyDtoH(back.data(), buffers.pointers[2], types * n * 4), CUDA_SUCCESS);

  int wrong = 0;
  for (size_t t = 0; t < types; ++t)
    for (size_t i = 0; i < n; ++i) {
      const uint8_t want = FloatToFloat8Bits(x[i], kTypes[t], /*saturate=*/true);
      const double want_back = Float8BitsToFloat(want, kTypes[t]);
      const uint8_t got = bytes[t * n + i];
      const float got_back = back[t * n + i];
      const bool same = std::isnan(want_back) ? std::isnan(Float8BitsToFloat(got, kTypes[t])) && std::isnan(got_back)
                                              : got == want && got_back == want_back;
      if (!same && wrong++ < 8)
        ADD_FAILURE() << fmt::format("{} of {}: the device stores {:02x} and reads back {}, the host {:02x} and {}", DTypeName(kTypes[t]),
                                     x[i], got, got_back, want, want_back);
    }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tilefuse

// The device library's bf16 rounding against the host's (FloatToBF16Bits, what the reference
// interpreter rounds with), bit for bit, over every bf16 value's neighbourhood: each of the
// 65536 upper halves with lower halves below, at and above the tie, and the ends (zeros,
// subnormals, the largest finite values, infinities, NaNs). Three device paths: tf_cast_bf16 (a
// value rounded and widened back: one cvt.rn.bf16x2.f32 on sm_80 and later), the integer
// rounding tf_float_to_bf16 (scalar stores) and tf_pack2_bf16 (paired stores). NaN must stay NaN
// (its payload may differ). Compiling needs NVRTC only (CI); running needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"
#include "tilefuse/dtype.h"

namespace tilefuse {
namespace {

constexpr char kKernel[] = R"(
extern "C" __global__ void __launch_bounds__(256) bf16_rounding(const float* __restrict__ x, unsigned* __restrict__ widened,
                                                               unsigned* __restrict__ integer, unsigned* __restrict__ paired, long long n) {
  for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    widened[i] = __float_as_uint(tf_cast_bf16(x[i]));
    integer[i] = tf_float_to_bf16(x[i]);
    paired[i] = tf_pack2_bf16(x[i], -x[i]);
  }
}
)";

// Bit patterns around every bf16 value, and the ends.
std::vector<uint32_t> Patterns() {
  std::vector<uint32_t> bits;
  for (uint32_t upper = 0; upper < 0x10000; ++upper)
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) bits.push_back(upper << 16 | lower);
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u,
                           0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u})
    bits.push_back(special);
  return bits;
}

bool IsNanBits(uint32_t bits) { return (bits & 0x7fffffffu) > 0x7f800000u; }

TEST(DeviceBf16RoundingTest, KernelCompilesForSm90a) {
  const CompiledTestKernel compiled = CompileTestKernelForSm90a(kKernel);
  if (!compiled.skip.empty()) GTEST_SKIP() << compiled.skip << "; the rounding kernel not compiled";
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.ToString();
}


TEST(DeviceBf16RoundingTest, EveryDevicePathRoundsAsTheHostDoes) {
  LoadedTestKernel kernel;
  LoadTestKernel(kKernel, "bf16_rounding", kernel);
  if (!kernel.skip.empty()) GTEST_SKIP() << kernel.skip << "; the device's bf16 rounding not run";
  ASSERT_TRUE(kernel.status.ok()) << kernel.status.ToString();
  const CudaDevice& gpu = *kernel.gpu;
  const CudaDriverApi& api = gpu.api();

  const std::vector<uint32_t> bits = Patterns();
  const int n = static_cast<int>(bits.size());
  const size_t bytes = bits.size() * 4;
  DeviceBuffers buffers{&gpu, {0, 0, 0, 0}};
  for (CUdeviceptr& p : buffers.pointers) ASSERT_EQ(api.cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyHtoD(buffers.pointers[0], bits.data(), bytes), CUDA_SUCCESS);
  for (int i = 1; i < 4; ++i) ASSERT_EQ(api.cuMemsetD8Async(buffers.pointers[i], 0xA5, bytes, gpu.stream()), CUDA_SUCCESS);

  Status ran = LaunchOverElements(gpu, kernel.function, buffers.pointers, n, 256, "bf16_rounding");
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  std::vector<uint32_t> widened(bits.size()), integer(bits.size()), paired(bits.size());
  ASSERT_EQ(api.cuMemcpyDtoH(widened.data(), buffers.pointers[1], bytes), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyDtoH(integer.data(), buffers.pointers[2], bytes), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyDtoH(paired.data(), buffers.pointers[3], bytes), CUDA_SUCCESS);

  int wrong = 0;
  auto expect = [&](const char* path, size_t i, uint32_t got, float value) {
    const uint32_t want = uint32_t{FloatToBF16Bits(value)} << 16;
    const bool same = IsNanBits(want) ? IsNanBits(got) : got == want;
    if (!same && wrong++ < 8)
      ADD_FAILURE() << fmt::format("{}: input {:08x} gave {:08x}, the host rounds to {:08x}", path, bits[i], got, want);
  };
  for (size_t i = 0; i < bits.size(); ++i) {
    float x;
    std::memcpy(&x, &bits[i], 4);
    expect("tf_cast_bf16", i, widened[i], x);
    expect("tf_float_to_bf16", i, integer[i] << 16, x);
    expect("tf_pack2_bf16 (low half)", i, paired[i] << 16, x);
    expect("tf_pack2_bf16 (high half)", i, paired[i] & 0xffff0000u, -x);
  }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace tilefuse

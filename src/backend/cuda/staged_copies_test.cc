// The staged-copies kernel: compiles for sm_90a through NVRTC with no spills (CI, no GPU), and
// on a GPU copies every entry of a table whole and nothing beyond: sizes from one byte to
// over a megabyte, tails under 16 bytes, more entries than one launch takes; destinations
// poisoned first, the bytes around each copy checked untouched.
#include "backend/cuda/staged_copies.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/device_test_util.h"
#include "backend/cuda/nvrtc_compiler.h"

namespace tilefuse {
namespace {

TEST(StagedCopiesTest, KernelCompilesForSm90aWithoutSpills) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString() << "; the staged-copies kernel not compiled";
  StatusOr<CubinResult> cubin = nvrtc->Compile(StagedCopiesSource(), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  if (cubin->from_cache) return;  // the report came with the first compile, checked then
  const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubin->ptxas_log);
  ASSERT_EQ(report.size(), 1u) << "NVRTC " << nvrtc->version() << ", its log (" << cubin->ptxas_log.size() << " bytes): "
                               << cubin->ptxas_log;
  EXPECT_EQ(report[0].spill_store_bytes, 0) << report[0].line;
  EXPECT_EQ(report[0].stack_frame_bytes, 0) << report[0].line;
}

TEST(StagedCopiesTest, CopiesEveryEntryWholeAndNothingElse) {
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the staged copies not run";
  const CudaDevice& gpu = **device;
  const CudaDriverApi& api = gpu.api();
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  // Entry sizes: scalars, tails, a logits row (50257 bf16), over a megabyte; then enough small
  // ones that the table takes two launches.
  std::vector<int64_t> sizes = {1, 8, 15, 16, 17, 100514, (1 << 20) + 5, 3 * 4096 + 7};
  while (sizes.size() < kStagedCopiesPerLaunch + 9) sizes.push_back(8 + static_cast<int64_t>(sizes.size()) * 24);
  // Each entry at its own 256-byte aligned slot, with 256 guard bytes after it.
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int64_t n : sizes) {
    offsets.push_back(total);
    total += (n + 256 + 255) / 256 * 256;
  }
  std::mt19937 random(5);
  std::vector<uint8_t> source(total), poison(total, 0xA5);
  for (uint8_t& b : source) b = static_cast<uint8_t>(random());
  DeviceBuffers buffers{&gpu, {0, 0}};
  ASSERT_TRUE(gpu.Check(api.cuMemAlloc(&buffers.pointers[0], total), "cuMemAlloc").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemAlloc(&buffers.pointers[1], total), "cuMemAlloc").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemcpyHtoD(buffers.pointers[0], source.data(), total), "upload").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemcpyHtoD(buffers.pointers[1], poison.data(), total), "poison").ok());
  std::vector<StagedCopy> copies;
  for (size_t i = 0; i < sizes.size(); ++i)
    copies.push_back({buffers.pointers[0] + offsets[i], buffers.pointers[1] + offsets[i], sizes[i]});
  const Status launched = LaunchStagedCopies(gpu, TestKernelCacheDir(), copies, gpu.stream());
  ASSERT_TRUE(launched.ok()) << launched.ToString();
  ASSERT_TRUE(gpu.Check(api.cuStreamSynchronize(gpu.stream()), "the copies").ok());
  std::vector<uint8_t> copied(total);
  ASSERT_TRUE(gpu.Check(api.cuMemcpyDtoH(copied.data(), buffers.pointers[1], total), "download").ok());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t end = i + 1 < sizes.size() ? offsets[i + 1] : total;
    for (int64_t b = offsets[i]; b < end; ++b) {
      const uint8_t expected = b < offsets[i] + sizes[i] ? source[b] : 0xA5;
      ASSERT_EQ(copied[b], expected) << "entry " << i << " (" << sizes[i] << " bytes), byte " << b - offsets[i];
    }
  }
}

// An address off 16 bytes (the kernel's vectors) is copied too, by the copy engine, beside
// the kernel's aligned entries.
TEST(StagedCopiesTest, AMisalignedEntryIsCopiedByTheCopyEngine) {
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the staged copies not run";
  const CudaDevice& gpu = **device;
  const CudaDriverApi& api = gpu.api();
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  constexpr int64_t kBytes = 4096;
  std::vector<uint8_t> source(kBytes), poison(kBytes, 0x5A);
  for (int64_t i = 0; i < kBytes; ++i) source[i] = static_cast<uint8_t>(i * 7 + 3);
  DeviceBuffers buffers{&gpu, {0, 0}};
  ASSERT_TRUE(gpu.Check(api.cuMemAlloc(&buffers.pointers[0], kBytes), "cuMemAlloc").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemAlloc(&buffers.pointers[1], kBytes), "cuMemAlloc").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemcpyHtoD(buffers.pointers[0], source.data(), kBytes), "upload").ok());
  ASSERT_TRUE(gpu.Check(api.cuMemcpyHtoD(buffers.pointers[1], poison.data(), kBytes), "poison").ok());
  const CUdeviceptr from = buffers.pointers[0], to = buffers.pointers[1];
  const Status launched = LaunchStagedCopies(gpu, TestKernelCacheDir(), {{from, to, 1000}, {from + 2052, to + 2050, 999}}, gpu.stream());
  ASSERT_TRUE(launched.ok()) << launched.ToString();
  ASSERT_TRUE(gpu.Check(api.cuStreamSynchronize(gpu.stream()), "the copies").ok());
  std::vector<uint8_t> copied(kBytes);
  ASSERT_TRUE(gpu.Check(api.cuMemcpyDtoH(copied.data(), to, kBytes), "download").ok());
  for (int64_t b = 0; b < kBytes; ++b) {
    const uint8_t expected = b < 1000 ? source[b] : b >= 2050 && b < 2050 + 999 ? source[b + 2] : 0x5A;
    ASSERT_EQ(copied[b], expected) << "byte " << b;
  }
}

}  // namespace
}  // namespace tilefuse

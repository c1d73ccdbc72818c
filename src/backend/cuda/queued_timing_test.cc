// TimeQueuedCalls on a GPU: every call runs, in order, after the sleep; an error while
// queueing is returned and the stream runs on. Skipped without a GPU.
#include "backend/cuda/queued_timing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cuda/device_allocator.h"

namespace tilefuse {
namespace {

class QueuedTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<CudaDevice*> device = CudaDevice::Get();
    if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; queued timing not run";
    device_ = *device;
    ASSERT_TRUE(device_->MakeCurrent().ok());
    alloc_ = &DeviceAllocator::Get(device_);
    StatusOr<CUdeviceptr> p = alloc_->Allocate(kWords * sizeof(uint32_t), "test words");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    words_ = DeviceBuffer(alloc_, *p);
    ASSERT_EQ(api().cuMemsetD32Async(words_.get(), 0, kWords, device_->stream()), CUDA_SUCCESS);
  }
  const CudaDriverApi& api() const { return device_->api(); }
  // Call i writes i + 1 into word i and into the last word (the order's witness).
  Status WriteWord(int i) {
    CUdeviceptr base = words_.get();
    RETURN_IF_ERROR(device_->Check(api().cuMemsetD32Async(base + 4 * i, i + 1, 1, device_->stream()), "word i"));
    return device_->Check(api().cuMemsetD32Async(base + 4 * (kWords - 1), i + 1, 1, device_->stream()), "last word");
  }
  std::vector<uint32_t> Download() {
    std::vector<uint32_t> host(kWords);
    EXPECT_EQ(api().cuMemcpyDtoHAsync(host.data(), words_.get(), kWords * sizeof(uint32_t), device_->stream()), CUDA_SUCCESS);
    EXPECT_EQ(api().cuStreamSynchronize(device_->stream()), CUDA_SUCCESS);
    return host;
  }

  static constexpr int kWords = 64;
  CudaDevice* device_ = nullptr;
  DeviceAllocator* alloc_ = nullptr;
  DeviceBuffer words_;
};

TEST_F(QueuedTimingTest, RunsEveryCallInOrderAndTimesEach) {
  constexpr int kCalls = 45;  // three chunks, the last one short
  StatusOr<std::vector<double>> us = TimeQueuedCalls(*device_, kCalls, [&](int i) { return WriteWord(i); });
  ASSERT_TRUE(us.ok()) << us.status().ToString();
  ASSERT_EQ(us->size(), size_t{kCalls});
  for (double t : *us) EXPECT_TRUE(std::isfinite(t) && t >= 0) << t;
  std::vector<uint32_t> host = Download();
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(host[i], uint32_t(i + 1)) << "call " << i;
  EXPECT_EQ(host[kWords - 1], uint32_t{kCalls}) << "the calls ran out of order";
}

TEST_F(QueuedTimingTest, AnErrorWhileQueueingIsReturnedAndTheStreamRunsOn) {
  constexpr int kFailing = 27;  // in the second chunk
  StatusOr<std::vector<double>> us = TimeQueuedCalls(*device_, 45, [&](int i) {
    if (i == kFailing) return Internal("refused on purpose");
    return WriteWord(i);
  });
  ASSERT_FALSE(us.ok());
  EXPECT_NE(us.status().message().find("refused on purpose"), std::string::npos) << us.status().ToString();
  // The stream runs on: the calls queued before the error ran, and a later copy completes.
  std::vector<uint32_t> host = Download();
  for (int i = 0; i < kFailing; ++i) EXPECT_EQ(host[i], uint32_t(i + 1)) << "call " << i;
  EXPECT_EQ(host[kFailing], 0u);
  StatusOr<std::vector<double>> again = TimeQueuedCalls(*device_, 3, [&](int i) { return WriteWord(i); });
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

}  // namespace
}  // namespace tilefuse

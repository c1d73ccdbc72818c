#include "support/host_buffer_pool.h"

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

#include "tilefuse/tensor.h"

namespace tilefuse {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool Aligned(const std::byte* p) { return reinterpret_cast<uintptr_t>(p) % HostBufferPool::kAlignment == 0; }

TEST(HostBufferPoolTest, BuffersAreAlignedAndWritable) {
  HostBufferPool pool(64 * kMiB);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{100}, kMiB - 1, kMiB, 3 * kMiB + 5}) {
    std::byte* p = pool.Allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(Aligned(p)) << bytes;
    std::memset(p, 0xAB, bytes);
    pool.Release(p, bytes);
  }
}

TEST(HostBufferPoolTest, ReleasedLargeBufferIsReusedForTheSameSizeClass) {
  if (HostBufferPool::Sanitized()) GTEST_SKIP() << "AddressSanitizer build: the pool caches nothing";
  HostBufferPool pool(64 * kMiB);
  std::byte* first = pool.Allocate(5 * kMiB);
  pool.Release(first, 5 * kMiB);
  EXPECT_EQ(pool.cached_bytes(), 6 * kMiB);  // rounded up to whole 2 MiB pages
  std::byte* again = pool.Allocate(5 * kMiB + 100);  // same size class
  EXPECT_EQ(again, first);
  EXPECT_EQ(pool.reuses(), 1u);
  EXPECT_EQ(pool.cached_bytes(), 0u);
  std::byte* other = pool.Allocate(9 * kMiB);  // another class: a fresh buffer
  EXPECT_NE(other, first);
  pool.Release(again, 5 * kMiB);
  pool.Release(other, 9 * kMiB);
  pool.Trim();
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(HostBufferPoolTest, CachesNoMoreThanItsLimit) {
  HostBufferPool pool(4 * kMiB);
  std::byte* a = pool.Allocate(4 * kMiB);
  std::byte* b = pool.Allocate(4 * kMiB);
  pool.Release(a, 4 * kMiB);
  pool.Release(b, 4 * kMiB);  // over the limit: unmapped, not cached
  EXPECT_LE(pool.cached_bytes(), 4 * kMiB);
  HostBufferPool off(0);
  std::byte* c = off.Allocate(4 * kMiB);
  off.Release(c, 4 * kMiB);
  EXPECT_EQ(off.cached_bytes(), 0u);
}

TEST(HostBufferPoolTest, TensorsZeroFillUnlessUninitialized) {
  // A released buffer full of 0xFF comes back: the zero-filled constructor must clear it.
  {
    Tensor dirty(DType::kF32, {1024, 1024});
    dirty.Poison();
  }
  Tensor clean(DType::kF32, {1024, 1024});
  for (int64_t i = 0; i < clean.num_elements(); i += 4099) ASSERT_EQ(clean.GetDouble(i), 0.0) << i;
  Tensor raw = Tensor::Uninitialized(DType::kF16, {3, 5});
  EXPECT_EQ(raw.num_bytes(), 30u);
  EXPECT_TRUE(Aligned(raw.data()));
}

}  // namespace
}  // namespace tilefuse

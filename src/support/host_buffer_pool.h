// A caching allocator for large host buffers (tensors of inputs, outputs and reference
// results).
//
// A large buffer is expensive to get fresh from the OS: above glibc's mmap threshold each
// allocation is a new mapping, and the first touch of each 4 KiB page is a fault (about
// 2.5 µs in a VM: 40 ms for a 64 MiB output, more than the fused kernel that fills it).
// Like PyTorch's caching allocators, the pool keeps freed large buffers and hands them to
// the next allocation of the same size class, so a graph run in a loop reuses its
// outputs' pages. Fresh large buffers are mapped with transparent huge pages requested,
// so even their first touch faults once per 2 MiB.
//
// Small buffers (< 1 MiB) go straight to the C++ allocator. Cached bytes are bounded
// (TILEFUSE_HOST_POOL_MB, default a quarter of physical memory, at most 4 GiB; 0 turns
// caching off); under AddressSanitizer caching is off so use-after-free stays visible.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace tilefuse {

class HostBufferPool {
 public:
  static constexpr size_t kAlignment = 64;  // a cache line; every AVX-512 load is aligned

  static HostBufferPool& Global();
  explicit HostBufferPool(size_t cache_limit_bytes);
  ~HostBufferPool();
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  // `bytes` uninitialised bytes, kAlignment-aligned. Never null (bad_alloc when out of memory).
  std::byte* Allocate(size_t bytes);
  // Gives back a buffer from Allocate(bytes).
  void Release(std::byte* data, size_t bytes);
  // Frees every cached buffer.
  void Trim();

  // True under AddressSanitizer: every buffer then comes from the C++ allocator, uncached.
  static bool Sanitized();

  size_t cached_bytes() const;
  size_t reuses() const;  // allocations answered from the cache

 private:
  std::map<size_t, std::vector<std::byte*>> free_;  // size class → cached buffers
  size_t cache_limit_bytes_;
  size_t cached_bytes_ = 0;
  size_t reuses_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace tilefuse

#include "support/host_buffer_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

namespace tilefuse {

namespace {

constexpr size_t kLargeBytes = size_t{1} << 20;  // from here on: mapped and cached
constexpr size_t kHugePage = size_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Large sizes are rounded up to whole huge pages: the size class, and what is mapped.
size_t SizeClass(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

size_t DefaultCacheLimit() {
  if (kSanitized) return 0;
  if (const char* env = std::getenv("TILEFUSE_HOST_POOL_MB")) {
    char* end = nullptr;
    unsigned long long mb = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') return static_cast<size_t>(mb) << 20;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  size_t physical = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
  return std::min(physical / 4, size_t{4} << 30);
}

// A fresh mapping with transparent huge pages requested (a hint: without THP it is
// ordinary pages). Mapped memory reads as zeros until written.
std::byte* MapLarge(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return static_cast<std::byte*>(p);
}

}  // namespace

HostBufferPool& HostBufferPool::Global() {
  // Never destroyed: tensors in other static objects may be released after main returns.
  static HostBufferPool* pool = new HostBufferPool(DefaultCacheLimit());
  return *pool;
}

bool HostBufferPool::Sanitized() { return kSanitized; }

HostBufferPool::HostBufferPool(size_t cache_limit_bytes) : cache_limit_bytes_(cache_limit_bytes) {}

HostBufferPool::~HostBufferPool() { Trim(); }

std::byte* HostBufferPool::Allocate(size_t bytes) {
  if (bytes < kLargeBytes || kSanitized)  // sanitized: every byte under ASan's eye
    return static_cast<std::byte*>(::operator new(std::max<size_t>(bytes, 1), std::align_val_t{kAlignment}));
  size_t size = SizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= size;
      ++reuses_;
      return p;
    }
  }
  return MapLarge(size);
}

void HostBufferPool::Release(std::byte* data, size_t bytes) {
  if (!data) return;
  if (bytes < kLargeBytes || kSanitized) {
    ::operator delete(data, std::align_val_t{kAlignment});
    return;
  }
  size_t size = SizeClass(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cached_bytes_ + size <= cache_limit_bytes_) {
      free_[size].push_back(data);
      cached_bytes_ += size;
      return;
    }
  }
  munmap(data, size);
}

void HostBufferPool::Trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [size, buffers] : free_)
    for (std::byte* p : buffers) munmap(p, size);
  free_.clear();
  cached_bytes_ = 0;
}

size_t HostBufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

size_t HostBufferPool::reuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reuses_;
}

}  // namespace tilefuse

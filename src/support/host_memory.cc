#include "support/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <string>

namespace tilefuse {

namespace {

constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// "MemAvailable:   12345 kB" from /proc/meminfo.
int64_t MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return kUnlimited;
}

int64_t ReadBytes(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kUnlimited;
  return std::strtoll(text.c_str(), nullptr, 10);
}

// cgroup v2: memory.max − memory.current of the process's own group (the root file
// system view inside a container).
int64_t CgroupHeadroomBytes() {
  int64_t limit = ReadBytes("/sys/fs/cgroup/memory.max");
  if (limit == kUnlimited) return kUnlimited;
  return std::max<int64_t>(0, limit - ReadBytes("/sys/fs/cgroup/memory.current"));
}

std::string GiB(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ll << 30)); }

}  // namespace

int64_t HostMemoryBudgetBytes() {
  if (const char* mb = std::getenv("TILEFUSE_HOST_MEMORY_MB"); mb && *mb) return std::strtoll(mb, nullptr, 10) << 20;
  return std::min(MemAvailableBytes(), CgroupHeadroomBytes());
}

int64_t SaturatingBytes(int64_t elements, int64_t element_bytes) {
  if (elements < 0 || element_bytes < 0) return kUnlimited;
  if (element_bytes != 0 && elements > kUnlimited / element_bytes) return kUnlimited;
  return elements * element_bytes;
}

Status CheckHostMemory(int64_t bytes, const std::string& what) {
  // Below this, asking the kernel (a read of /proc/meminfo) costs more than it is worth:
  // the reference interpreter asks once per node.
  constexpr int64_t kSmall = 256ll << 20;
  const char* override_mb = std::getenv("TILEFUSE_HOST_MEMORY_MB");
  if (bytes >= 0 && bytes <= kSmall && !(override_mb && *override_mb)) return Status::Ok();
  int64_t budget = HostMemoryBudgetBytes();
  if (bytes >= 0 && bytes <= budget) return Status::Ok();
  return ResourceExhausted(fmt::format("{} needs {} of host memory; {} available", what,
                                       bytes < 0 || bytes == kUnlimited ? "more than 8 EiB" : GiB(bytes), GiB(budget)));
}

}  // namespace tilefuse

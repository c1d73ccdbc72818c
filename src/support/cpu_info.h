// What the CPU tuner needs to know about this machine: its name and the instruction-set
// extensions -march=native compiles for (both part of a tuning key, so a timing never
// follows the cache to another CPU), and the last-level cache size (measurements rotate
// their inputs through more memory than that, so they are read from DRAM as in a run).
#pragma once

#include <cstdint>
#include <string>

namespace tilefuse {

// /proc/cpuinfo "model name" (x86) or "CPU part"/"Hardware" (Arm); "unknown cpu" else.
std::string CpuModelName();
// The machine name and the SIMD extensions present, e.g. "x86_64 avx2 fma avx512f", from
// the /proc/cpuinfo flags (asking the compiler for -march=native's targets is slow).
std::string CpuIsaLevel();
// One last-level cache's bytes: /sys (per instance: the cache one core sees), else
// sysconf(_SC_LEVEL3_CACHE_SIZE) (which some hypervisors report as the whole package's),
// else 32 MiB.
int64_t LastLevelCacheBytes();

}  // namespace tilefuse

#include "support/cpu_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace tilefuse {

namespace {

// The value of the first "key : value" line of /proc/cpuinfo whose key is `key`.
std::string CpuInfoField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name != key) continue;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// "32768K", "8M", "1024" → bytes; 0 when it does not parse.
int64_t ParseCacheSize(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (...) {
    return 0;
  }
  char unit = used < text.size() ? text[used] : ' ';
  if (unit == 'K') value <<= 10;
  if (unit == 'M') value <<= 20;
  return value;
}

}  // namespace

std::string CpuModelName() {
  for (const char* key : {"model name", "Hardware", "CPU part"}) {
    std::string value = CpuInfoField(key);
    if (!value.empty()) return value;
  }
  return "unknown cpu";
}

std::string CpuIsaLevel() {
  // The extensions that change what -march=native generates for our loops.
  static const char* const kRelevant[] = {"sse4_2", "avx",        "avx2",        "fma",        "f16c",
                                          "avx512f", "avx512bw",  "avx512vl",    "avx512_bf16", "avx512_fp16",
                                          "asimd",   "asimdhp",   "sve",         "sve2",        "bf16"};
  std::string flags = CpuInfoField("flags");
  if (flags.empty()) flags = CpuInfoField("Features");
  std::set<std::string> present;
  std::istringstream words(flags);
  for (std::string word; words >> word;) present.insert(word);
  utsname machine{};
  std::string level = ::uname(&machine) == 0 ? machine.machine : "unknown";
  for (const char* flag : kRelevant)
    if (present.count(flag)) level += std::string(" ") + flag;
  return level;
}

int64_t LastLevelCacheBytes() {
  int64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string text;
    if (in >> text) largest = std::max(largest, ParseCacheSize(text));
  }
  if (largest > 0) return largest;
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return l3;
#endif
  return int64_t{32} << 20;
}

}  // namespace tilefuse

// What `tilefuse bench` shares between its CPU (bench.cc) and CUDA (bench_cuda.cc) paths.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "cuda_path_options.h"
#include "tilefuse/status.h"

namespace tilefuse::cli {

struct BenchOptions {
  std::string model;
  std::string backend = "cpu";
  int repeats = 10;
  int warmup = 3;
  int copy_mib = 256;  // cpu: bigger than any last-level cache
  uint64_t seed = 0;
  std::string shape;  // --shape: symbolic dims' values
  bool json = false;
  bool tune = false;  // the fused kernels tuned first
  bool strict = false;  // a group on the reference interpreter is an error, not a warning
  bool fused_only = false;  // no unfused variant: its compile and its run skipped
  int device = 0;     // cuda: the GPU's ordinal
  CudaPathChoices cuda_paths;  // cuda: --gemm, --precision and the rest, as `run` takes them
};

// `tilefuse bench MODEL --backend cuda` (bench_cuda.cc).
Status BenchCuda(const BenchOptions& options);

// 1-minute load average: timings on a shared machine mean little when it is high.
inline double LoadAverage() {
  double load[1] = {-1};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

// A cache folder of its own, so the first compile is cold; removed at scope exit.
class FreshCacheDir {
 public:
  FreshCacheDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tilefuse_bench_XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~FreshCacheDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  FreshCacheDir(const FreshCacheDir&) = delete;
  FreshCacheDir& operator=(const FreshCacheDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tilefuse::cli

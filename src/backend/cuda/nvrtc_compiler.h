// NvrtcCompiler: CUDA C++ source → cubin for one architecture, through NVRTC loaded at run
// time, with the cubins cached on disk (support/kernel_cache.h) keyed by
// hash(source, options, arch, NVRTC version). Needs no GPU: CI compiles every generated
// kernel for sm_90a here and reads ptxas's resource report.
//
// Every compilation gets the device library (tilefuse_device.cuh) and the tile library of
// the compute-bound templates (tilefuse_tiles.cuh) as in-memory headers, and the include
// path of the toolkit NVRTC came from where there is one (for <cuda_bf16.h>, <cuda_fp16.h>
// and <cuda/std/...>; NVRTC 13.0 has none of them built in).
// A compile error returns Internal with NVRTC's log; the failing source is kept on disk
// (the path is in the message) for debugging.
//
// Compile may be called from several threads at once (backend/cuda/cuda_compile_units
// compiles a model's kernels in parallel): NVRTC is thread-safe for separate programs, the
// counters are atomic and the cache, which one thread at a time may use, is behind a mutex.
// Copies share the cache and the counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "support/kernel_cache.h"
#include "tilefuse/status.h"

namespace tilefuse {

struct CubinResult {
  std::string cubin;
  bool from_cache = false;
  // ptxas's report per kernel ("Used 32 registers, 0 bytes stack frame, 0 bytes spill
  // stores, ..."); filled on a fresh compile (cached entries keep theirs beside the cubin).
  std::string ptxas_log;
  double compile_ms = 0;  // NVRTC's time on a fresh compile (0 for a cached one)
};

// ptxas's numbers for one kernel, parsed from its -v report.
struct PtxasKernelInfo {
  std::string name;
  int registers = 0;
  int64_t stack_frame_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0, shared_bytes = 0;
  std::string line;  // the report's lines for it, joined
};
std::vector<PtxasKernelInfo> ParsePtxasLog(const std::string& log);

class NvrtcCompiler {
 public:
  // Loads NVRTC (NotFound naming the places tried) and opens the cache.
  static StatusOr<NvrtcCompiler> Create(std::string cache_dir = "");

  // Compiles for `arch` ("sm_90a"). Options beyond the defaults (-std=c++17,
  // --gpu-architecture, --ptxas-options=-v, -default-device) may be added in `extra`.
  StatusOr<CubinResult> Compile(const std::string& source, const std::string& arch,
                                const std::vector<std::string>& extra = {});

  // Whether Compile would find this program's cubin in the cache (compiling nothing).
  bool Cached(const std::string& source, const std::string& arch, const std::vector<std::string>& extra = {});

  std::string version() const;  // "13.0"
  const std::string& cache_directory() const { return shared_->cache.directory(); }
  // The toolkit's include folder passed to NVRTC, or "" where NVRTC came without headers.
  const std::string& toolkit_include() const { return toolkit_include_; }
  // Programs NVRTC compiled, and cubins the cache answered, since Create.
  int64_t compiles() const { return shared_->compiles; }
  int64_t cache_hits() const { return shared_->cache_hits; }

 private:
  // What concurrent Compile calls share; held by pointer so that the compiler stays movable
  // and its copies (a background compile's: cuda_backend.cc) share the cache and counters.
  struct Shared {
    explicit Shared(KernelCache c) : cache(std::move(c)) {}
    std::mutex cache_mutex;
    KernelCache cache;
    std::atomic<int64_t> compiles{0}, cache_hits{0};
  };
  NvrtcCompiler(KernelCache cache, int major, int minor, std::string toolkit_include)
      : shared_(std::make_shared<Shared>(std::move(cache))), major_(major), minor_(minor), toolkit_include_(std::move(toolkit_include)) {}
  // The cached cubin and report under `key`, if there is one.
  std::optional<CubinResult> Lookup(const std::string& key);
  std::vector<std::string> Options(const std::string& arch, const std::vector<std::string>& extra) const;
  std::string CacheKey(const std::string& source, const std::string& arch, const std::vector<std::string>& options) const;
  std::shared_ptr<Shared> shared_;
  int major_, minor_;
  std::string toolkit_include_;
};

}  // namespace tilefuse

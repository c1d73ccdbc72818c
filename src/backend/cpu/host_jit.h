// HostJit: compiles generated C++ into a shared object with the host compiler and loads
// it with dlopen. Shared objects are cached on disk (support/kernel_cache.h) keyed by
// hash(source, flags, compiler identity, host CPU), so a warm run never starts the
// compiler: a cache hit costs a file read, a hash and a dlopen.
//
//   StatusOr<HostJit> jit = HostJit::Create();
//   StatusOr<std::shared_ptr<const JitLibrary>> library = jit->Compile(source);
//   StatusOr<int (*)(int, int)> add = (*library)->Function<int(int, int)>("add");
//
// The compiler is started without a shell (posix_spawn), in a private temporary folder;
// a failure returns Internal with the compiler's output and keeps that folder (its
// kernel.cc and compiler.log) for debugging. A HostJit is used by one thread at a time;
// separate instances may run in parallel threads or processes on one cache directory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/kernel_cache.h"
#include "tilefuse/status.h"

namespace tilefuse {

// -O3 -march=native -fopenmp -shared -fPIC -std=c++17
std::vector<std::string> DefaultHostJitFlags();

struct HostJitOptions {
  // The compiler command, split on spaces ("ccache g++" works). Empty: $CXX, else "c++".
  std::string compiler;
  // Everything but the source and output names. -shared -fPIC must stay for dlopen.
  std::vector<std::string> flags = DefaultHostJitFlags();
  // Empty: KernelCache::DefaultDirectory() ($TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse).
  std::string cache_dir;
};

// A loaded shared object; stays loaded while any copy of the shared_ptr lives.
class JitLibrary {
 public:
  JitLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  ~JitLibrary();
  JitLibrary(const JitLibrary&) = delete;
  JitLibrary& operator=(const JitLibrary&) = delete;

  // NotFound naming the symbol when the library does not define it. Generated kernels
  // are extern "C" so their names are not mangled.
  StatusOr<void*> Symbol(std::string_view name) const;
  template <typename Signature>
  StatusOr<Signature*> Function(std::string_view name) const {
    ASSIGN_OR_RETURN(void* address, Symbol(name));
    return reinterpret_cast<Signature*>(address);
  }
  // The file it was loaded from (normally the cache entry).
  const std::string& path() const { return path_; }

 private:
  void* handle_;
  std::string path_;
};

class HostJit {
 public:
  // Finds the compiler, asks it for its version (once per process per compiler) and
  // opens the cache. NotFound when the compiler is not on PATH.
  static StatusOr<HostJit> Create(HostJitOptions options = {});

  StatusOr<std::shared_ptr<const JitLibrary>> Compile(std::string_view source);

  // The cache key Compile uses for `source` (depends on flags, compiler and host CPU).
  std::string CacheKey(std::string_view source) const;
  // How many Compile calls started the compiler, and how many loaded a cache entry.
  int64_t compiles() const { return compiles_; }
  int64_t cache_hits() const { return cache_hits_; }
  // "<command>: <first line of --version>", part of every key.
  const std::string& compiler_identity() const { return compiler_identity_; }
  const std::vector<std::string>& flags() const { return flags_; }
  KernelCache& cache() { return cache_; }

 private:
  HostJit(std::vector<std::string> compiler_command, std::vector<std::string> flags, std::string compiler_identity,
          KernelCache cache)
      : compiler_command_(std::move(compiler_command)),
        flags_(std::move(flags)),
        compiler_identity_(std::move(compiler_identity)),
        cache_(std::move(cache)) {}
  // Compiles into a fresh private folder; returns the path of the built .so.
  StatusOr<std::string> RunCompiler(std::string_view source) const;
  StatusOr<std::shared_ptr<const JitLibrary>> CompileAndPublish(std::string_view source, const std::string& key);

  std::vector<std::string> compiler_command_;
  std::vector<std::string> flags_;
  std::string compiler_identity_;
  KernelCache cache_;
  int64_t compiles_ = 0;
  int64_t cache_hits_ = 0;
};

}  // namespace tilefuse

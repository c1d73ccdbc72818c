#include "backend/cpu/host_jit.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/check.h"
#include "support/file_util.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAddSource = R"(extern "C" int add(int a, int b) { return a + b; })";

// A fresh cache folder per test, removed afterwards.
class HostJitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-jit-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    cache_dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(cache_dir_); }

  HostJit MakeJit(std::vector<std::string> flags = DefaultHostJitFlags()) {
    HostJitOptions options;
    options.cache_dir = cache_dir_;
    options.flags = std::move(flags);
    StatusOr<HostJit> jit = HostJit::Create(options);
    TF_CHECK_MSG(jit.ok(), jit.status().ToString().c_str());
    return std::move(jit).value();
  }

  // add(2, 3) through a fresh compile (or cache hit) of kAddSource.
  static int CallAdd(HostJit& jit) {
    StatusOr<std::shared_ptr<const JitLibrary>> library = jit.Compile(kAddSource);
    if (!library.ok()) return -1;
    StatusOr<int (*)(int, int)> add = (*library)->Function<int(int, int)>("add");
    return add.ok() ? (*add)(2, 3) : -2;
  }

  std::string cache_dir_;
};

TEST_F(HostJitTest, CompilesAndCallsAFunction) {
  HostJit jit = MakeJit();
  StatusOr<std::shared_ptr<const JitLibrary>> library = jit.Compile(kAddSource);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  StatusOr<int (*)(int, int)> add = (*library)->Function<int(int, int)>("add");
  ASSERT_TRUE(add.ok()) << add.status().ToString();
  EXPECT_EQ((*add)(2, 3), 5);
  EXPECT_EQ((*add)(-7, 4), -3);
  EXPECT_EQ(jit.compiles(), 1);
  EXPECT_EQ(jit.cache_hits(), 0);
  EXPECT_EQ((*library)->path().rfind(cache_dir_, 0), 0u) << "loaded from the cache entry: " << (*library)->path();
}

TEST_F(HostJitTest, SecondInstanceHitsTheCacheWithoutCompiling) {
  HostJit first = MakeJit();
  EXPECT_EQ(CallAdd(first), 5);
  HostJit second = MakeJit();
  EXPECT_EQ(CallAdd(second), 5);
  EXPECT_EQ(second.compiles(), 0);
  EXPECT_EQ(second.cache_hits(), 1);
  // The same instance hits too.
  EXPECT_EQ(CallAdd(first), 5);
  EXPECT_EQ(first.compiles(), 1);
  EXPECT_EQ(first.cache_hits(), 1);
}

TEST_F(HostJitTest, OpenMpKernelRuns) {
  HostJit jit = MakeJit();
  StatusOr<std::shared_ptr<const JitLibrary>> library = jit.Compile(R"(
    extern "C" long sum_to(long n) {
      long total = 0;
      #pragma omp parallel for reduction(+ : total)
      for (long i = 1; i <= n; ++i) total += i;
      return total;
    })");
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  StatusOr<long (*)(long)> sum_to = (*library)->Function<long(long)>("sum_to");
  ASSERT_TRUE(sum_to.ok());
  EXPECT_EQ((*sum_to)(100000), 100000L * 100001L / 2);
}

TEST_F(HostJitTest, SyntaxErrorReportsTheCompilerOutputAndKeepsTheSource) {
  HostJit jit = MakeJit();
  std::string broken = "extern \"C\" int broken(int a) { return a + ; }\n";
  StatusOr<std::shared_ptr<const JitLibrary>> library = jit.Compile(broken);
  ASSERT_FALSE(library.ok());
  const std::string& message = library.status().message();
  EXPECT_EQ(library.status().code(), StatusCode::kInternal);
  EXPECT_NE(message.find("error"), std::string::npos) << message;
  EXPECT_NE(message.find("expected"), std::string::npos) << "the compiler's own words: " << message;
  size_t at = message.find("/kernel.cc");
  ASSERT_NE(at, std::string::npos) << message;
  std::string kept = message.substr(0, at + 10);
  kept = kept.substr(kept.rfind(' ') + 1);
  EXPECT_EQ(*ReadWholeFile(kept), broken);
  fs::remove_all(fs::path(kept).parent_path());
  // Nothing was published for the failed source.
  EXPECT_FALSE(jit.cache().Lookup(jit.CacheKey(broken), ".so").has_value());
}

TEST_F(HostJitTest, CorruptEntryIsRebuiltWithAWarning) {
  std::string entry;
  {
    HostJit first = MakeJit();
    StatusOr<std::shared_ptr<const JitLibrary>> library = first.Compile(kAddSource);
    ASSERT_TRUE(library.ok());
    entry = (*library)->path();
  }  // unloaded: the truncation below must not pull pages from under a live mapping
  fs::resize_file(entry, fs::file_size(entry) / 2);
  HostJit second = MakeJit();
  ::testing::internal::CaptureStderr();
  int sum = CallAdd(second);
  std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(sum, 5);
  EXPECT_NE(warnings.find("warning"), std::string::npos) << warnings;
  EXPECT_EQ(second.compiles(), 1) << "rebuilt, not loaded";
  EXPECT_EQ(second.cache().discarded_entries(), 1);
  HostJit third = MakeJit();
  EXPECT_EQ(CallAdd(third), 5);
  EXPECT_EQ(third.cache_hits(), 1) << "the rebuilt entry is valid";
}

TEST_F(HostJitTest, FlippedBytesInTheEntryAreDetected) {
  std::string entry;
  {
    HostJit first = MakeJit();
    StatusOr<std::shared_ptr<const JitLibrary>> library = first.Compile(kAddSource);
    ASSERT_TRUE(library.ok());
    entry = (*library)->path();
  }
  std::string bytes = *ReadWholeFile(entry);
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 16; ++i) bytes[i] ^= 0x5a;
  ASSERT_TRUE(WriteFileAtomically(entry, bytes).ok());
  HostJit second = MakeJit();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(CallAdd(second), 5);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("corrupt"), std::string::npos);
  EXPECT_EQ(second.compiles(), 1);
}

TEST_F(HostJitTest, ConcurrentThreadsCompilingOneKernelAllSucceed) {
  constexpr int kThreads = 4;
  std::vector<int> sums(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      HostJit jit = MakeJit();  // one instance per thread, one shared cache folder
      sums[i] = CallAdd(jit);
    });
  for (std::thread& thread : threads) thread.join();
  for (int sum : sums) EXPECT_EQ(sum, 5);
  HostJit after = MakeJit();
  EXPECT_EQ(CallAdd(after), 5);
  EXPECT_EQ(after.compiles(), 0);
}

TEST_F(HostJitTest, ConcurrentProcessesCompilingOneKernelBothSucceed) {
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      HostJit jit = MakeJit();
      ::_exit(CallAdd(jit) == 5 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << child << " status " << status;
  }
  HostJit after = MakeJit();
  EXPECT_EQ(CallAdd(after), 5);
  EXPECT_EQ(after.cache_hits(), 1);
}

TEST_F(HostJitTest, CacheDirectoryComesFromTheEnvironment) {
  const char* previous = std::getenv("TILEFUSE_CACHE_DIR");
  std::string saved = previous ? previous : "";
  ::setenv("TILEFUSE_CACHE_DIR", cache_dir_.c_str(), 1);
  StatusOr<HostJit> jit = HostJit::Create();
  if (previous) ::setenv("TILEFUSE_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("TILEFUSE_CACHE_DIR");
  ASSERT_TRUE(jit.ok()) << jit.status().ToString();
  EXPECT_EQ(jit->cache().directory(), cache_dir_);
  StatusOr<std::shared_ptr<const JitLibrary>> library = jit->Compile(kAddSource);
  ASSERT_TRUE(library.ok());
  EXPECT_EQ((*library)->path().rfind(cache_dir_, 0), 0u) << (*library)->path();
}

TEST_F(HostJitTest, DifferentFlagsGiveDifferentKeys) {
  HostJit o3 = MakeJit();
  std::vector<std::string> o2_flags = {"-O2", "-fopenmp", "-shared", "-fPIC", "-std=c++17"};
  HostJit o2 = MakeJit(o2_flags);
  EXPECT_NE(o3.CacheKey(kAddSource), o2.CacheKey(kAddSource));
  EXPECT_NE(o3.CacheKey(kAddSource), o3.CacheKey(std::string(kAddSource) + "\n"));
  EXPECT_EQ(CallAdd(o3), 5);
  EXPECT_EQ(CallAdd(o2), 5);
  EXPECT_EQ(o2.compiles(), 1) << "-O2 must not load the -O3 library";
}

TEST_F(HostJitTest, MissingSymbolIsNotFound) {
  HostJit jit = MakeJit();
  StatusOr<std::shared_ptr<const JitLibrary>> library = jit.Compile(kAddSource);
  ASSERT_TRUE(library.ok());
  StatusOr<void*> missing = (*library)->Symbol("subtract");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("subtract"), std::string::npos);
}

TEST_F(HostJitTest, UnknownCompilerIsNotFound) {
  HostJitOptions options;
  options.compiler = "tilefuse-no-such-compiler";
  options.cache_dir = cache_dir_;
  StatusOr<HostJit> jit = HostJit::Create(options);
  ASSERT_FALSE(jit.ok());
  EXPECT_EQ(jit.status().code(), StatusCode::kNotFound);
  EXPECT_NE(jit.status().message().find("tilefuse-no-such-compiler"), std::string::npos);
}

}  // namespace
}  // namespace tilefuse

#include "support/kernel_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/file_util.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

// A fresh cache folder per test, removed afterwards.
class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  KernelCache OpenCache() {
    StatusOr<KernelCache> cache = KernelCache::Open(dir_);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return std::move(cache).value();
  }

  std::string dir_;
};

TEST_F(KernelCacheTest, KeyDependsOnEveryPartAndItsBoundaries) {
  std::string key = KernelCache::Key({"source", "-O3", "g++ 12"});
  EXPECT_EQ(key.size(), 32u);
  EXPECT_EQ(key, KernelCache::Key({"source", "-O3", "g++ 12"}));
  EXPECT_NE(key, KernelCache::Key({"source", "-O2", "g++ 12"}));
  EXPECT_NE(key, KernelCache::Key({"source", "-O3", "g++ 13"}));
  EXPECT_NE(key, KernelCache::Key({"source-O3", "", "g++ 12"}));
}

TEST_F(KernelCacheTest, InsertThenLookupReturnsTheSameBytes) {
  KernelCache cache = OpenCache();
  std::string key = KernelCache::Key({"k"});
  EXPECT_FALSE(cache.Lookup(key, ".so").has_value());
  std::string bytes("binary\0payload", 14);
  StatusOr<std::string> inserted = cache.Insert(key, ".so", bytes);
  ASSERT_TRUE(inserted.ok()) << inserted.status().ToString();
  std::optional<std::string> found = cache.Lookup(key, ".so");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, *inserted);
  EXPECT_EQ(*ReadWholeFile(*found), bytes);
  EXPECT_FALSE(cache.Lookup(key, ".cubin").has_value()) << "suffixes are separate entries";
  // A second instance (another process, say) sees the entry too.
  EXPECT_TRUE(OpenCache().Lookup(key, ".so").has_value());
}

TEST_F(KernelCacheTest, TruncatedEntryIsDiscardedWithAWarning) {
  KernelCache cache = OpenCache();
  std::string key = KernelCache::Key({"truncate me"});
  std::string path = *cache.Insert(key, ".so", std::string(4096, 'x'));
  fs::resize_file(path, 1000);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.Lookup(key, ".so").has_value());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("warning"), std::string::npos) << warning;
  EXPECT_NE(warning.find("corrupt"), std::string::npos) << warning;
  EXPECT_EQ(cache.discarded_entries(), 1);
  EXPECT_FALSE(fs::exists(path)) << "the damaged entry is removed";
  // The caller rebuilds it: a fresh insert is found again.
  ASSERT_TRUE(cache.Insert(key, ".so", std::string(4096, 'x')).ok());
  EXPECT_TRUE(cache.Lookup(key, ".so").has_value());
}

TEST_F(KernelCacheTest, FlippedByteOfTheSameLengthIsDetected) {
  KernelCache cache = OpenCache();
  std::string key = KernelCache::Key({"flip me"});
  std::string bytes(256, 'a');
  std::string path = *cache.Insert(key, ".cubin", bytes);
  bytes[100] = 'b';
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.Lookup(key, ".cubin").has_value());
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("corrupt"), std::string::npos);
}

TEST_F(KernelCacheTest, MissingIntegrityRecordIsCorrupt) {
  KernelCache cache = OpenCache();
  std::string key = KernelCache::Key({"no record"});
  std::string path = *cache.Insert(key, ".so", "bytes");
  fs::remove(fs::path(path).parent_path() / "integrity");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.Lookup(key, ".so").has_value());
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(cache.discarded_entries(), 1);
}

TEST_F(KernelCacheTest, ConcurrentInsertsOfOneKeyAllSucceed) {
  std::string key = KernelCache::Key({"contended"});
  constexpr int kWriters = 8;
  std::vector<std::string> paths(kWriters);
  std::vector<Status> statuses(kWriters);
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      StatusOr<KernelCache> cache = KernelCache::Open(dir_);  // one instance per writer
      if (!cache.ok()) return void(statuses[i] = cache.status());
      // Different bytes per writer (as two compilers' outputs may differ in build ids):
      // whichever wins, the entry must be whole and self-consistent.
      StatusOr<std::string> path = cache->Insert(key, ".so", std::string(10000 + i, char('a' + i)));
      statuses[i] = path.status();
      if (path.ok()) paths[i] = *path;
    });
  }
  for (std::thread& writer : writers) writer.join();
  for (int i = 0; i < kWriters; ++i) {
    EXPECT_TRUE(statuses[i].ok()) << statuses[i].ToString();
    EXPECT_EQ(paths[i], paths[0]);
  }
  KernelCache cache = OpenCache();
  std::optional<std::string> found = cache.Lookup(key, ".so");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(cache.discarded_entries(), 0);
  // No temporary folders are left behind.
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(dir_) / "v1"))
    EXPECT_EQ(entry.path().extension(), ".entry") << entry.path();
}

TEST_F(KernelCacheTest, EnvironmentVariableChoosesTheDefaultDirectory) {
  const char* previous = std::getenv("TILEFUSE_CACHE_DIR");
  std::string saved = previous ? previous : "";
  ::setenv("TILEFUSE_CACHE_DIR", dir_.c_str(), 1);
  EXPECT_EQ(KernelCache::DefaultDirectory(), dir_);
  StatusOr<KernelCache> cache = KernelCache::Open();
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->directory(), dir_);
  EXPECT_TRUE(fs::is_directory(fs::path(dir_) / "v1"));
  if (previous) ::setenv("TILEFUSE_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("TILEFUSE_CACHE_DIR");
}

TEST_F(KernelCacheTest, UnusableDirectoryIsAStatus) {
  std::string file = dir_ + "/a-file";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  StatusOr<KernelCache> cache = KernelCache::Open(file + "/cache");
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("cannot create"), std::string::npos) << cache.status().ToString();
}

}  // namespace
}  // namespace tilefuse

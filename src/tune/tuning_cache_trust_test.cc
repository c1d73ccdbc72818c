// Who may write the tuning cache (docs/security.md): a record someone else could write is
// never read; a folder others may write is an error (chosen) or bypassed (default).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "support/file_util.h"
#include "tune/tuning_cache.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TuningKey Key() {
  return {.device = "cpu: test", .arch = "x86-64-v3", .driver = "", .compiler = "g++ 12",
          .kernel_hash = "00112233445566778899aabbccddeeff", .shapes = "[[8]]", .dtypes = "[f32]"};
}

std::vector<TuningMeasurement> OneTime() { return {{{{"block", 64}}, 5.0, "", ""}}; }

class TuningCacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-tuning-trust-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root_;
};

TEST_F(TuningCacheTrustTest, FoldersAndRecordsArePrivate) {
  StatusOr<TuningCache> cache = TuningCache::Open(root_ + "/cache");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_TRUE(cache->Record(Key(), OneTime()).ok());
  for (const std::string& folder : {root_ + "/cache", root_ + "/cache/tuning", root_ + "/cache/tuning/v1"})
    EXPECT_EQ(fs::status(folder).permissions(), fs::perms::owner_all) << folder;
  EXPECT_EQ(fs::status(cache->FilePath(Key())).permissions(), fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(TuningCacheTrustTest, AGroupWritableFolderTheUserChoseIsAnError) {
  fs::create_directories(root_ + "/cache/tuning");
  ASSERT_EQ(::chmod((root_ + "/cache/tuning").c_str(), 0775), 0);
  StatusOr<TuningCache> cache = TuningCache::Open(root_ + "/cache");
  ASSERT_FALSE(cache.ok());
  EXPECT_TRUE(Contains(cache.status().message(), "tuning cache folder '" + root_ + "/cache'")) << cache.status().ToString();
  EXPECT_TRUE(Contains(cache.status().message(), root_ + "/cache/tuning' is writable by group or others"))
      << cache.status().ToString();
}

TEST_F(TuningCacheTrustTest, APlantedRecordIsNeverRead) {
  StatusOr<TuningCache> writer = TuningCache::Open(root_ + "/cache");
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE(writer->Record(Key(), OneTime()).ok());
  std::string path = writer->FilePath(Key());
  if (::geteuid() == 0) ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  else ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  StatusOr<TuningCache> cache = TuningCache::Open(root_ + "/cache");
  ASSERT_TRUE(cache.ok());
  EXPECT_FALSE(cache->Lookup(Key()).has_value()) << "a record someone else could write was read";
  Status recorded = cache->Record(Key(), OneTime());
  ASSERT_FALSE(recorded.ok());
  EXPECT_TRUE(Contains(recorded.message(), path)) << recorded.ToString();
}

TEST_F(TuningCacheTrustTest, AnUnsafeDefaultFolderIsBypassedWithANotice) {
  std::string home = root_ + "/home";
  std::string dir = home + "/.cache/tilefuse";
  fs::create_directories(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  std::optional<std::string> old_home, old_dir;
  if (const char* v = std::getenv("HOME")) old_home = v;
  if (const char* v = std::getenv("TILEFUSE_CACHE_DIR")) old_dir = v;
  ::setenv("HOME", home.c_str(), 1);
  ::unsetenv("TILEFUSE_CACHE_DIR");
  ::testing::internal::CaptureStderr();
  StatusOr<TuningCache> cache = TuningCache::Open();
  std::string notice = ::testing::internal::GetCapturedStderr();
  if (old_home) ::setenv("HOME", old_home->c_str(), 1);
  if (old_dir) ::setenv("TILEFUSE_CACHE_DIR", old_dir->c_str(), 1);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_FALSE(cache->enabled());
  EXPECT_TRUE(Contains(notice, "notice: not using the tuning cache folder '" + dir + "'")) << notice;
  EXPECT_TRUE(cache->Record(Key(), OneTime()).ok());
  EXPECT_FALSE(cache->Lookup(Key()).has_value());
  EXPECT_FALSE(fs::exists(dir + "/tuning")) << "a bypassed cache writes nothing";
}

}  // namespace
}  // namespace tilefuse

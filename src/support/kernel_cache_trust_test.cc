// Who may write the kernel cache (support/private_folder.h, docs/security.md): folders and
// entries someone else could write are refused before anything in them is read.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "support/file_util.h"
#include "support/kernel_cache.h"
#include "support/private_folder.h"
#include "testing/scoped_env.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 12345;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

mode_t ModeOf(const std::string& path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 ? (info.st_mode & 07777) : 0;
}

#define SKIP_UNLESS_ROOT()                                                                           \
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a folder to another uid (chown " << kOtherUid \
                                     << "); run the tests as root to cover foreign-owned caches"

class KernelCacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-cache-trust-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
};

TEST_F(KernelCacheTrustTest, NewFoldersAreCreatedPrivateAndEntriesOwnerOnly) {
  std::string dir = root_ + "/a/b/cache";
  StatusOr<KernelCache> cache = KernelCache::Open(dir);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/v1"), 0700u);
  EXPECT_EQ(ModeOf(root_ + "/a"), 0700u) << "missing parents are private too";
  StatusOr<std::string> path = cache->Insert(KernelCache::Key({"k"}), ".so", "bytes");
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(ModeOf(*path), 0600u);
  EXPECT_EQ(ModeOf(fs::path(*path).parent_path()), 0700u);
}

TEST_F(KernelCacheTrustTest, AWorldWritableFolderTheUserChoseIsAnErrorWithTheFix) {
  std::string dir = root_ + "/cache";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  StatusOr<KernelCache> cache = KernelCache::Open(dir);
  ASSERT_FALSE(cache.ok()) << "opened a cache anyone may write";
  EXPECT_TRUE(Contains(cache.status().message(), "kernel cache folder '" + dir + "'")) << cache.status().ToString();
  EXPECT_TRUE(Contains(cache.status().message(), "writable by group or others")) << cache.status().ToString();
  EXPECT_TRUE(Contains(cache.status().message(), "chmod go-w")) << cache.status().ToString();
  EXPECT_FALSE(fs::exists(dir + "/v1")) << "nothing is created in a refused folder";
}

TEST_F(KernelCacheTrustTest, AForeignOwnedFolderIsAnError) {
  SKIP_UNLESS_ROOT();
  std::string dir = root_ + "/cache";
  fs::create_directory(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), kOtherUid, kOtherUid), 0);
  StatusOr<KernelCache> cache = KernelCache::Open(dir);
  ASSERT_FALSE(cache.ok());
  EXPECT_TRUE(Contains(cache.status().message(), "owned by uid 12345")) << cache.status().ToString();
  // The same for a v1/ planted inside a folder of ours.
  std::string mine = root_ + "/mine";
  fs::create_directories(mine + "/v1");
  ASSERT_EQ(::chown((mine + "/v1").c_str(), kOtherUid, kOtherUid), 0);
  StatusOr<KernelCache> inner = KernelCache::Open(mine);
  ASSERT_FALSE(inner.ok());
  EXPECT_TRUE(Contains(inner.status().message(), mine + "/v1' is owned by uid 12345")) << inner.status().ToString();
}

TEST_F(KernelCacheTrustTest, ALinkedCacheFolderIsFollowedOnlyWhenTheLinkIsOurs) {
  std::string target = root_ + "/target";
  fs::create_directory(target);
  fs::create_directory_symlink(target, root_ + "/link");
  StatusOr<KernelCache> cache = KernelCache::Open(root_ + "/link");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_TRUE(fs::is_directory(target + "/v1"));
  if (::geteuid() != 0) return;
  ASSERT_EQ(::lchown((root_ + "/link").c_str(), kOtherUid, kOtherUid), 0);
  StatusOr<KernelCache> foreign = KernelCache::Open(root_ + "/link");
  ASSERT_FALSE(foreign.ok());
  EXPECT_TRUE(Contains(foreign.status().message(), "symbolic link owned by uid 12345")) << foreign.status().ToString();
}

// An entry that someone else wrote: in a folder the user chose, Lookup misses without
// reading it, Insert fails, and refusal() names the entry and the fix.
void ExpectPlantedEntryRefused(const std::string& dir, const std::string& planted_path, const std::string& why) {
  StatusOr<KernelCache> cache = KernelCache::Open(dir);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  std::string key = KernelCache::Key({"planted"});
  EXPECT_FALSE(cache->Lookup(key, ".so").has_value()) << "a planted entry was trusted";
  ASSERT_FALSE(cache->refusal().ok());
  EXPECT_TRUE(Contains(cache->refusal().message(), planted_path)) << cache->refusal().ToString();
  EXPECT_TRUE(Contains(cache->refusal().message(), why)) << cache->refusal().ToString();
  EXPECT_FALSE(cache->Insert(key, ".so", "ours").ok());
  EXPECT_EQ(cache->discarded_entries(), 0) << "a planted entry is reported, not silently replaced";
}

TEST_F(KernelCacheTrustTest, AGroupWritableEntryIsRefused) {
  std::string dir = root_ + "/cache";
  std::string content = *KernelCache::Open(dir)->Insert(KernelCache::Key({"planted"}), ".so", "payload");
  ASSERT_EQ(::chmod(content.c_str(), 0664), 0);
  ExpectPlantedEntryRefused(dir, content, "writable by group or others");
}

TEST_F(KernelCacheTrustTest, AForeignOwnedEntryIsRefused) {
  SKIP_UNLESS_ROOT();
  std::string dir = root_ + "/cache";
  std::string content = *KernelCache::Open(dir)->Insert(KernelCache::Key({"planted"}), ".so", "payload");
  std::string entry = fs::path(content).parent_path().string();
  ASSERT_EQ(::chown(entry.c_str(), kOtherUid, kOtherUid), 0);
  ExpectPlantedEntryRefused(dir, entry, "owned by uid 12345");
}

TEST_F(KernelCacheTrustTest, ALinkedEntryFileIsRefused) {
  std::string dir = root_ + "/cache";
  std::string content = *KernelCache::Open(dir)->Insert(KernelCache::Key({"planted"}), ".so", "payload");
  ASSERT_TRUE(WriteFileAtomically(root_ + "/elsewhere.so", "payload").ok());
  fs::remove(content);
  fs::create_symlink(root_ + "/elsewhere.so", content);
  ExpectPlantedEntryRefused(dir, content, "symbolic link");
}

TEST_F(KernelCacheTrustTest, AnUnsafeDefaultFolderIsBypassedWithOneNotice) {
  std::string home = root_ + "/home";
  std::string dir = home + "/.cache/tilefuse";
  fs::create_directories(dir);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  ScopedEnv no_choice("TILEFUSE_CACHE_DIR", nullptr);
  ScopedEnv fake_home("HOME", home.c_str());
  ASSERT_TRUE(KernelCache::IsChosenByTilefuse(dir));
  ::testing::internal::CaptureStderr();
  StatusOr<KernelCache> cache = KernelCache::Open();
  StatusOr<KernelCache> again = KernelCache::Open(dir);  // the default, named explicitly
  std::string notice = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(cache->enabled());
  EXPECT_FALSE(again->enabled());
  EXPECT_TRUE(Contains(notice, "notice: not using the kernel cache folder '" + dir + "'")) << notice;
  EXPECT_EQ(notice.find('\n'), notice.size() - 1) << "one line, once per folder: " << notice;
  std::string key = KernelCache::Key({"k"});
  StatusOr<std::string> stored = cache->Insert(key, ".so", "bytes");
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, "") << "a bypassed cache stores nothing";
  EXPECT_FALSE(cache->Lookup(key, ".so").has_value());
  EXPECT_FALSE(fs::exists(dir + "/v1"));
}

// Without $HOME the default is the predictable /tmp/tilefuse-cache-<uid>: another user
// may make it first. TMPDIR points the temp directory at a scratch folder.
class TempFallbackTest : public KernelCacheTrustTest {
 protected:
  std::string Fallback() const { return root_ + "/tilefuse-cache-" + std::to_string(::getuid()); }
};

TEST_F(TempFallbackTest, AFreshFallbackIsCreatedPrivate) {
  ScopedEnv no_choice("TILEFUSE_CACHE_DIR", nullptr);
  ScopedEnv no_home("HOME", nullptr);
  ScopedEnv tmp("TMPDIR", root_.c_str());
  ASSERT_EQ(KernelCache::DefaultDirectory(), Fallback());
  StatusOr<KernelCache> cache = KernelCache::Open();
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_TRUE(cache->enabled());
  EXPECT_EQ(ModeOf(Fallback()), 0700u);
}

TEST_F(TempFallbackTest, AFallbackSomeoneElseMadeIsNeverReused) {
  SKIP_UNLESS_ROOT();
  ScopedEnv no_choice("TILEFUSE_CACHE_DIR", nullptr);
  ScopedEnv no_home("HOME", nullptr);
  ScopedEnv tmp("TMPDIR", root_.c_str());
  // The other user made it first, private to them, with an entry waiting for our key.
  std::string key = KernelCache::Key({"k"});
  std::string entry = Fallback() + "/v1/" + key + ".so.entry";
  fs::create_directories(entry);
  ASSERT_TRUE(WriteFileAtomically(entry + "/content.so", "planted").ok());
  for (const std::string& path : {Fallback(), Fallback() + "/v1", entry, entry + "/content.so"})
    ASSERT_EQ(::chown(path.c_str(), kOtherUid, kOtherUid), 0);
  ::testing::internal::CaptureStderr();
  StatusOr<KernelCache> cache = KernelCache::Open();
  std::string notice = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_FALSE(cache->enabled()) << "adopted a cache folder another user made";
  EXPECT_TRUE(Contains(notice, "owned by uid 12345")) << notice;
  EXPECT_FALSE(cache->Lookup(key, ".so").has_value());
}

TEST_F(TempFallbackTest, APermissiveFallbackIsNeverReused) {
  ScopedEnv no_choice("TILEFUSE_CACHE_DIR", nullptr);
  ScopedEnv no_home("HOME", nullptr);
  ScopedEnv tmp("TMPDIR", root_.c_str());
  fs::create_directory(Fallback());
  ASSERT_EQ(::chmod(Fallback().c_str(), 0777), 0);
  ::testing::internal::CaptureStderr();
  StatusOr<KernelCache> cache = KernelCache::Open();
  std::string notice = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_FALSE(cache->enabled());
  EXPECT_TRUE(Contains(notice, "writable by group or others")) << notice;
}

TEST(PrivateFolderTest, ReadPrivateFileRefusesLinksAndHardLinks) {
  std::string pattern = (fs::temp_directory_path() / "tilefuse-private-test-XXXXXX").string();
  ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
  std::string dir = pattern;
  ASSERT_TRUE(WriteFileAtomically(dir + "/file", "abc", 0600).ok());
  EXPECT_EQ(*ReadPrivateFile(dir + "/file"), "abc");
  fs::create_symlink(dir + "/file", dir + "/link");
  EXPECT_TRUE(Contains(ReadPrivateFile(dir + "/link").status().message(), "symbolic link"));
  fs::create_hard_link(dir + "/file", dir + "/hard");
  EXPECT_TRUE(Contains(ReadPrivateFile(dir + "/hard").status().message(), "2 hard links"));
  EXPECT_EQ(ReadPrivateFile(dir + "/absent").status().code(), StatusCode::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tilefuse

#include "support/file_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-file-util-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_;
};

TEST_F(FileUtilTest, WriteThenReadRoundTrips) {
  std::string path = dir_ + "/file";
  std::string bytes("with\0nul", 8);
  ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  EXPECT_EQ(*ReadWholeFile(path), bytes);
  EXPECT_EQ(*ReadFileRange(path, 5, 3), "nul");
  EXPECT_EQ(ReadWholeFile(dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

// Threads of one process writing one path each get their own temporary file: every write
// succeeds, the result is one writer's whole bytes, and no temporary file is left.
TEST_F(FileUtilTest, ConcurrentAtomicWritesOfOnePathFromThreads) {
  std::string path = dir_ + "/contended";
  constexpr int kThreads = 4;
  constexpr int kWritesPerThread = 50;
  constexpr size_t kSize = 64 * 1024;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string bytes(kSize, char('a' + t));
      for (int i = 0; i < kWritesPerThread; ++i) failures[t] += !WriteFileAtomically(path, bytes).ok();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  std::string result = *ReadWholeFile(path);
  ASSERT_EQ(result.size(), kSize);
  EXPECT_EQ(result, std::string(kSize, result[0])) << "bytes from two writers interleaved";
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_))
    EXPECT_EQ(entry.path().filename(), "contended") << entry.path();
}

}  // namespace
}  // namespace tilefuse

// Answers kept for the next process: found again by kind and key only, and a damaged entry is
// a miss, never an answer.
#include "support/answer_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "testing/scoped_env.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

// A fresh $TILEFUSE_CACHE_DIR per test, the previous value restored afterwards.
class AnswerCacheTest : public ::testing::Test {
 protected:
  static std::string MakeFolder() {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-answers-test-XXXXXX").string();
    EXPECT_NE(::mkdtemp(pattern.data()), nullptr);
    return pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_ = MakeFolder();
  ScopedEnv cache_dir_{"TILEFUSE_CACHE_DIR", dir_.c_str()};
};

TEST_F(AnswerCacheTest, AnAnswerIsFoundByItsKindAndKey) {
  EXPECT_FALSE(LoadAnswer("analysis", "key 1"));
  StoreAnswer("analysis", "key 1", "3 0 1 | 0");
  ASSERT_TRUE(LoadAnswer("analysis", "key 1"));
  EXPECT_EQ(*LoadAnswer("analysis", "key 1"), "3 0 1 | 0");
  EXPECT_FALSE(LoadAnswer("analysis", "key 2"));
  EXPECT_FALSE(LoadAnswer("another analysis", "key 1"));
}

TEST_F(AnswerCacheTest, ADamagedOrDiscardedAnswerIsAMiss) {
  StoreAnswer("analysis", "key", "an answer");
  StoreAnswer("analysis", "other key", "another answer");
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(dir_))
    if (entry.is_regular_file() && entry.path().filename() == "content.answer") {
      std::ifstream in(entry.path());
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text == "an answer") std::ofstream(entry.path(), std::ios::trunc) << "an ANSWER";  // same size, other bytes
    }
  EXPECT_FALSE(LoadAnswer("analysis", "key"));
  ASSERT_TRUE(LoadAnswer("analysis", "other key"));
  DiscardAnswer("analysis", "other key", "a test");
  EXPECT_FALSE(LoadAnswer("analysis", "other key"));
}

}  // namespace
}  // namespace tilefuse

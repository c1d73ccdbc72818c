#include "support/contained_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/open_watch.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A model folder and, beside it, an "outside" folder holding what a model must not reach.
class ContainedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-contained-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    root_ = pattern;
    model_ = root_ + "/model";
    outside_ = root_ + "/outside";
    fs::create_directories(model_ + "/data");
    fs::create_directories(outside_);
    Write(outside_ + "/secret.bin", "0123456789abcdef");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

  std::string root_, model_, outside_;
};

TEST_F(ContainedFileTest, ReadsARangeOfAPlainFileInside) {
  Write(model_ + "/data/w.bin", "xxxxABCDyy");
  StatusOr<std::string> bytes = ReadContainedFileRange(model_, "data/w.bin", 4, 4);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, "ABCD");
  StatusOr<std::string> rest = ReadContainedFileRange(model_, "./data/./w.bin", 8, std::nullopt);
  ASSERT_TRUE(rest.ok()) << rest.status().ToString();
  EXPECT_EQ(*rest, "yy");
}

TEST_F(ContainedFileTest, TheModelFolderItselfMayBeALink) {
  Write(model_ + "/w.bin", "abcd");
  fs::create_directory_symlink(model_, root_ + "/linked-model");
  StatusOr<std::string> bytes = ReadContainedFileRange(root_ + "/linked-model", "w.bin", 0, 4);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, "abcd");
}

TEST_F(ContainedFileTest, ALinkToAFileOutsideIsRefusedBeforeItIsOpened) {
  fs::create_symlink(outside_ + "/secret.bin", model_ + "/weights.bin");
  OpenWatch watch(outside_);
  ASSERT_TRUE(watch.works());
  StatusOr<std::string> bytes = ReadContainedFileRange(model_, "weights.bin", 0, 16);
  ASSERT_FALSE(bytes.ok()) << "read through the link: " << *bytes;
  EXPECT_TRUE(Contains(bytes.status().message(), "outside the model's folder")) << bytes.status().ToString();
  EXPECT_TRUE(Contains(bytes.status().message(), "weights.bin")) << bytes.status().ToString();
  EXPECT_EQ(watch.EventBytes(), 0) << "the file outside was opened or read";
  std::ifstream(outside_ + "/secret.bin").get();
  EXPECT_GT(watch.EventBytes(), 0) << "the watch sees an open when there is one";
}

TEST_F(ContainedFileTest, ALinkInsideToAFileInsideIsRefusedToo) {
  Write(model_ + "/real.bin", "abcd");
  fs::create_symlink("real.bin", model_ + "/alias.bin");
  StatusOr<std::string> bytes = ReadContainedFileRange(model_, "alias.bin", 0, 4);
  ASSERT_FALSE(bytes.ok());
  EXPECT_TRUE(Contains(bytes.status().message(), "is a symbolic link")) << bytes.status().ToString();
}

TEST_F(ContainedFileTest, ALinkedFolderOnTheWayIsRefused) {
  fs::create_directory_symlink(outside_, model_ + "/shards");
  OpenWatch watch(outside_);
  StatusOr<std::string> out = ReadContainedFileRange(model_, "shards/secret.bin", 0, 16);
  ASSERT_FALSE(out.ok());
  EXPECT_TRUE(Contains(out.status().message(), "outside the model's folder")) << out.status().ToString();
  EXPECT_EQ(watch.EventBytes(), 0) << "the folder outside was read";
  // A link to a folder inside is refused by the walk, not only by containment.
  Write(model_ + "/data/w.bin", "abcd");
  fs::create_directory_symlink("data", model_ + "/alias");
  StatusOr<std::string> in = ReadContainedFileRange(model_, "alias/w.bin", 0, 4);
  ASSERT_FALSE(in.ok());
  EXPECT_TRUE(Contains(in.status().message(), "'" + model_ + "/alias' is a symbolic link")) << in.status().ToString();
}

TEST_F(ContainedFileTest, AHardLinkedFileIsRefused) {
  fs::create_hard_link(outside_ + "/secret.bin", model_ + "/weights.bin");
  StatusOr<std::string> bytes = ReadContainedFileRange(model_, "weights.bin", 0, 16);
  ASSERT_FALSE(bytes.ok()) << "read a hard link: " << *bytes;
  EXPECT_TRUE(Contains(bytes.status().message(), "2 hard links")) << bytes.status().ToString();
}

TEST_F(ContainedFileTest, ParentAndAbsoluteLocationsAreRefused) {
  StatusOr<std::string> up = ReadContainedFileRange(model_, "../outside/secret.bin", 0, 16);
  ASSERT_FALSE(up.ok());
  EXPECT_TRUE(Contains(up.status().message(), "leaves the model's folder")) << up.status().ToString();
  StatusOr<std::string> absolute = ReadContainedFileRange(model_, outside_ + "/secret.bin", 0, 16);
  ASSERT_FALSE(absolute.ok());
  EXPECT_TRUE(Contains(absolute.status().message(), "must be relative")) << absolute.status().ToString();
}

TEST_F(ContainedFileTest, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((model_ + "/pipe.bin").c_str(), 0600), 0);
  StatusOr<std::string> bytes = ReadContainedFileRange(model_, "pipe.bin", 0, 4);
  ASSERT_FALSE(bytes.ok());
  EXPECT_TRUE(Contains(bytes.status().message(), "not a regular file")) << bytes.status().ToString();
}

TEST_F(ContainedFileTest, SizeIsCheckedBeforeReadingAndMissingIsNotFound) {
  Write(model_ + "/short.bin", "12345");
  StatusOr<std::string> short_file = ReadContainedFileRange(model_, "short.bin", 2, 4);
  ASSERT_FALSE(short_file.ok());
  EXPECT_TRUE(Contains(short_file.status().message(), "has 5 bytes, but 4 bytes from offset 2"))
      << short_file.status().ToString();
  StatusOr<std::string> missing = ReadContainedFileRange(model_, "data/absent.bin", 0, 4);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();
}

}  // namespace
}  // namespace tilefuse

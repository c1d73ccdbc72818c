// The tuner core's shortlist, and OpenTuningCache: both tuners' one way to find the tuning
// cache. An option given beats the environment, which beats the default; the tuning option
// beats the kernel cache's folder.
#include "tune/tuner_core.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

class OpenTuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("tilefuse_tuning_precedence_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    const char* old = std::getenv("TILEFUSE_CACHE_DIR");
    had_env_ = old != nullptr;
    if (old) old_env_ = old;
    setenv("TILEFUSE_CACHE_DIR", (root_ / "env").c_str(), 1);
  }
  void TearDown() override {
    if (had_env_) setenv("TILEFUSE_CACHE_DIR", old_env_.c_str(), 1);
    else unsetenv("TILEFUSE_CACHE_DIR");
    fs::remove_all(root_);
  }
  // Which of the candidate folders the cache opened (TuningCache::Open creates tuning/v1).
  std::string Opened() const {
    for (const char* name : {"tune", "kernels", "env"})
      if (fs::exists(root_ / name / "tuning")) return name;
    return "none";
  }
  fs::path root_;
  bool had_env_ = false;
  std::string old_env_;
};

TEST_F(OpenTuningCacheTest, TheTuningOptionBeatsTheKernelCacheWhichBeatsTheEnvironment) {
  TuneOptions tune;
  tune.cache_dir = (root_ / "tune").string();
  ASSERT_TRUE(OpenTuningCache(tune, (root_ / "kernels").string()).ok());
  EXPECT_EQ(Opened(), "tune");
  fs::remove_all(root_);
  ASSERT_TRUE(OpenTuningCache(TuneOptions{}, (root_ / "kernels").string()).ok());
  EXPECT_EQ(Opened(), "kernels");
  fs::remove_all(root_);
  ASSERT_TRUE(OpenTuningCache(TuneOptions{}, "").ok());
  EXPECT_EQ(Opened(), "env");
}

// A ranked space larger than the limit is cut to the default and the best-ranked others; a
// space without a rank (the templates') is measured whole, however many it holds.
TEST(ShortlistTest, RankedSpacesAreCutUnrankedOnesMeasuredWhole) {
  std::vector<nlohmann::json> all;
  for (int i = 0; i < 40; ++i) all.push_back({{"i", i}});
  const auto ranked = Shortlist(all, 16, [](const nlohmann::json& c) { return -c["i"].get<double>(); });
  ASSERT_EQ(ranked.size(), 16u);
  EXPECT_EQ(ranked.front(), all.front());  // the default always
  EXPECT_EQ(ranked[1], all[39]);           // then the best-ranked
  EXPECT_EQ(ranked[15], all[25]);
  EXPECT_EQ(Shortlist(all, 16, nullptr), all);
}

}  // namespace

}  // namespace tilefuse

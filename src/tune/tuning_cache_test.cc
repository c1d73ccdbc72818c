#include "tune/tuning_cache.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/file_util.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TuningKey H100Key() {
  return {.device = "NVIDIA H100 80GB HBM3", .arch = "sm_90a", .driver = "580.65", .compiler = "nvrtc 13.0",
          .kernel_hash = "0123456789abcdef0123456789abcdef", .shapes = "[[4096,4096]]", .dtypes = "[f16]"};
}

TuningMeasurement Timed(json config, double time_us) { return {std::move(config), time_us, "", ""}; }
TuningMeasurement Failed(json config, std::string error) {
  return {std::move(config), std::nullopt, std::move(error), ""};
}

// A fresh cache folder per test, removed afterwards.
class TuningCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tilefuse-tuning-cache-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  TuningCache OpenCache() {
    StatusOr<TuningCache> cache = TuningCache::Open(dir_);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return std::move(cache).value();
  }

  std::string dir_;
};

TEST_F(TuningCacheTest, KeyHashDependsOnEveryField) {
  TuningKey key = H100Key();
  EXPECT_EQ(key.Hash().size(), 32u);
  EXPECT_EQ(key.Hash(), H100Key().Hash());
  std::vector<std::string TuningKey::*> fields = {&TuningKey::device,      &TuningKey::arch,   &TuningKey::driver,
                                                  &TuningKey::compiler,    &TuningKey::kernel_hash,
                                                  &TuningKey::shapes,      &TuningKey::dtypes};
  for (std::string TuningKey::*field : fields) {
    TuningKey changed = key;
    changed.*field += "x";
    EXPECT_NE(changed.Hash(), key.Hash()) << changed.ToJson().dump();
  }
  // Field boundaries matter: moving a character from one field to the next is another key.
  TuningKey shifted = key;
  shifted.device = "NVIDIA H100 80GB HBM";
  shifted.arch = "3sm_90a";
  EXPECT_NE(shifted.Hash(), key.Hash());
}

TEST_F(TuningCacheTest, RecordThenLookupRoundTrips) {
  TuningCache cache = OpenCache();
  EXPECT_FALSE(cache.Lookup(H100Key()).has_value());
  ASSERT_TRUE(cache.Record(H100Key(), {Timed({{"threads", 256}, {"vector", 8}}, 12.25),
                                       Failed({{"threads", 1024}, {"vector", 8}}, "too many registers")})
                  .ok());
  EXPECT_TRUE(fs::exists(cache.FilePath(H100Key())));

  // A second instance (another process, say) reads the same record.
  std::optional<TuningRecord> record = OpenCache().Lookup(H100Key());
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->key, H100Key());
  ASSERT_EQ(record->measurements.size(), 2u);
  const TuningMeasurement& timed = record->measurements[0];
  EXPECT_EQ(timed.config, json({{"threads", 256}, {"vector", 8}}));
  EXPECT_EQ(timed.time_us, 12.25);
  EXPECT_EQ(timed.error, "");
  EXPECT_TRUE(std::regex_match(timed.measured_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << timed.measured_at;
  const TuningMeasurement& failed = record->measurements[1];
  EXPECT_FALSE(failed.time_us.has_value());
  EXPECT_EQ(failed.error, "too many registers");

  // Configs compare as JSON values: the order of their members does not matter.
  const TuningMeasurement* found = record->Find(json::parse(R"({"vector": 8, "threads": 256})"));
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->time_us, 12.25);
  EXPECT_EQ(record->Find({{"threads", 512}}), nullptr);
  ASSERT_NE(record->Best(), nullptr);
  EXPECT_EQ(record->Best()->config["threads"], 256);

  // The file says which config won, for people reading it.
  json file = json::parse(*ReadWholeFile(cache.FilePath(H100Key())));
  EXPECT_EQ(file["best"]["config"]["threads"], 256);
  EXPECT_EQ(file["key"], H100Key().ToJson());

  // Any other key misses.
  TuningKey other_shape = H100Key();
  other_shape.shapes = "[[4096,4097]]";
  EXPECT_FALSE(cache.Lookup(other_shape).has_value());
  EXPECT_EQ(cache.corrupt_files_ignored(), 0);
}

TEST_F(TuningCacheTest, RecordKeepsEarlierConfigsAndReplacesRemeasuredOnes) {
  TuningCache cache = OpenCache();
  ASSERT_TRUE(cache.Record(H100Key(), {Timed({{"threads", 128}}, 10.0), Timed({{"threads", 256}}, 20.0)}).ok());
  ASSERT_TRUE(cache.Record(H100Key(), {Timed({{"threads", 256}}, 5.0), Failed({{"threads", 512}}, "launch failed")})
                  .ok());
  std::optional<TuningRecord> record = cache.Lookup(H100Key());
  ASSERT_TRUE(record.has_value());
  ASSERT_EQ(record->measurements.size(), 3u) << "one entry per config";
  EXPECT_EQ(record->measurements[0].time_us, 10.0);
  EXPECT_EQ(record->measurements[1].time_us, 5.0);
  EXPECT_FALSE(record->measurements[2].time_us.has_value());
  EXPECT_EQ(record->Best()->config["threads"], 256);

  // Re-measured as failing, the former winner stops being the best.
  ASSERT_TRUE(cache.Record(H100Key(), {Failed({{"threads", 256}}, "illegal address")}).ok());
  record = cache.Lookup(H100Key());
  ASSERT_TRUE(record.has_value());
  ASSERT_EQ(record->measurements.size(), 3u);
  EXPECT_EQ(record->Find({{"threads", 256}})->error, "illegal address");
  EXPECT_EQ(record->Best()->config["threads"], 128);
}

TEST_F(TuningCacheTest, BestSkipsFailedConfigs) {
  TuningRecord record{H100Key(), {Failed({{"a", 1}}, "x"), Timed({{"a", 2}}, 30.0), Failed({{"a", 3}}, "y"),
                                  Timed({{"a", 4}}, 7.5), Timed({{"a", 5}}, 7.5)}};
  ASSERT_NE(record.Best(), nullptr);
  EXPECT_EQ(record.Best()->config["a"], 4) << "the first of equals";

  TuningCache cache = OpenCache();
  ASSERT_TRUE(cache.Record(H100Key(), {Failed({{"a", 1}}, "x"), Failed({{"a", 2}}, "y")}).ok());
  std::optional<TuningRecord> all_failed = cache.Lookup(H100Key());
  ASSERT_TRUE(all_failed.has_value());
  EXPECT_EQ(all_failed->measurements.size(), 2u);
  EXPECT_EQ(all_failed->Best(), nullptr);
  EXPECT_TRUE(json::parse(*ReadWholeFile(cache.FilePath(H100Key())))["best"].is_null());
}

TEST_F(TuningCacheTest, InvalidMeasurementsAreAStatusAndWriteNothing) {
  TuningCache cache = OpenCache();
  EXPECT_EQ(cache.Record(H100Key(), {Timed(json::array({1, 2}), 1.0)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Record(H100Key(), {Timed({{"a", 1}}, std::nan(""))}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Record(H100Key(), {Timed({{"a", 1}}, std::numeric_limits<double>::infinity())}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(cache.Record(H100Key(), {Timed({{"a", 1}}, 2.0), Timed({{"a", 2}}, -1.0)}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(cache.Record(H100Key(), {}).ok()) << "nothing to record is not an error";
  EXPECT_FALSE(fs::exists(cache.FilePath(H100Key())));
}

// How a file gets damaged, applied to a valid record of H100Key().
struct Damage {
  const char* name;
  std::string (*contents)(const std::string& valid, const std::string& other_keys_file);
};

class TuningCacheCorruptionTest : public TuningCacheTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(TuningCacheCorruptionTest, UnusableFileIsAWarnedMissThenRecordRepairsIt) {
  TuningCache cache = OpenCache();
  TuningKey other = H100Key();
  other.device = "NVIDIA H200";
  ASSERT_TRUE(cache.Record(H100Key(), {Timed({{"threads", 64}}, 9.0)}).ok());
  ASSERT_TRUE(cache.Record(other, {Timed({{"threads", 64}}, 8.0)}).ok());
  std::string path = cache.FilePath(H100Key());
  std::string damaged = GetParam().contents(*ReadWholeFile(path), *ReadWholeFile(cache.FilePath(other)));
  ASSERT_TRUE(WriteFileAtomically(path, damaged).ok());

  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(cache.Lookup(H100Key()).has_value());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("warning"), std::string::npos) << warning;
  EXPECT_NE(warning.find(path), std::string::npos) << warning;
  EXPECT_EQ(warning.find('\n'), warning.size() - 1) << "one line: " << warning;
  EXPECT_EQ(cache.corrupt_files_ignored(), 1);
  EXPECT_EQ(*ReadWholeFile(path), damaged) << "a reader leaves the file alone";

  // The next Record overwrites it (warning once more); the old entries are gone.
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(cache.Record(H100Key(), {Timed({{"threads", 32}}, 11.0)}).ok());
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("warning"), std::string::npos);
  ::testing::internal::CaptureStderr();
  std::optional<TuningRecord> repaired = cache.Lookup(H100Key());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(repaired.has_value());
  ASSERT_EQ(repaired->measurements.size(), 1u);
  EXPECT_EQ(repaired->measurements[0].config["threads"], 32);
  // The other key's record was never touched.
  EXPECT_EQ(cache.Lookup(other)->measurements[0].time_us, 8.0);
}

std::string Truncated(const std::string& valid, const std::string&) { return valid.substr(0, valid.size() / 2); }
std::string Garbage(const std::string&, const std::string&) { return std::string("\x7f" "ELF\0\x01\xff{[\"", 11); }
std::string Empty(const std::string&, const std::string&) { return ""; }
std::string OtherKeysRecord(const std::string&, const std::string& other) { return other; }
std::string NotAnObject(const std::string&, const std::string&) { return "[1, 2, 3]"; }
std::string FutureFormat(const std::string& valid, const std::string&) {
  json document = json::parse(valid);
  document["format"] = "tilefuse-tuning-cache v2";
  return document.dump();
}
std::string NegativeTime(const std::string& valid, const std::string&) {
  json document = json::parse(valid);
  document["measurements"][0]["time_us"] = -3.0;
  return document.dump();
}
std::string ConfigNotAnObject(const std::string& valid, const std::string&) {
  json document = json::parse(valid);
  document["measurements"][0]["config"] = "threads=64";
  return document.dump();
}

INSTANTIATE_TEST_SUITE_P(Damages, TuningCacheCorruptionTest,
                         ::testing::Values(Damage{"Truncated", Truncated}, Damage{"Garbage", Garbage},
                                           Damage{"Empty", Empty}, Damage{"OtherKeysRecord", OtherKeysRecord},
                                           Damage{"NotAnObject", NotAnObject}, Damage{"FutureFormat", FutureFormat},
                                           Damage{"NegativeTime", NegativeTime},
                                           Damage{"ConfigNotAnObject", ConfigNotAnObject}),
                         [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

// Each thread records its own configs one Record at a time, plus one config every thread
// re-measures; returns how many Records failed.
constexpr int kThreadsPerProcess = 4;
constexpr int kRecordsPerThread = 25;

int RecordFromThreads(const std::string& dir, int process) {
  std::atomic<int> failures = 0;
  std::vector<std::thread> threads;
  for (int thread = 0; thread < kThreadsPerProcess; ++thread) {
    threads.emplace_back([&, thread] {
      StatusOr<TuningCache> cache = TuningCache::Open(dir);  // one instance per thread
      if (!cache.ok()) return void(++failures);
      for (int i = 0; i < kRecordsPerThread; ++i) {
        json config = {{"process", process}, {"thread", thread}, {"i", i}};
        double time_us = 1000.0 * process + 100.0 * thread + i + 1;
        std::vector<TuningMeasurement> batch = {Timed(config, time_us)};
        if (i % 5 == 0) batch.push_back(Timed({{"shared", true}}, time_us));
        if (!cache->Record(H100Key(), batch).ok()) ++failures;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return failures;
}

TEST_F(TuningCacheTest, ConcurrentWritersInTwoProcessesKeepEveryConfig) {
  pid_t child = ::fork();
  ASSERT_NE(child, -1);
  if (child == 0) ::_exit(RecordFromThreads(dir_, 1) == 0 ? 0 : 1);  // no gtest in the child

  // Meanwhile a reader must only ever see whole files that grow.
  std::atomic<bool> writers_done = false;
  int64_t reader_corrupt = 0;
  size_t reader_shrinks = 0;
  std::thread reader([&] {
    TuningCache cache = OpenCache();
    size_t seen = 0;
    while (!writers_done) {
      if (std::optional<TuningRecord> record = cache.Lookup(H100Key())) {
        reader_shrinks += record->measurements.size() < seen;
        seen = record->measurements.size();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the machine may have two cores
    }
    reader_corrupt = cache.corrupt_files_ignored();
  });
  EXPECT_EQ(RecordFromThreads(dir_, 0), 0);
  int child_status = 0;
  ASSERT_EQ(::waitpid(child, &child_status, 0), child);
  writers_done = true;
  reader.join();
  ASSERT_TRUE(WIFEXITED(child_status));
  EXPECT_EQ(WEXITSTATUS(child_status), 0) << "a Record failed in the child process";
  EXPECT_EQ(reader_corrupt, 0);
  EXPECT_EQ(reader_shrinks, 0u) << "with the lock no writer drops another's entries";

  TuningCache cache = OpenCache();
  std::optional<TuningRecord> record = cache.Lookup(H100Key());
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->measurements.size(), size_t{2 * kThreadsPerProcess * kRecordsPerThread + 1});
  for (int process = 0; process < 2; ++process)
    for (int thread = 0; thread < kThreadsPerProcess; ++thread)
      for (int i = 0; i < kRecordsPerThread; ++i) {
        const TuningMeasurement* found = record->Find({{"process", process}, {"thread", thread}, {"i", i}});
        ASSERT_NE(found, nullptr) << process << "/" << thread << "/" << i;
        EXPECT_EQ(found->time_us, 1000.0 * process + 100.0 * thread + i + 1);
      }
  EXPECT_EQ(record->Best()->time_us, 1.0);
  // No temporary files are left behind: only the record and its lock file.
  for (const fs::directory_entry& entry : fs::directory_iterator(fs::path(dir_) / "tuning" / "v1")) {
    std::string name = entry.path().filename().string();
    EXPECT_TRUE(name == H100Key().Hash() + ".json" || name == H100Key().Hash() + ".lock") << name;
  }
}

TEST_F(TuningCacheTest, EnvironmentVariableChoosesTheDefaultDirectory) {
  const char* previous = std::getenv("TILEFUSE_CACHE_DIR");
  std::string saved = previous ? previous : "";
  ::setenv("TILEFUSE_CACHE_DIR", dir_.c_str(), 1);
  StatusOr<TuningCache> cache = TuningCache::Open();
  if (previous) ::setenv("TILEFUSE_CACHE_DIR", saved.c_str(), 1);
  else ::unsetenv("TILEFUSE_CACHE_DIR");
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  EXPECT_TRUE(fs::is_directory(fs::path(dir_) / "tuning" / "v1"));
  EXPECT_EQ(cache->FilePath(H100Key()), fmt::format("{}/tuning/v1/{}.json", dir_, H100Key().Hash()));
}

TEST_F(TuningCacheTest, UnusableDirectoryIsAStatus) {
  std::string file = dir_ + "/a-file";
  ASSERT_TRUE(WriteFileAtomically(file, "x").ok());
  StatusOr<TuningCache> cache = TuningCache::Open(file + "/cache");
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("tuning cache"), std::string::npos) << cache.status().ToString();
}

}  // namespace
}  // namespace tilefuse

#include "runtime/trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/file_util.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / fmt::format("tilefuse_trace_test_{}_{}", ::getpid(), counter_++);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TraceEvent Kernel(std::string name, double start, double duration, int track) {
  return {std::move(name), "kernel", start, duration, track, {{"group", "3"}, {"kind", "pointwise"}}};
}

// The complete ("X") events of a parsed trace.
std::vector<nlohmann::json> CompleteEvents(const nlohmann::json& trace) {
  std::vector<nlohmann::json> events;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") events.push_back(e);
  return events;
}

TEST(TraceTest, EventsRoundTripThroughJson) {
  TraceRecorder recorder;
  recorder.Add(Kernel("group 0 (row_reduction)", 0.5, 12.25, 0));
  recorder.Add(Kernel("group 1 \"quoted\" \\ name", 13, 1e6, 2));
  recorder.SetTrackName(2, "worker");
  nlohmann::json trace = nlohmann::json::parse(recorder.ToJson());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ns");
  std::vector<nlohmann::json> events = CompleteEvents(trace);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].at("name"), "group 0 (row_reduction)");
  EXPECT_EQ(events[0].at("cat"), "kernel");
  EXPECT_DOUBLE_EQ(events[0].at("ts").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(events[0].at("dur").get<double>(), 12.25);
  EXPECT_EQ(events[0].at("tid"), 0);
  EXPECT_EQ(events[0].at("args").at("kind"), "pointwise");
  EXPECT_EQ(events[1].at("name"), "group 1 \"quoted\" \\ name");
  EXPECT_DOUBLE_EQ(events[1].at("dur").get<double>(), 1e6);
  EXPECT_EQ(events[1].at("tid"), 2);
  EXPECT_EQ(events[0].at("pid"), events[1].at("pid"));
  bool named = false;
  for (const nlohmann::json& e : trace.at("traceEvents"))
    named |= e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("tid") == 2 && e.at("args").at("name") == "worker";
  EXPECT_TRUE(named);
}

TEST(TraceTest, EmptyTraceIsValidJson) {
  TraceRecorder recorder;
  nlohmann::json trace = nlohmann::json::parse(recorder.ToJson());
  EXPECT_TRUE(CompleteEvents(trace).empty());
}

TEST(TraceTest, InvalidUtf8NamesDoNotThrow) {
  TraceRecorder recorder;
  recorder.Add(Kernel("bad \xff byte", 0, 1, 0));
  std::string json = recorder.ToJson();
  EXPECT_EQ(CompleteEvents(nlohmann::json::parse(json)).size(), 1u);
}

TEST(TraceTest, ScopedEventsMeasureTheirScope) {
  TraceRecorder recorder;
  double before = recorder.NowMicros();
  {
    ScopedTraceEvent event(recorder, "sleep", "kernel", 1);
    event.AddArg("bytes", "1024");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  double after = recorder.NowMicros();
  std::vector<TraceEvent> events = recorder.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].track, 1);
  EXPECT_GE(events[0].start_us, before);
  EXPECT_GE(events[0].duration_us, 2000.0);
  EXPECT_LE(events[0].start_us + events[0].duration_us, after);
  EXPECT_EQ(events[0].args, (std::vector<std::pair<std::string, std::string>>{{"bytes", "1024"}}));
}

TEST(TraceTest, ThreadsCanRecordTogether) {
  TraceRecorder recorder;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&recorder, t] {
      for (int i = 0; i < 100; ++i) recorder.Add(Kernel(fmt::format("k{}", i), i, 1, t));
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(CompleteEvents(nlohmann::json::parse(recorder.ToJson())).size(), 400u);
}

TEST(TraceTest, WritesTheFileAtomically) {
  TempDir dir;
  std::string path = dir.File("run.trace.json");
  TraceRecorder recorder;
  recorder.Add(Kernel("first", 0, 5, 0));
  ASSERT_TRUE(WriteChromeTrace(recorder, path).ok());
  recorder.Add(Kernel("second", 5, 5, 0));
  ASSERT_TRUE(WriteChromeTrace(recorder, path).ok());  // replaces the first file
  StatusOr<std::string> text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(CompleteEvents(nlohmann::json::parse(*text)).size(), 2u);
  int files = 0;  // no temporary file left beside it
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1);
}

TEST(TraceTest, UnwritablePathIsAnErrorNamingTheFile) {
  TempDir dir;
  std::string path = dir.File("missing_folder/run.trace.json");
  Status status = WriteChromeTrace(TraceRecorder(), path);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace tilefuse

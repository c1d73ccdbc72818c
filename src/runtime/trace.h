// Chrome trace: records the kernels of a run as complete events and writes them in the
// Chrome trace-event JSON format, which Perfetto (ui.perfetto.dev) and chrome://tracing
// open:
//
//   {"traceEvents": [{"name": "group 3 (pointwise)", "cat": "kernel", "ph": "X",
//                     "ts": 12.5, "dur": 40.25, "pid": 1, "tid": 0, "args": {...}}, ...],
//    "displayTimeUnit": "ns"}
//
// Times are microseconds (the format's unit; fractions allowed). Tracks become the
// rows of the viewer ("tid"); name them with SetTrackName.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tilefuse/status.h"

namespace tilefuse {

struct TraceEvent {
  std::string name;
  std::string category;  // "kernel", "copy", "compile", ...
  double start_us = 0;
  double duration_us = 0;
  int track = 0;
  std::vector<std::pair<std::string, std::string>> args;  // shown in the viewer's details
};

// Thread-safe: kernels may record from several threads.
class TraceRecorder {
 public:
  TraceRecorder();

  // Microseconds since the recorder was made, on a steady clock: the time base of
  // events recorded during a run.
  double NowMicros() const;

  void Add(TraceEvent event);
  void SetTrackName(int track, std::string name);
  void SetProcessName(std::string name);

  std::vector<TraceEvent> events() const;  // in the order added
  // The trace-event JSON (see the top of this file).
  std::string ToJson() const;

 private:
  std::chrono::steady_clock::time_point origin_;
  mutable std::mutex mutex_;
  std::vector<TraceEvent> events_;
  std::map<int, std::string> track_names_;
  std::string process_name_ = "tilefuse";
};

// Writes recorder.ToJson() to `path` atomically; the error names the file.
Status WriteChromeTrace(const TraceRecorder& recorder, const std::string& path);

// Records one complete event from construction to destruction:
//   { ScopedTraceEvent kernel(recorder, "group 3 (pointwise)", "kernel"); Launch(...); }
class ScopedTraceEvent {
 public:
  ScopedTraceEvent(TraceRecorder& recorder, std::string name, std::string category, int track = 0);
  ~ScopedTraceEvent();
  ScopedTraceEvent(const ScopedTraceEvent&) = delete;
  ScopedTraceEvent& operator=(const ScopedTraceEvent&) = delete;

  void AddArg(std::string key, std::string value) { event_.args.emplace_back(std::move(key), std::move(value)); }

 private:
  TraceRecorder& recorder_;
  TraceEvent event_;
};

}  // namespace tilefuse

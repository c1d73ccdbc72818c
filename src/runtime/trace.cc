#include "runtime/trace.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "support/file_util.h"

namespace tilefuse {

namespace {

// Every event of one run belongs to one process row in the viewer.
constexpr int kProcessId = 1;

nlohmann::json EventJson(const TraceEvent& event) {
  nlohmann::json args = nlohmann::json::object();
  for (const auto& [key, value] : event.args) args[key] = value;
  return {{"name", event.name}, {"cat", event.category}, {"ph", "X"},       {"ts", event.start_us},
          {"dur", event.duration_us}, {"pid", kProcessId}, {"tid", event.track}, {"args", std::move(args)}};
}

// "M" (metadata) events name the process and track rows.
nlohmann::json NameJson(const char* kind, int track, const std::string& name) {
  return {{"name", kind}, {"ph", "M"}, {"pid", kProcessId}, {"tid", track}, {"args", {{"name", name}}}};
}

}  // namespace

TraceRecorder::TraceRecorder() : origin_(std::chrono::steady_clock::now()) {}

double TraceRecorder::NowMicros() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_).count();
}

void TraceRecorder::Add(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

void TraceRecorder::SetTrackName(int track, std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  track_names_[track] = std::move(name);
}

void TraceRecorder::SetProcessName(std::string name) {
  std::lock_guard<std::mutex> lock(mutex_);
  process_name_ = std::move(name);
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string TraceRecorder::ToJson() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<nlohmann::json> events;
  events.push_back(NameJson("process_name", 0, process_name_));
  for (const auto& [track, name] : track_names_) events.push_back(NameJson("thread_name", track, name));
  for (const TraceEvent& event : events_) events.push_back(EventJson(event));
  // One event per line: small, and still readable with grep and diff. Kernel names come
  // from ONNX node names, which need not be valid UTF-8: bad bytes are replaced, not thrown.
  std::string json = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); ++i) {
    json += events[i].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    json += i + 1 < events.size() ? ",\n" : "\n";
  }
  json += "],\n\"displayTimeUnit\": \"ns\"}\n";
  return json;
}

Status WriteChromeTrace(const TraceRecorder& recorder, const std::string& path) {
  Status written = WriteFileAtomically(path, recorder.ToJson());
  if (!written.ok()) return written.WithContext(fmt::format("writing the Chrome trace '{}'", path));
  return Status::Ok();
}

ScopedTraceEvent::ScopedTraceEvent(TraceRecorder& recorder, std::string name, std::string category, int track)
    : recorder_(recorder) {
  event_.name = std::move(name);
  event_.category = std::move(category);
  event_.track = track;
  event_.start_us = recorder.NowMicros();
}

ScopedTraceEvent::~ScopedTraceEvent() {
  event_.duration_us = recorder_.NowMicros() - event_.start_us;
  recorder_.Add(std::move(event_));
}

}  // namespace tilefuse

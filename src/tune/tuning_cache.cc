#include "tune/tuning_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string_view>

#include "support/content_hash.h"
#include "support/file_util.h"
#include "support/kernel_cache.h"
#include "support/private_folder.h"

namespace tilefuse {

namespace {
using nlohmann::json;

// A new file format gets a new folder (tuning/v2) and a new tag, never a misreading.
constexpr std::string_view kFormatTag = "tilefuse-tuning-cache v1";
constexpr std::string_view kRecordsSubfolder = "tuning/v1";
// Reasons end up on one warning line; parser messages can be long.
constexpr size_t kMaxReasonLength = 160;

// An exclusive flock on `path` for this object's lifetime, or nothing when the file
// system refuses (then the caller goes on unlocked). Each instance opens its own file
// description, so it excludes other threads of this process as well as other processes.
// Only one lock is ever held at a time, so waiting on it cannot deadlock.
class ExclusiveFileLock {
 public:
  explicit ExclusiveFileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) {
    if (fd_ < 0) return;
    int result;
    do result = ::flock(fd_, LOCK_EX);
    while (result != 0 && errno == EINTR);
    if (result != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~ExclusiveFileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
  }
  ExclusiveFileLock(const ExclusiveFileLock&) = delete;
  ExclusiveFileLock& operator=(const ExclusiveFileLock&) = delete;

 private:
  int fd_;
};

std::string NowIso8601Utc() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

bool IsValidTime(double time_us) { return std::isfinite(time_us) && time_us >= 0; }

json MeasurementToJson(const TuningMeasurement& measurement) {
  json out = {{"config", measurement.config}};
  if (measurement.time_us) out["time_us"] = *measurement.time_us;
  if (!measurement.error.empty()) out["error"] = measurement.error;
  out["measured_at"] = measurement.measured_at;
  return out;
}

// Replaces the measurement of the same config, else appends: one entry per config.
void MergeMeasurement(std::vector<TuningMeasurement>& measurements, TuningMeasurement measurement) {
  for (TuningMeasurement& existing : measurements) {
    if (existing.config == measurement.config) {
      existing = std::move(measurement);
      return;
    }
  }
  measurements.push_back(std::move(measurement));
}

// The optional string member `name` of `object`; false when present but not a string.
bool ReadOptionalString(const json& object, const char* name, std::string& out) {
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

// Decodes one stored measurement; "" on success, else what is wrong with it.
std::string DecodeMeasurement(const json& entry, TuningMeasurement& out) {
  if (!entry.is_object()) return "a measurement is not a JSON object";
  auto config = entry.find("config");
  if (config == entry.end() || !config->is_object()) return "a measurement has no config object";
  out.config = *config;
  auto time = entry.find("time_us");
  if (time != entry.end() && !time->is_null()) {
    if (!time->is_number() || !IsValidTime(time->get<double>())) return "a measurement has an invalid time_us";
    out.time_us = time->get<double>();
  }
  if (!ReadOptionalString(entry, "error", out.error) || !ReadOptionalString(entry, "measured_at", out.measured_at))
    return "a measurement has a non-string error or measured_at";
  return "";
}

// Decodes a whole file for `key`; "" on success, else why the file cannot be used.
std::string DecodeRecord(std::string_view text, const TuningKey& key, TuningRecord& out) {
  json document = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return "not valid JSON (truncated or damaged)";
  if (!document.is_object()) return "not a JSON object";
  auto format = document.find("format");
  if (format == document.end() || !format->is_string() || format->get_ref<const std::string&>() != kFormatTag)
    return fmt::format("format is not '{}'", kFormatTag);
  auto stored_key = document.find("key");
  if (stored_key == document.end() || *stored_key != key.ToJson())
    return "it holds another key (a hash collision or a stale file)";
  auto measurements = document.find("measurements");
  if (measurements == document.end() || !measurements->is_array()) return "no measurements array";
  out.key = key;
  for (const json& entry : *measurements) {
    TuningMeasurement measurement;
    if (std::string problem = DecodeMeasurement(entry, measurement); !problem.empty()) return problem;
    MergeMeasurement(out.measurements, std::move(measurement));
  }
  return "";
}

std::string EncodeRecord(const TuningRecord& record) {
  json measurements = json::array();
  for (const TuningMeasurement& measurement : record.measurements)
    measurements.push_back(MeasurementToJson(measurement));
  // "best" is derived (readers recompute it from the measurements); it is written for
  // people and scripts who read the file.
  const TuningMeasurement* best = record.Best();
  json document = {{"format", std::string(kFormatTag)},
                   {"key", record.key.ToJson()},
                   {"measurements", std::move(measurements)},
                   {"best", best ? json{{"config", best->config}, {"time_us", *best->time_us}} : json(nullptr)}};
  return document.dump(2) + "\n";
}

Status ValidateMeasurement(const TuningMeasurement& measurement) {
  if (!measurement.config.is_object())
    return InvalidArgument(fmt::format("a tuning config must be a JSON object, got '{}'", measurement.config.dump()));
  if (measurement.time_us && !IsValidTime(*measurement.time_us))
    return InvalidArgument(fmt::format("config {} has time {} us; record a failure as no time with an error",
                                       measurement.config.dump(), *measurement.time_us));
  return Status::Ok();
}
}  // namespace

std::string TuningKey::Hash() const {
  std::array<std::string_view, 8> parts = {kFormatTag, device, arch, driver, compiler, kernel_hash, shapes, dtypes};
  return HashParts(parts).ToHex();
}

json TuningKey::ToJson() const {
  return {{"device", device},           {"arch", arch},     {"driver", driver}, {"compiler", compiler},
          {"kernel_hash", kernel_hash}, {"shapes", shapes}, {"dtypes", dtypes}};
}

const TuningMeasurement* TuningRecord::Best() const {
  const TuningMeasurement* best = nullptr;
  for (const TuningMeasurement& measurement : measurements)
    if (measurement.time_us && (!best || *measurement.time_us < *best->time_us)) best = &measurement;
  return best;
}

const TuningMeasurement* TuningRecord::Find(const json& config) const {
  for (const TuningMeasurement& measurement : measurements)
    if (measurement.config == config) return &measurement;
  return nullptr;
}

StatusOr<TuningCache> TuningCache::Open(std::string directory) {
  if (directory.empty()) directory = KernelCache::DefaultDirectory();
  bool user_chose = !KernelCache::IsChosenByTilefuse(directory);
  std::string folder = fmt::format("{}/{}", directory, kRecordsSubfolder);
  TuningCache cache(directory, folder, user_chose);
  // The cache folder may be a link the user made (or root did); what is below is ours.
  Status made = MakePrivateFolder(directory, /*allow_link=*/true);
  if (made.ok()) made = MakePrivateFolder(std::filesystem::path(folder).parent_path().string());
  if (made.ok()) made = MakePrivateFolder(folder);
  if (!made.ok()) RETURN_IF_ERROR(cache.Refuse(made));
  return cache;
}

Status TuningCache::Refuse(const Status& problem) {
  Status refused = RefuseCacheFolder("tuning cache folder", directory_, user_chose_, problem);
  if (refused.ok()) enabled_ = false;
  else refusal_ = refused;
  return refused;
}

std::string TuningCache::FilePath(const TuningKey& key) const {
  return fmt::format("{}/{}.json", records_folder_, key.Hash());
}

std::optional<TuningRecord> TuningCache::ReadRecord(const TuningKey& key, const char* consequence) {
  if (!enabled_ || !refusal_.ok()) return std::nullopt;
  std::string path = FilePath(key);
  // Trust before reading: a record someone else could write is never read.
  Status safe = CheckPrivateFile(path);
  if (safe.code() == StatusCode::kNotFound) return std::nullopt;
  if (!safe.ok()) {
    static_cast<void>(Refuse(safe));  // recorded in refusal_ or noticed
    return std::nullopt;
  }
  StatusOr<std::string> text = ReadPrivateFile(path);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) return std::nullopt;
  TuningRecord record;
  std::string problem = text.ok() ? DecodeRecord(*text, key, record) : text.status().message();
  if (problem.empty()) return record;
  if (problem.size() > kMaxReasonLength) problem = problem.substr(0, kMaxReasonLength) + "...";
  std::fprintf(stderr, "tilefuse: warning: ignoring tuning cache file %s (%s); %s\n", path.c_str(), problem.c_str(),
               consequence);
  ++corrupt_files_ignored_;
  return std::nullopt;
}

std::optional<TuningRecord> TuningCache::Lookup(const TuningKey& key) {
  return ReadRecord(key, "the next Record overwrites it");
}

Status TuningCache::Record(const TuningKey& key, const std::vector<TuningMeasurement>& measurements) {
  for (const TuningMeasurement& measurement : measurements) RETURN_IF_ERROR(ValidateMeasurement(measurement));
  if (measurements.empty()) return Status::Ok();
  RETURN_IF_ERROR(refusal_);
  if (!enabled_) return Status::Ok();
  std::string path = FilePath(key);
  // Read, merge and rename under the lock, so a concurrent writer's entries are read
  // before ours replace the file, not overwritten by it.
  ExclusiveFileLock lock(fmt::format("{}/{}.lock", records_folder_, key.Hash()));
  TuningRecord record = ReadRecord(key, "overwriting it").value_or(TuningRecord{key, {}});
  RETURN_IF_ERROR(refusal_);  // the file there was not ours: do not write beside it
  if (!enabled_) return Status::Ok();
  std::string now = NowIso8601Utc();
  for (TuningMeasurement measurement : measurements) {
    if (measurement.measured_at.empty()) measurement.measured_at = now;
    MergeMeasurement(record.measurements, std::move(measurement));
  }
  return WriteFileAtomically(path, EncodeRecord(record), 0600);
}

}  // namespace tilefuse

// TuningCache: the autotuner's memory across runs. For one tuning key (device, driver,
// compiler, kernel, shapes, dtypes) it keeps every configuration measured so far, so a
// later run can reuse the winner, or measure only the configurations it has not tried.
//
// Directory: <cache dir>/tuning/v1/, where <cache dir> is the one given to Open, else
// KernelCache::DefaultDirectory() ($TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse).
// One JSON file per key, named by the key's hash:
//
//   <dir>/tuning/v1/<hash>.json   {"format": ..., "key": {...}, "measurements": [...], "best": ...}
//   <dir>/tuning/v1/<hash>.lock   empty; writers of <hash>.json hold flock on it
//
// The key's fields are stored in the file and compared on read, so a hash collision or a
// stale file is a miss, never another kernel's answer. A file that does not parse, or
// holds another key, is ignored with a one-line warning and overwritten by the next Record.
//
// Writers read, merge by config and write a temporary file that is renamed over the old
// one, all under an exclusive flock of the key's lock file: concurrent Records (threads
// or processes) of different configs all survive. Readers take no lock; rename makes them
// see the old file or the new one, whole. Where flock is unavailable (some network file
// systems) Record still works, but two simultaneous writers may lose one's entries.
//
// Trust (docs/security.md): the folders are created 0700, and before a record is read the
// folders and the file must be owned by the current user and writable by nobody else, as
// for the kernel cache (support/kernel_cache.h): an error naming the folder and the fix
// when the user chose it, else a one-line notice and no tuning cache for this process.
//
// One instance is used by one thread at a time; separate instances may share a directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tilefuse/status.h"

namespace tilefuse {

// Everything a measured time depends on. Fields are free-form strings chosen by the
// caller (e.g. arch "sm_90a", shapes "[[4096,4096]]"); equal keys must be equal strings.
struct TuningKey {
  std::string device;       // "NVIDIA H100 80GB HBM3", "cpu: AMD EPYC 7B13"
  std::string arch;         // "sm_90a", "x86-64-v3"
  std::string driver;       // driver version
  std::string compiler;     // NVRTC or host compiler version
  std::string kernel_hash;  // hash of the kernel's source before tuning parameters apply
  std::string shapes;
  std::string dtypes;

  // 32 hex digits over every field (support/content_hash.h): the file name.
  std::string Hash() const;
  nlohmann::json ToJson() const;
  bool operator==(const TuningKey&) const = default;
};

// One configuration's outcome. A failed configuration has no time and says why; it counts
// as infinitely slow, and recording it saves the next run from trying it again.
struct TuningMeasurement {
  nlohmann::json config;          // a JSON object of the caller's parameters
  std::optional<double> time_us;  // nullopt: the configuration failed
  std::string error;              // why it failed (empty when it has a time)
  std::string measured_at;        // ISO 8601 UTC; Record fills it in when empty
};

struct TuningRecord {
  TuningKey key;
  std::vector<TuningMeasurement> measurements;  // one per config, in first-recorded order

  // The fastest measurement with a time (the first of equals); nullptr when none has one.
  const TuningMeasurement* Best() const;
  // The measurement of `config` (compared as JSON values, so key order does not matter).
  const TuningMeasurement* Find(const nlohmann::json& config) const;
};

class TuningCache {
 public:
  // Opens (creating it if needed) <directory>/tuning/v1; directory "" means
  // KernelCache::DefaultDirectory().
  static StatusOr<TuningCache> Open(std::string directory = "");

  // The record stored for `key`; nullopt when there is none or the file is corrupt or
  // holds another key (then with a one-line warning on stderr).
  std::optional<TuningRecord> Lookup(const TuningKey& key);
  // Merges `measurements` into the stored record (nothing when the cache is bypassed): a config seen before is replaced by the
  // new measurement, others are kept. InvalidArgument for a config that is not a JSON
  // object or a time that is negative or not finite; a failure to write names the file.
  Status Record(const TuningKey& key, const std::vector<TuningMeasurement>& measurements);

  // Where `key`'s record lives (whether or not it exists).
  std::string FilePath(const TuningKey& key) const;
  // Files this instance found corrupt or holding another key, in Lookup or Record.
  int64_t corrupt_files_ignored() const { return corrupt_files_ignored_; }
  // False when the default folder was found unsafe: nothing is read or stored.
  bool enabled() const { return enabled_; }

 private:
  TuningCache(std::string directory, std::string records_folder, bool user_chose)
      : directory_(std::move(directory)), records_folder_(std::move(records_folder)), user_chose_(user_chose) {}
  // An error for a folder the user chose (kept for Record), else Ok and the cache bypassed.
  Status Refuse(const Status& problem);
  // The stored record, nullopt when absent; warns and counts when the file is unusable.
  std::optional<TuningRecord> ReadRecord(const TuningKey& key, const char* consequence);

  std::string directory_;       // <dir>, as the user or the default named it
  std::string records_folder_;  // <dir>/tuning/v1
  bool user_chose_ = true;
  bool enabled_ = true;
  Status refusal_;
  int64_t corrupt_files_ignored_ = 0;
};

}  // namespace tilefuse

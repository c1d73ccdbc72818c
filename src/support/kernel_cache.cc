#include "support/kernel_cache.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "support/check.h"
#include "support/content_hash.h"
#include "support/file_util.h"
#include "support/private_folder.h"

namespace tilefuse {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kFormatVersion = "v1";
constexpr std::string_view kIntegrityMagic = "tilefuse-kernel-cache v1";
constexpr int kPublishAttempts = 3;

std::string ContentName(std::string_view suffix) { return fmt::format("content{}", suffix); }

std::string IntegrityRecord(std::string_view bytes) {
  return fmt::format("{} {} {}\n", kIntegrityMagic, bytes.size(), HashBytes(bytes).ToHex());
}

// Keys and suffixes become file names: only our own hex keys and ".ext" suffixes.
bool IsHexKey(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
bool IsSuffix(std::string_view suffix) {
  if (suffix.size() < 2 || suffix[0] != '.') return false;
  for (char c : suffix.substr(1))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
  return true;
}

// A fresh private folder `<parent>/<prefix>XXXXXX`, or "" with errno set.
std::string MakeUniqueFolder(const std::string& parent, std::string_view prefix) {
  std::string path = fmt::format("{}/{}XXXXXX", parent, prefix);
  std::vector<char> buffer(path.begin(), path.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) return "";
  return std::string(buffer.data());
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

// Why the entry folder (which exists) is not a valid entry, or "" when it is.
std::string FindDamage(const std::string& folder, std::string_view suffix) {
  StatusOr<std::string> content = ReadPrivateFile(folder + "/" + ContentName(suffix));
  if (!content.ok()) return "content unreadable: " + content.status().message();
  StatusOr<std::string> record = ReadPrivateFile(folder + "/integrity");
  if (!record.ok()) return "integrity record unreadable: " + record.status().message();
  if (*record != IntegrityRecord(*content)) {
    std::string first_line = record->substr(0, record->find('\n'));
    return fmt::format("content has {} bytes hashing to {}, record says '{}'", content->size(),
                       HashBytes(*content).ToHex(), first_line.substr(0, 120));
  }
  return "";
}
}  // namespace

std::string KernelCache::DefaultDirectory() {
  const char* explicit_dir = std::getenv("TILEFUSE_CACHE_DIR");
  if (explicit_dir && *explicit_dir) return explicit_dir;
  const char* home = std::getenv("HOME");
  if (home && *home) return fmt::format("{}/.cache/tilefuse", home);
  // No home folder (a bare container): a per-user folder in the temp directory.
  std::error_code ec;
  return fmt::format("{}/tilefuse-cache-{}", fs::temp_directory_path(ec).string(), ::getuid());
}

bool KernelCache::IsChosenByTilefuse(const std::string& directory) {
  const char* explicit_dir = std::getenv("TILEFUSE_CACHE_DIR");
  return !(explicit_dir && *explicit_dir) && directory == DefaultDirectory();
}

KernelCache::KernelCache(std::string directory, bool user_chose)
    : directory_(std::move(directory)),
      entries_(fmt::format("{}/{}", directory_, kFormatVersion)),
      user_chose_(user_chose) {}

StatusOr<KernelCache> KernelCache::Open(std::string directory) {
  if (directory.empty()) directory = DefaultDirectory();
  bool user_chose = !IsChosenByTilefuse(directory);
  KernelCache cache(std::move(directory), user_chose);
  // The folder itself may be a link the user made (or root did); v1/ is ours alone.
  Status made = MakePrivateFolder(cache.directory_, /*allow_link=*/true);
  if (made.ok()) made = MakePrivateFolder(cache.entries_);
  if (!made.ok()) RETURN_IF_ERROR(cache.Refuse(made));
  return cache;
}

Status KernelCache::Refuse(const Status& problem) {
  Status refused = RefuseCacheFolder("kernel cache folder", directory_, user_chose_, problem);
  if (refused.ok()) enabled_ = false;
  else refusal_ = refused;
  return refused;
}

Status KernelCache::CheckEntryIsPrivate(const std::string& folder, std::string_view suffix) const {
  RETURN_IF_ERROR(CheckPrivateFolder(folder));
  for (const std::string& file : {folder + "/" + ContentName(suffix), folder + "/integrity"}) {
    Status checked = CheckPrivateFile(file);
    // A missing file is damage (found next, and rebuilt), not a planted one.
    if (!checked.ok() && checked.code() != StatusCode::kNotFound) return checked;
  }
  return Status::Ok();
}

std::string KernelCache::Key(std::initializer_list<std::string_view> parts) {
  return Key(std::span<const std::string_view>(parts.begin(), parts.size()));
}

std::string KernelCache::Key(std::span<const std::string_view> parts) { return HashParts(parts).ToHex(); }

std::string KernelCache::EntryFolder(std::string_view key, std::string_view suffix) const {
  TF_CHECK_MSG(IsHexKey(key), "kernel cache keys come from KernelCache::Key");
  TF_CHECK_MSG(IsSuffix(suffix), "a kernel cache suffix looks like \".so\"");
  return fmt::format("{}/{}{}.entry", entries_, key, suffix);
}

std::optional<std::string> KernelCache::Lookup(std::string_view key, std::string_view suffix) {
  if (!enabled_ || !refusal_.ok()) return std::nullopt;
  std::string folder = EntryFolder(key, suffix);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(folder, ec))) return std::nullopt;
  // Trust before reading: an entry someone else could write is never read, let alone
  // loaded. It is not removed either: that it exists means the folder was not private.
  if (Status safe = CheckEntryIsPrivate(folder, suffix); !safe.ok()) {
    static_cast<void>(Refuse(safe));  // recorded in refusal_ or noticed
    return std::nullopt;
  }
  std::string damage = FindDamage(folder, suffix);
  if (!damage.empty()) {
    // Published entries are complete, so a damaged one stays damaged: remove it. (If a
    // concurrent Discard removed it while we read, this is a harmless second removal.)
    Discard(key, suffix, damage);
    return std::nullopt;
  }
  return folder + "/" + ContentName(suffix);
}

void KernelCache::Discard(std::string_view key, std::string_view suffix, std::string_view reason) {
  std::string folder = EntryFolder(key, suffix);
  std::fprintf(stderr, "tilefuse: warning: discarding corrupt kernel cache entry %s (%.*s); it will be rebuilt\n",
               folder.c_str(), static_cast<int>(reason.size()), reason.data());
  ++discarded_entries_;
  // Rename it out of the way first (onto an empty private folder, which rename replaces),
  // so no reader sees a half-deleted entry, then delete at leisure.
  std::string trash = MakeUniqueFolder(entries_, ".trash-");
  if (!trash.empty() && std::rename(folder.c_str(), trash.c_str()) == 0) {
    RemoveTree(trash);
    return;
  }
  if (!trash.empty()) RemoveTree(trash);
  RemoveTree(folder);  // no trash folder (or rename failed): remove in place
}

Status KernelCache::PublishOnce(const std::string& entry_folder, std::string_view suffix, std::string_view bytes,
                                bool& lost_race) const {
  lost_race = false;
  std::string temp = MakeUniqueFolder(entries_, ".tmp-");
  if (temp.empty())
    return InvalidArgument(fmt::format("cannot create a temporary folder in '{}': {}", entries_, std::strerror(errno)));
  std::string content(bytes);
  Status written = WriteFileAtomically(temp + "/" + ContentName(suffix), content, 0600);
  if (written.ok()) written = WriteFileAtomically(temp + "/integrity", IntegrityRecord(bytes), 0600);
  if (!written.ok()) {
    RemoveTree(temp);
    return written;
  }
  if (std::rename(temp.c_str(), entry_folder.c_str()) == 0) return Status::Ok();
  int error = errno;
  RemoveTree(temp);
  if (error == ENOTEMPTY || error == EEXIST) {
    lost_race = true;
    return Status::Ok();
  }
  return InvalidArgument(fmt::format("cannot publish kernel cache entry '{}': {}", entry_folder, std::strerror(error)));
}

StatusOr<std::string> KernelCache::Insert(std::string_view key, std::string_view suffix, std::string_view bytes) {
  std::string folder = EntryFolder(key, suffix);
  for (int attempt = 0; attempt < kPublishAttempts; ++attempt) {
    if (!refusal_.ok()) return refusal_;
    if (!enabled_) return std::string();  // bypassed: the caller uses its own copy
    bool lost_race = false;
    RETURN_IF_ERROR(PublishOnce(folder, suffix, bytes, lost_race));
    if (!lost_race) return folder + "/" + ContentName(suffix);
    // Another writer got there first; use its entry, unless it is damaged, in which
    // case Lookup has just removed it and the next attempt publishes ours.
    if (std::optional<std::string> existing = Lookup(key, suffix)) return *existing;
  }
  return InvalidArgument(fmt::format("kernel cache entry '{}' kept being replaced by other writers", folder));
}

}  // namespace tilefuse

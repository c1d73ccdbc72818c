// KernelCache: a content-addressed disk cache for compiled kernels (host shared objects
// now, CUDA cubins later), shared by every process of the user.
//
// Directory: the one given to Open, else $TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse.
// Layout (v1 is the entry format; a new format gets a new folder instead of misreading):
//
//   <dir>/v1/<key><suffix>.entry/content<suffix>   the bytes, a plain file (dlopen-able)
//   <dir>/v1/<key><suffix>.entry/integrity         "tilefuse-kernel-cache v1 <size> <hash>\n"
//   <dir>/v1/.tmp-XXXXXX/                          an insert being written; never read
//
// Why a folder per entry: the content must stay a plain file that dlopen or the CUDA
// driver can load, and its integrity record must appear together with it. An insert
// writes both into a private temporary folder and renames the folder into place, so a
// reader sees a whole entry or none. rename() of a folder onto an existing non-empty one
// fails, so when two processes insert the same key the first wins and the second uses
// the winner's entry: both succeed. Published entries are never rewritten in place
// (a process may have one mapped); a corrupt one is renamed away, then deleted.
//
// Lookup rereads and rehashes the content on every call, so a truncated or damaged file
// is found before anyone loads it: it is discarded with a one-line warning on stderr and
// reported as absent, and the caller rebuilds it. A process killed mid-insert leaves a
// .tmp-* folder behind, never a damaged entry.
//
// Who may write it (docs/security.md): the CPU backend dlopens entries, so a planted one
// runs in the user's process. The folder and v1/ are created 0700; before any read, they
// and each entry (its folder and files) must be owned by the current user and writable by
// nobody else. Otherwise, for a folder the user chose ($TILEFUSE_CACHE_DIR, an option),
// Open, Insert and refusal() give an error naming the folder and the fix; for the default
// folder, one notice on stderr and the cache is bypassed: Lookup misses, Insert stores
// nothing. The no-$HOME default /tmp/tilefuse-cache-<uid> is predictable, so it is made
// with an exclusive mkdir and never adopted when someone else made it first.
//
// One instance is used by one thread at a time; separate instances (in one process or
// many) may share a directory concurrently.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tilefuse/status.h"

namespace tilefuse {

class KernelCache {
 public:
  // $TILEFUSE_CACHE_DIR when set and non-empty, else $HOME/.cache/tilefuse, else
  // <temp dir>/tilefuse-cache-<uid>.
  static std::string DefaultDirectory();
  // Whether `directory` is the default tilefuse chose, not one the user named: then an
  // unsafe folder is bypassed with a notice instead of failing the compile.
  static bool IsChosenByTilefuse(const std::string& directory);
  // Opens (creating it if needed) `directory`, or DefaultDirectory() when empty.
  static StatusOr<KernelCache> Open(std::string directory = "");

  // 32 hex digits: HashParts (support/content_hash.h) of the parts, in order. Callers
  // pass everything the cached bytes depend on (source, flags, compiler version, target).
  static std::string Key(std::initializer_list<std::string_view> parts);
  static std::string Key(std::span<const std::string_view> parts);

  // The path of the content of a valid entry for (key, suffix), e.g. (Key(...), ".so");
  // nullopt when there is none. A corrupt entry is discarded with a warning -> nullopt.
  std::optional<std::string> Lookup(std::string_view key, std::string_view suffix);
  // Publishes `bytes` under (key, suffix) atomically and returns the content path. When
  // another writer published the key first, returns the path of that entry instead.
  // Returns "" (stored nothing) when the cache is bypassed, and refusal() when refused.
  StatusOr<std::string> Insert(std::string_view key, std::string_view suffix, std::string_view bytes);
  // For callers that find a valid-looking entry unusable (say dlopen rejects it):
  // removes it with a warning naming `reason`, so the next Lookup misses.
  void Discard(std::string_view key, std::string_view suffix, std::string_view reason);

  const std::string& directory() const { return directory_; }
  // False when the default folder was found unsafe: nothing is read or stored.
  bool enabled() const { return enabled_; }
  // Ok, or why the folder the user chose cannot be trusted (an unsafe entry found by
  // Lookup, which can only miss): a caller that missed should fail with it.
  const Status& refusal() const { return refusal_; }
  // Entries this instance found corrupt (or was told to Discard) and removed.
  int64_t discarded_entries() const { return discarded_entries_; }

 private:
  KernelCache(std::string directory, bool user_chose);
  // Applies the policy above to `problem`: the error for a folder the user chose, else Ok
  // after bypassing the cache with a notice.
  Status Refuse(const Status& problem);
  // Why the entry folder (which exists) cannot be trusted, or Ok.
  Status CheckEntryIsPrivate(const std::string& folder, std::string_view suffix) const;
  std::string EntryFolder(std::string_view key, std::string_view suffix) const;
  Status PublishOnce(const std::string& entry_folder, std::string_view suffix, std::string_view bytes,
                     bool& lost_race) const;

  std::string directory_;  // the user-visible cache directory
  std::string entries_;    // directory_/v1
  bool user_chose_ = true;
  bool enabled_ = true;
  Status refusal_;
  int64_t discarded_entries_ = 0;
};

}  // namespace tilefuse

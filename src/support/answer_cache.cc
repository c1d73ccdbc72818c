#include "support/answer_cache.h"

#include "support/build_id.h"
#include "support/kernel_cache.h"
#include "support/private_folder.h"

namespace tilefuse {

namespace {

constexpr std::string_view kSuffix = ".answer";

std::string EntryKey(std::string_view kind, std::string_view key) {
  return KernelCache::Key({"tilefuse answer v1", kind, BuildId(), key});
}

// The cache of the folder the compile uses ($TILEFUSE_CACHE_DIR or the default), or none.
std::optional<KernelCache> OpenCache() {
  StatusOr<KernelCache> cache = KernelCache::Open();
  if (!cache.ok() || !cache->enabled()) return std::nullopt;
  return std::move(cache).value();
}

}  // namespace

std::optional<std::string> LoadAnswer(std::string_view kind, std::string_view key) {
  std::optional<KernelCache> cache = OpenCache();
  if (!cache) return std::nullopt;
  std::optional<std::string> path = cache->Lookup(EntryKey(kind, key), kSuffix);
  if (!path) return std::nullopt;
  StatusOr<std::string> text = ReadPrivateFile(*path);
  if (!text.ok()) return std::nullopt;
  return std::move(text).value();
}

void StoreAnswer(std::string_view kind, std::string_view key, std::string_view answer) {
  if (std::optional<KernelCache> cache = OpenCache()) (void)cache->Insert(EntryKey(kind, key), kSuffix, answer);
}

void DiscardAnswer(std::string_view kind, std::string_view key, std::string_view reason) {
  if (std::optional<KernelCache> cache = OpenCache()) cache->Discard(EntryKey(kind, key), kSuffix, reason);
}

}  // namespace tilefuse

// Answers tilefuse's own analyses computed, kept on disk for the next process: a small text per
// (kind, key) in the default kernel cache folder ($TILEFUSE_CACHE_DIR, else ~/.cache/tilefuse;
// the analyses run deep in lowering, where a model's cache_dir option does not reach), with the
// kernel cache's guarantees (support/kernel_cache.h: atomic inserts, integrity checked on every
// read, private to the user), keyed by the build id as well, so that a build with other code
// never reads another build's answers. Best effort: a folder that cannot be used, or an entry
// that cannot be read, is a miss (the caller computes the answer again).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tilefuse {

std::optional<std::string> LoadAnswer(std::string_view kind, std::string_view key);
void StoreAnswer(std::string_view kind, std::string_view key, std::string_view answer);
// For a caller whose parser rejects what LoadAnswer returned: removed, so the next load misses.
void DiscardAnswer(std::string_view kind, std::string_view key, std::string_view reason);

}  // namespace tilefuse

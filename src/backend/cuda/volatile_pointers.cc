#include "backend/cuda/volatile_pointers.h"

#include <utility>

#include "support/check.h"

namespace tilefuse {

void VolatilePointers::Reset(std::vector<bool> stageable) {
  stageable_ = std::move(stageable);
  last_.clear();
  staged_.assign(stageable_.size(), false);
  streak_.assign(stageable_.size(), 0);
  calls_since_unstageable_changed_ = 0;
}

bool VolatilePointers::Note(const std::vector<uint64_t>& key) {
  TF_CHECK(key.size() == stageable_.size());
  if (last_.empty()) {
    last_ = key;
    return false;
  }
  ++calls_since_unstageable_changed_;
  for (size_t i = 0; i < key.size(); ++i) {
    const bool changed = key[i] != last_[i];
    last_[i] = key[i];
    if (!stageable_[i]) {
      if (changed) calls_since_unstageable_changed_ = 0;
      continue;
    }
    // Once staged, an entry stays so: unstaging would change the key, a capture for nothing.
    streak_[i] = changed ? streak_[i] + 1 : 0;
    if (streak_[i] >= kChanges) staged_[i] = true;
  }
  return calls_since_unstageable_changed_ >= kChanges;
}

}  // namespace tilefuse

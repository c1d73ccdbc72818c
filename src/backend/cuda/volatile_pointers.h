// Which of RunOnDevice's caller pointers to stage: read and written through the model's own
// buffers (copied in before the run and out after) so that the other pointers key a captured
// graph that replays. Staging pays for a small value that is a fresh tensor every call (a
// decode step's token ids, position and logits); it costs for one whose pointer changes now
// and then (a static KV cache, new once per generation): its copies would run every step
// from then on, and an attention that updates the cache in place would find its input and
// output apart and copy the whole cache. So an entry is staged when its pointer changed on
// kChanges consecutive calls, not when it changed kChanges times in all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tilefuse {

class VolatilePointers {
 public:
  // Consecutive calls an entry's pointer must change on before it is staged.
  static constexpr int kChanges = 2;

  // `stageable[i]`: whether entry i may be staged at all (a small value with its own node, not
  // one copied after the run anyway). Forgets what was seen before.
  void Reset(std::vector<bool> stageable);
  bool empty() const { return last_.empty(); }  // no call noted since Reset (or ever)

  // Notes a call's pointers (as many as Reset's entries); returns whether this call stages the
  // entries `staged()` marks: only once no unstageable entry has changed its pointer for
  // kChanges calls (where one does, as a training step's activations do, the key is new
  // anyway and the copies would be all cost).
  bool Note(const std::vector<uint64_t>& key);
  bool staged(size_t i) const { return staged_[i]; }

 private:
  std::vector<uint64_t> last_;
  std::vector<bool> stageable_, staged_;
  std::vector<int> streak_;  // consecutive calls the pointer changed on
  int calls_since_unstageable_changed_ = 0;
};

}  // namespace tilefuse

// Which caller pointers a device run stages: a value new every call is, a cache new once a
// generation is not, and nothing is while a large value's pointer keeps changing.
#include "backend/cuda/volatile_pointers.h"

#include <gtest/gtest.h>

#include <vector>

namespace tilefuse {
namespace {

TEST(VolatilePointersTest, AValueNewEveryCallIsStagedAndACacheNewOnceAGenerationIsNot) {
  // Entries: a token (new every call), a cache (new each generation of 5 calls), a weight.
  VolatilePointers v;
  v.Reset({true, true, true});
  std::vector<bool> stages;
  uint64_t token = 0x1000;
  for (int generation = 0; generation < 4; ++generation) {
    const uint64_t cache = 0x100000 * (generation + 1);
    for (int step = 0; step < 5; ++step) stages.push_back(v.Note({token += 0x100, cache, 0x9000}));
  }
  EXPECT_TRUE(v.staged(0));
  EXPECT_FALSE(v.staged(1)) << "the cache changed on no two calls in a row";
  EXPECT_FALSE(v.staged(2));
  // The first call is only noted; every later one stages (no unstageable entry changed).
  EXPECT_FALSE(stages[0]);
  for (size_t i = VolatilePointers::kChanges; i < stages.size(); ++i) EXPECT_TRUE(stages[i]) << "call " << i;
}

TEST(VolatilePointersTest, TwoChangesApartDoNotStage) {
  // Changed twice in all (the old rule staged it) but never on consecutive calls.
  VolatilePointers v;
  v.Reset({true});
  for (uint64_t p : {1, 1, 2, 2, 3, 3, 4}) v.Note({p});
  EXPECT_FALSE(v.staged(0));
  v.Note({5});
  EXPECT_TRUE(v.staged(0));
  v.Note({5});
  EXPECT_TRUE(v.staged(0)) << "once staged, staged: unstaging would change the key";
}

TEST(VolatilePointersTest, NothingIsStagedWhileAnUnstageableEntryKeepsChanging) {
  // A training step: the large activations (unstageable) are new every call, so the key is
  // new anyway and copying the small ones would buy nothing.
  VolatilePointers v;
  v.Reset({true, false});
  std::vector<bool> stages;
  for (uint64_t i = 1; i <= 6; ++i) stages.push_back(v.Note({i, 100 * i}));
  EXPECT_TRUE(v.staged(0));
  for (bool s : stages) EXPECT_FALSE(s);
  // Once it settles, staging starts after kChanges calls.
  EXPECT_FALSE(v.Note({7, 600}));
  EXPECT_TRUE(v.Note({8, 600}));
}

}  // namespace
}  // namespace tilefuse

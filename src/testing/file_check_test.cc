#include "testing/file_check.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

const char* kText =
    "kernel gemm\n"
    "  load a\n"
    "  load b\n"
    "  mma\n"
    "  store c\n";

TEST(FileCheckTest, OrderedChecksMatch) {
  EXPECT_TRUE(MatchesChecks(kText, "CHECK: kernel gemm\nCHECK: load a\nCHECK-NEXT: load b\nCHECK-NEXT: mma\nCHECK: store"));
  EXPECT_TRUE(MatchesChecks(kText, "CHECK: kernel\nCHECK-SAME: gemm"));
}

TEST(FileCheckTest, EachDirectiveCanFail) {
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: store c\nCHECK: load a"));           // order matters
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: load a\nCHECK-NEXT: mma"));          // not the next line
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: gemm\nCHECK-SAME: kernel"));         // not after the match
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: kernel\nCHECK-NOT: mma\nCHECK: store"));  // mma lies between
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: mma\nCHECK-NOT: store"));            // after the last check
  EXPECT_FALSE(MatchesChecks(kText, "CHECK: missing"));
  EXPECT_FALSE(MatchesChecks(kText, "CHECK-NEXT: kernel"));                      // no previous match
}

TEST(FileCheckTest, NotHoldsOnlyBetweenItsNeighbours) {
  EXPECT_TRUE(MatchesChecks(kText, "CHECK: load a\nCHECK-NOT: store\nCHECK: mma\nCHECK: store c"));
}

}  // namespace
}  // namespace tilefuse

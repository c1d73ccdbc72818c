#include "support/env_switch.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tilefuse {
namespace {

// A measurement's setting read from the environment: a positive integer, else 0 (unset, empty,
// not a number, trailing text, zero or negative), so a typo leaves the rule in place.
TEST(EnvSwitchTest, PositiveSettingsParseWholePositiveNumbersOnly) {
  constexpr const char* kName = "TILEFUSE_TEST_POSITIVE_SETTING";
  unsetenv(kName);
  EXPECT_EQ(PositiveSetting(kName), 0);
  for (const auto& [value, expected] : {std::pair{"5", 5}, std::pair{"12", 12}, std::pair{"", 0}, std::pair{"0", 0},
                                        std::pair{"-3", 0}, std::pair{"5x", 0}, std::pair{"five", 0}, std::pair{"99999", 0}}) {
    setenv(kName, value, 1);
    EXPECT_EQ(PositiveSetting(kName), expected) << "'" << value << "'";
  }
  unsetenv(kName);
}

TEST(EnvSwitchTest, SwitchesReadOnlyZeroAndOne) {
  constexpr const char* kName = "TILEFUSE_TEST_SWITCH";
  setenv(kName, "0", 1);
  EXPECT_TRUE(SwitchedOff(kName));
  EXPECT_FALSE(SwitchedOn(kName));
  setenv(kName, "1", 1);
  EXPECT_TRUE(SwitchedOn(kName));
  EXPECT_FALSE(SwitchedOff(kName));
  setenv(kName, "yes", 1);
  EXPECT_FALSE(SwitchedOn(kName));
  EXPECT_FALSE(SwitchedOff(kName));
  unsetenv(kName);
}

}  // namespace
}  // namespace tilefuse

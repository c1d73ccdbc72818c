// Which weight is kept in L2 between calls, and the window its launches name (no GPU needed:
// the window's effect is measured by bench/experiments/decode_folds.sh's probes).
#include "backend/cuda/l2_residency.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

constexpr int64_t kMB = 1 << 20;

TEST(L2ResidencyTest, TheLargestStreamedWeightGetsTheWindow) {
  const std::vector<L2Candidate> candidates = {{"small", 3, 20 * kMB}, {"head", 7, 77 * kMB}, {"other", 9, 40 * kMB}};
  const auto r = ChooseL2Residency(candidates, 30 * kMB, 128 * kMB, 0.8);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->kernel, "head");
  EXPECT_EQ(r->node, 7);
  EXPECT_EQ(r->window_bytes, 77 * kMB);
  EXPECT_EQ(r->set_aside_bytes, 30 * kMB);
  EXPECT_NEAR(r->hit_ratio, 0.8 * 30.0 / 77.0, 1e-6);  // the persisting lines fill 0.8 of the set-aside
}

TEST(L2ResidencyTest, TheWindowIsCappedAndASmallWeightPersistsWhole) {
  const auto capped = ChooseL2Residency({{"head", 1, 500 * kMB}}, 30 * kMB, 128 * kMB, 1.0);
  ASSERT_TRUE(capped.has_value());
  EXPECT_EQ(capped->window_bytes, 128 * kMB);
  EXPECT_NEAR(capped->hit_ratio, 30.0 / 128.0, 1e-6);
  // A weight smaller than the set-aside: every line persists, and only its bytes are set aside.
  const auto small = ChooseL2Residency({{"head", 1, 10 * kMB}}, 30 * kMB, 128 * kMB, 0.8);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->set_aside_bytes, 10 * kMB);
  EXPECT_FLOAT_EQ(small->hit_ratio, 1.0f);
}

TEST(L2ResidencyTest, NothingWithoutACandidateOrASetAside) {
  EXPECT_FALSE(ChooseL2Residency({}, 30 * kMB, 128 * kMB).has_value());
  EXPECT_FALSE(ChooseL2Residency({{"head", 1, 77 * kMB}}, 0, 128 * kMB).has_value());  // a GPU without persisting L2
  EXPECT_FALSE(ChooseL2Residency({{"head", 1, 77 * kMB}}, 30 * kMB, 0).has_value());
  EXPECT_FALSE(ChooseL2Residency({{"head", 1, 77 * kMB}}, 30 * kMB, 128 * kMB, 0.0).has_value());
}

TEST(L2ResidencyTest, TheAttributeNamesTheWindowOverTheValue) {
  L2Residency r;
  r.window_bytes = 77 * kMB;
  r.hit_ratio = 0.3f;
  const CUlaunchAttribute a = AccessPolicyAttribute(r, 0x7f0000000000ull);
  EXPECT_EQ(a.id, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.value.accessPolicyWindow.base_ptr), 0x7f0000000000ull);
  EXPECT_EQ(a.value.accessPolicyWindow.num_bytes, static_cast<size_t>(77 * kMB));
  EXPECT_FLOAT_EQ(a.value.accessPolicyWindow.hitRatio, 0.3f);
  EXPECT_EQ(a.value.accessPolicyWindow.hitProp, CU_ACCESS_PROPERTY_PERSISTING);
  EXPECT_EQ(a.value.accessPolicyWindow.missProp, CU_ACCESS_PROPERTY_STREAMING);
}

}  // namespace
}  // namespace tilefuse

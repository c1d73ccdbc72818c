#include "tune/measured_fallback.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

FusionGroup Group(int id, GroupKind kind, std::vector<int> nodes) {
  FusionGroup g;
  g.id = id;
  g.kind = kind;
  g.nodes = std::move(nodes);
  return g;
}

// A replan split group 0 and renumbered the row reduction: its config follows it to its
// new id; the split group's config is dropped, as is one whose group vanished.
TEST(CarryConfigsTest, ConfigsFollowUnchangedGroupsToTheirNewIds) {
  FusionPlan before, after;
  before.groups = {Group(0, GroupKind::kPointwise, {1, 2, 3}), Group(1, GroupKind::kRowReduction, {4, 5})};
  after.groups = {Group(0, GroupKind::kPointwise, {1}), Group(1, GroupKind::kPointwise, {2}),
                  Group(2, GroupKind::kPointwise, {3}), Group(3, GroupKind::kRowReduction, {5, 4})};
  std::map<std::string, int> configs = {{"tf_group0_pointwise", 7}, {"tf_group1_row_reduction", 9},
                                        {"tf_group1_row_reduction_prologue0", 11}, {"tf_group12_pointwise", 13}};
  std::map<std::string, int> carried = CarryConfigs(before, after, configs);
  std::map<std::string, int> expected = {{"tf_group3_row_reduction", 9}, {"tf_group3_row_reduction_prologue0", 11}};
  EXPECT_EQ(carried, expected);
}

TEST(CarryConfigsTest, AnUnchangedPlanKeepsEveryConfig) {
  FusionPlan plan;
  plan.groups = {Group(0, GroupKind::kPointwise, {0, 1}), Group(1, GroupKind::kGemm, {2, 3})};
  std::map<std::string, int> configs = {{"tf_group0_pointwise", 1}, {"tf_group1_gemm", 2}};
  EXPECT_EQ(CarryConfigs(plan, plan, configs), configs);
}

}  // namespace
}  // namespace tilefuse

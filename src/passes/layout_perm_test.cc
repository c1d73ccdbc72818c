#include "passes/layout_perm.h"

#include <gtest/gtest.h>

namespace tilefuse::layout {
namespace {

TEST(LayoutPermTest, ComposeAndInverse) {
  const Perm to_last = {0, 2, 3, 1}, to_first = {0, 3, 1, 2};
  EXPECT_TRUE(IsIdentity(Compose(to_first, to_last)));
  EXPECT_EQ(Inverse(to_last), to_first);
  EXPECT_EQ(Permuted({2, 5, 6, 3}, to_first), (Shape{2, 3, 5, 6}));
}

TEST(LayoutPermTest, UnitDimMoves) {
  EXPECT_TRUE(MovesOnlyUnitDims({4, 1, 1, 8}, {0, 3, 1, 2}));
  EXPECT_FALSE(MovesOnlyUnitDims({4, 2, 1, 8}, {0, 3, 1, 2}));
}

TEST(LayoutPermTest, ReductionDropsItsAxes) {
  // x = NCHW view of v = NHWC; mean over H, W leaves [N, C], in v's order too.
  EXPECT_EQ(AfterReduction({0, 3, 1, 2}, {2, 3}), (Perm{0, 1}));
  // Over C: [N, H, W] from v's [N, H, W].
  EXPECT_EQ(AfterReduction({0, 3, 1, 2}, {1}), (Perm{0, 1, 2}));
  EXPECT_EQ(AfterReduction({2, 0, 1}, {1}), (Perm{1, 0}));
}

TEST(LayoutPermTest, ReshapeMergingDimsContiguousInTheLayout) {
  // v [N, H, W, C] seen as [N, C, H, W], flattened to [N, C, H·W]: v as [N, H·W, C].
  auto r = ReshapeInLayout({2, 3, 4, 5}, {0, 3, 1, 2}, {2, 5, 12});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stored, (Shape{2, 12, 5}));
  EXPECT_EQ(r->perm, (Perm{0, 2, 1}));
  // Unit dims: [N, C, 1, 1] (v [N, 1, 1, C]) to [N, C].
  r = ReshapeInLayout({2, 1, 1, 5}, {0, 3, 1, 2}, {2, 5});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stored, (Shape{2, 5}));
  EXPECT_TRUE(IsIdentity(r->perm));
  // Splitting C: [N, C, H, W] to [N, 5, 2, H, W] with v [N, H, W, C]: v as [N, H, W, 5, 2].
  r = ReshapeInLayout({2, 3, 4, 10}, {0, 3, 1, 2}, {2, 5, 2, 3, 4});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stored, (Shape{2, 3, 4, 5, 2}));
  EXPECT_EQ(r->perm, (Perm{0, 3, 4, 1, 2}));
}

TEST(LayoutPermTest, ReshapeMergingDimsApartInTheLayoutIsRefused) {
  // [N, C, H, W] flattened to [N, C·H·W] mixes C (last in v) with H, W.
  EXPECT_FALSE(ReshapeInLayout({2, 3, 4, 5}, {0, 3, 1, 2}, {2, 60}).has_value());
  EXPECT_FALSE(ReshapeInLayout({0, 3, 4, 5}, {0, 3, 1, 2}, {0, 5, 12}).has_value());  // empty
}

}  // namespace
}  // namespace tilefuse::layout

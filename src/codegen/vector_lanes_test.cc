// The lane analysis: which indices of a flat pointwise kernel are uniform across a vector of
// consecutive elements, which are one aligned contiguous access, and which are neither.
#include "codegen/vector_lanes.h"

#include <gtest/gtest.h>

namespace tilefuse {
namespace {

constexpr int64_t kElements = 32 * 56 * 56 * 96;  // an NHWC activation [32, 56, 56, 96]

const std::function<bool(int)> kNoValues = [](int) { return false; };

Index I0() { return IndexVar(0, kElements); }

// Tap (dh, dw) of a depthwise window over NHWC [N, H, W, C], read at the output's own
// (n, h, w, c): ((n·H + clamp(h + dh))·W + clamp(w + dw))·C + c.
Index NhwcTap(int64_t h, int64_t w, int64_t c, int64_t dh, int64_t dw) {
  std::vector<Index> at = Unravel(I0(), {kElements / (h * w * c), h, w, c});
  Index row = IndexClamp(IndexAdd(at[1], IndexConst(dh)), 0, h - 1);
  Index col = IndexClamp(IndexAdd(at[2], IndexConst(dw)), 0, w - 1);
  return Ravel({at[0], row, col, at[3]}, {kElements / (h * w * c), h, w, c});
}

TEST(VectorLanesTest, DepthwiseTapOverNhwcIsContiguousWhenTheVectorDividesTheChannels) {
  EXPECT_EQ(ClassifyLanes(NhwcTap(56, 56, 96, -3, 2), 16, kNoValues), LaneAccess::kContiguous);
  EXPECT_EQ(ClassifyLanes(NhwcTap(56, 56, 96, 3, -3), 32, kNoValues), LaneAccess::kContiguous);
  // 64 does not divide 96: a vector would cross into the next pixel.
  EXPECT_EQ(ClassifyLanes(NhwcTap(56, 56, 96, 1, 1), 64, kNoValues), LaneAccess::kOther);
}

TEST(VectorLanesTest, WindowRowAndColumnAndPerChannelWeightsClassify) {
  std::vector<Index> at = Unravel(I0(), {32, 56, 56, 96});
  EXPECT_EQ(ClassifyLanes(IndexAdd(at[1], IndexConst(-3)), 16, kNoValues), LaneAccess::kUniform);
  EXPECT_EQ(ClassifyLanes(IndexClamp(IndexAdd(at[2], IndexConst(2)), 0, 55), 16, kNoValues), LaneAccess::kUniform);
  EXPECT_EQ(ClassifyLanes(at[3], 16, kNoValues), LaneAccess::kContiguous);  // a weight per channel
  EXPECT_EQ(ClassifyLanes(at[3], 8, kNoValues), LaneAccess::kContiguous);
  // A channel count the vector does not divide (MobileNet's 24 channels, 16 lanes).
  EXPECT_EQ(ClassifyLanes(IndexMod(I0(), 24), 16, kNoValues), LaneAccess::kOther);
  EXPECT_EQ(ClassifyLanes(IndexMod(I0(), 24), 8, kNoValues), LaneAccess::kContiguous);
}

TEST(VectorLanesTest, MisalignedStridedClampedAndNchwTapsAreNotContiguous) {
  EXPECT_EQ(ClassifyLanes(IndexAdd(I0(), IndexConst(3)), 8, kNoValues), LaneAccess::kOther);    // misaligned
  EXPECT_EQ(ClassifyLanes(IndexAdd(I0(), IndexConst(16)), 8, kNoValues), LaneAccess::kContiguous);
  EXPECT_EQ(ClassifyLanes(IndexMul(I0(), 2), 8, kNoValues), LaneAccess::kOther);                  // strided
  EXPECT_EQ(ClassifyLanes(IndexClamp(IndexAdd(IndexMod(I0(), 96), IndexConst(1)), 0, 95), 8, kNoValues), LaneAccess::kOther);
  // An NCHW tap: its column is the fastest coordinate and is clamped.
  std::vector<Index> at = Unravel(I0(), {kElements / (56 * 56), 56, 56});
  Index tap = Ravel({at[0], at[1], IndexClamp(IndexAdd(at[2], IndexConst(-3)), 0, 55)}, {kElements / (56 * 56), 56, 56});
  EXPECT_EQ(ClassifyLanes(tap, 8, kNoValues), LaneAccess::kOther);
  EXPECT_EQ(ClassifyLanes(IndexConst(7), 8, kNoValues), LaneAccess::kUniform);
}

TEST(VectorLanesTest, GatheredValuesMustBeUniform) {
  Index gather = IndexAdd(IndexMul(IndexValue(5, 0, 99), 96), IndexMod(I0(), 96));
  EXPECT_EQ(ClassifyLanes(gather, 16, [](int id) { return id == 5; }), LaneAccess::kContiguous);
  EXPECT_EQ(ClassifyLanes(gather, 16, kNoValues), LaneAccess::kOther);
}

}  // namespace
}  // namespace tilefuse

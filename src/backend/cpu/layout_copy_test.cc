#include "backend/cpu/layout_copy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tilefuse {
namespace {

std::vector<float> Iota(size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(i) * 0.5f + 1.f;
  return v;
}

struct Dims { int64_t n, c, s; };

class LayoutCopyTest : public testing::TestWithParam<Dims> {};

TEST_P(LayoutCopyTest, ToChannelsLastAndBack) {
  const auto [n, c, s] = GetParam();
  const std::vector<float> nchw = Iota(n * c * s);
  std::vector<float> nhwc(nchw.size(), NAN), back(nchw.size(), NAN);
  NchwToChannelsLast(nchw.data(), nhwc.data(), n, c, s);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < s; ++p)
        ASSERT_EQ(nhwc[(b * s + p) * c + ch], nchw[(b * c + ch) * s + p]) << "n " << b << " c " << ch << " p " << p;
  ChannelsLastToNchw(nhwc.data(), back.data(), n, c, s);
  for (size_t i = 0; i < back.size(); ++i) ASSERT_EQ(back[i], nchw[i]) << i;
}

// Tile edges on both sides (64 is the tile), one channel, one pixel.
INSTANTIATE_TEST_SUITE_P(Shapes, LayoutCopyTest,
                         testing::Values(Dims{1, 1, 1}, Dims{2, 5, 7}, Dims{3, 64, 64}, Dims{2, 70, 130}, Dims{1, 1, 200}, Dims{2, 129, 1}));

TEST(CopyInParallelTest, CopiesEveryElement) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{65536}, size_t{65536 * 3 + 17}}) {
    const std::vector<float> from = Iota(count);
    std::vector<float> to(count, NAN);
    CopyInParallel(from.data(), to.data(), count);
    EXPECT_EQ(to, from) << count;
  }
}

}  // namespace
}  // namespace tilefuse

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxNonZeroTest, KnownInputBecomesAConstantOfCoordinates) {
  // A [2, 3, 4] constant of random non-zero values with every third element zeroed.
  std::vector<double> mask = RandomNonZero(24, 31);
  for (size_t i = 0; i < mask.size(); i += 3) mask[i] = 0;
  std::vector<double> rows[3];
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c)
        if (mask[(a * 3 + b) * 4 + c] != 0) rows[0].push_back(a), rows[1].push_back(b), rows[2].push_back(c);
  std::vector<double> expected = rows[0];
  expected.insert(expected.end(), rows[1].begin(), rows[1].end());
  expected.insert(expected.end(), rows[2].begin(), rows[2].end());
  Graph g = Import(WithOpset(13, fmt::format(R"(
    g (float[1] unused) => (int64[3, 16] y) {{
      mask = Constant <value = float[2, 3, 4] {{{}}}> ()
      y = NonZero(mask)
    }})", fmt::join(mask, ", "))));
  EXPECT_EQ(OutputNode(g).op, OpCode::kConstant);
  EXPECT_EQ(RunGraph(g, {F32({1}, {1})}), expected);
}

TEST(OnnxNonZeroTest, BooleanMaskIndexingThroughGatherND) {
  // x[mask] as the exporters write it: GatherND(x, Transpose(NonZero(mask))).
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[3] y) {
      mask = Constant <value = bool[2, 3] {0, 1, 0, 1, 0, 1}> ()
      nz = NonZero(mask)
      idx = Transpose(nz)
      y = GatherND(x, idx)
    })"));
  std::vector<double> x = RandomNonZero(6, 32);
  ExpectNear(RunGraph(g, {F32({2, 3}, x)}), {x[1], x[3], x[5]});
}

TEST(OnnxNonZeroTest, RuntimeInputIsRefusedWithTheNodeNamed) {
  std::string error = ImportError(WithOpset(13, R"(
    g (float[2, 3] x) => (int64[2, 6] y) { y = NonZero(x) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (NonZero, opset 13)")) << error;
  EXPECT_TRUE(Contains(error, "must be known at import time")) << error;
  EXPECT_TRUE(Contains(error, "decide the output shape")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

TEST(OnnxGeneratorsTest, ConstantAttributeForms) {
  Graph g = Import(WithOpset(13, R"(
    g () => (float[2] t, float f, int64 i, float[2] fs, int64[3] is) {
      t = Constant <value = float[2] {1.5, 2.5}> ()
      f = Constant <value_float = 0.5> ()
      i = Constant <value_int = 7> ()
      fs = Constant <value_floats = [1.0, 2.0]> ()
      is = Constant <value_ints = [4, 5, 6]> ()
    })"));
  ExpectNear(RunGraph(g, {}, 0), {1.5, 2.5});
  ExpectNear(RunGraph(g, {}, 1), {0.5});
  EXPECT_EQ(OutputNode(g, 2).dtype, DType::kI64);
  ExpectNear(RunGraph(g, {}, 2), {7});
  ExpectNear(RunGraph(g, {}, 3), {1, 2});
  ExpectNear(RunGraph(g, {}, 4), {4, 5, 6});
}

TEST(OnnxGeneratorsTest, ConstantOfShapeBroadcastsItsValue) {
  Graph g = Import(WithOpset(13, R"(
    g () => (int32[2, 3] y, float[2] z) {
      s = Constant <value = int64[2] {2, 3}> ()
      y = ConstantOfShape <value = int32[1] {4}> (s)
      n = Constant <value = int64[1] {2}> ()
      z = ConstantOfShape(n)
    })"));
  EXPECT_EQ(OutputNode(g, 0).dtype, DType::kI32);
  ExpectNear(RunGraph(g, {}, 0), {4, 4, 4, 4, 4, 4});
  ExpectNear(RunGraph(g, {}, 1), {0, 0});
}

TEST(OnnxGeneratorsTest, RangeOfKnownBounds) {
  Graph g = Import(WithOpset(13, R"(
    g () => (int64[3] a, float[3] b) {
      s = Constant <value = int64 {10}> ()
      l = Constant <value = int64 {4}> ()
      d = Constant <value = int64 {-2}> ()
      a = Range(s, l, d)
      fs = Constant <value = float {0.5}> ()
      fl = Constant <value = float {2.0}> ()
      fd = Constant <value = float {0.5}> ()
      b = Range(fs, fl, fd)
    })"));
  ExpectNear(RunGraph(g, {}, 0), {10, 8, 6});
  ExpectNear(RunGraph(g, {}, 1), {0.5, 1, 1.5});
}

TEST(OnnxGeneratorsTest, TriluUpperAndLowerWithK) {
  Graph g = Import(WithOpset(14, R"(
    g (float[3, 3] x) => (float[3, 3] up, float[3, 3] low) {
      one = Constant <value = int64 {1}> ()
      up = Trilu(x, one)
      low = Trilu <upper = 0> (x)
    })"));
  std::vector<Tensor> in = {F32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})};
  ExpectNear(RunGraph(g, in, 0), {0, 2, 3, 0, 0, 6, 0, 0, 0});
  ExpectNear(RunGraph(g, in, 1), {1, 0, 0, 4, 5, 0, 7, 8, 9});
}

TEST(OnnxGeneratorsTest, DropoutInInferenceIsIdentityWithATrueMask) {
  Graph g = Import(WithOpset(13, R"(
    g (float[4] x) => (float[4] y, bool[4] mask) { y, mask = Dropout(x) })"));
  EXPECT_EQ(OutputNode(g, 0).op, OpCode::kParameter);
  ExpectNear(RunGraph(g, {F32({4}, {1, 2, 3, 4})}, 0), {1, 2, 3, 4});
  ExpectNear(RunGraph(g, {F32({4}, {1, 2, 3, 4})}, 1), {1, 1, 1, 1});
}

TEST(OnnxGeneratorsTest, DropoutInTrainingScalesTheKeptElements) {
  std::string text = WithOpset(13, R"(
    g (float[1000] x) => (float[1000] y, bool[1000] mask) {
      ratio = Constant <value = float {0.25}> ()
      train = Constant <value = bool {1}> ()
      y, mask = Dropout <seed = 42> (x, ratio, train)
    })");
  Graph g = Import(text);
  EXPECT_EQ(CountOps(g, OpCode::kRandomUniform), 1);
  std::vector<double> ones(1000, 1.0);
  std::vector<double> y = RunGraph(g, {F32({1000}, ones)}, 0), mask = RunGraph(g, {F32({1000}, ones)}, 1);
  ASSERT_EQ(y.size(), 1000u);
  int kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_NEAR(y[i], mask[i] ? 1 / 0.75 : 0.0, 1e-6);
    kept += mask[i] != 0;
  }
  EXPECT_GT(kept, 690);  // 750 expected; binomial sd is about 14
  EXPECT_LT(kept, 810);
  // Same seed, same mask.
  EXPECT_EQ(RunGraph(Import(text), {F32({1000}, ones)}, 1), mask);
}

TEST(OnnxGeneratorsTest, DropoutWithoutSeedUsesTheNodePosition) {
  Graph g = Import(WithOpset(13, R"(
    g (float[64] x) => (bool[64] m1, bool[64] m2) {
      ratio = Constant <value = float {0.5}> ()
      train = Constant <value = bool {1}> ()
      y1, m1 = Dropout(x, ratio, train)
      y2, m2 = Dropout(x, ratio, train)
    })"));
  std::vector<uint64_t> seeds;
  for (const Node& n : g.nodes())
    if (n.op == OpCode::kRandomUniform) seeds.push_back(n.attrs.seed);
  ASSERT_EQ(seeds.size(), 2u);
  EXPECT_NE(seeds[0], seeds[1]);
  std::vector<double> m1 = RunGraph(g, {F32({64}, std::vector<double>(64, 1))}, 0);
  std::vector<double> m2 = RunGraph(g, {F32({64}, std::vector<double>(64, 1))}, 1);
  EXPECT_NE(m1, m2);  // two nodes, two different seeds
}

TEST(OnnxGeneratorsTest, EyeLikeWithOffsetAndDType) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3] x) => (float[2, 3] a, int32[2, 3] b) {
      a = EyeLike(x)
      b = EyeLike <k = 1, dtype = 6> (x)
    })"));
  std::vector<Tensor> in = {F32({2, 3}, {9, 9, 9, 9, 9, 9})};
  ExpectNear(RunGraph(g, in, 0), {1, 0, 0, 0, 1, 0});
  EXPECT_EQ(OutputNode(g, 1).dtype, DType::kI32);
  ExpectNear(RunGraph(g, in, 1), {0, 1, 0, 0, 0, 1});
}

}  // namespace
}  // namespace tilefuse::onnx_testing

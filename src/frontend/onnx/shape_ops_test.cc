#include <gtest/gtest.h>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

std::vector<double> Iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(OnnxShapeOpsTest, ReshapeCopiesZerosAndInfersMinusOne) {
  Graph g = Import(WithOpset(14, R"(
    g (float[2, 3, 4] x) => (float[2, 12] a, float[0, 3] b) {
      s = Constant <value = int64[2] {0, -1}> ()
      a = Reshape(x, s)
      e = Constant <value = float[0] {}> ()
      z = Constant <value = int64[2] {0, 3}> ()
      b = Reshape <allowzero = 1> (e, z)
    })"));
  EXPECT_EQ(OutputNode(g, 0).shape, (Shape{2, 12}));
  EXPECT_EQ(OutputNode(g, 1).shape, (Shape{0, 3}));
}

TEST(OnnxShapeOpsTest, ReshapeOfAWrongSizeNamesTheNode) {
  std::string error = ImportError(WithOpset(14, R"(
    g (float[2, 3] x) => (float[4] y) {
      s = Constant <value = int64[1] {4}> ()
      y = Reshape(x, s)
    })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Reshape, opset 14)")) << error;
}

TEST(OnnxShapeOpsTest, ReshapeNeedsAShapeKnownAtImport) {
  std::string error = ImportError(WithOpset(14, R"(
    g (float[2, 3] x, int64[2] s) => (float[3, 2] y) { y = Reshape(x, s) })"));
  EXPECT_TRUE(Contains(error, "node 'y' (Reshape, opset 14)")) << error;
  EXPECT_TRUE(Contains(error, "known at import time")) << error;
}

// PyTorch computes target shapes at run time: Shape → Gather → Unsqueeze → Concat.
TEST(OnnxShapeOpsTest, DynamicShapeChainsAreEvaluatedAtImport) {
  Graph g = Import(WithOpset(17, R"(
    g (float[2, 3, 4] x) => (float[2, 12] y) {
      shape = Shape(x)
      zero = Constant <value = int64 {0}> ()
      batch = Gather(shape, zero)
      batch1 = Unsqueeze(batch, zero)
      minus1 = Constant <value = int64[1] {-1}> ()
      target = Concat <axis = 0> (batch1, minus1)
      y = Reshape(x, target)
    })"));
  EXPECT_EQ(OutputNode(g).shape, (Shape{2, 12}));
  ExpectNear(RunGraph(g, {F32({2, 3, 4}, Iota(24))}), Iota(24));
}

TEST(OnnxShapeOpsTest, ShapeWithStartAndEnd) {
  Graph g = Import(WithOpset(15, R"(
    g (float[2, 3, 4, 5] x) => (int64[2] mid, int64[1] last, int64 n) {
      mid = Shape <start = 1, end = -1> (x)
      last = Shape <start = -1> (x)
      n = Size(x)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 3, 4, 5}, Iota(120))}, 0), {3, 4});
  ExpectNear(RunGraph(g, {F32({2, 3, 4, 5}, Iota(120))}, 1), {5});
  ExpectNear(RunGraph(g, {F32({2, 3, 4, 5}, Iota(120))}, 2), {120});
}

TEST(OnnxShapeOpsTest, FlattenAndTranspose) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 3, 4] x) => (float[6, 4] f, float[2, 12] f1, float[4, 3, 2] t, float[3, 2, 4] p) {
      f = Flatten <axis = -1> (x)
      f1 = Flatten(x)
      t = Transpose(x)
      p = Transpose <perm = [1, 0, 2]> (x)
    })"));
  EXPECT_EQ(OutputNode(g, 0).shape, (Shape{6, 4}));
  EXPECT_EQ(OutputNode(g, 1).shape, (Shape{2, 12}));
  EXPECT_EQ(OutputNode(g, 2).attrs.perm, (std::vector<int64_t>{2, 1, 0}));
  std::vector<double> t = RunGraph(g, {F32({2, 3, 4}, Iota(24))}, 2);
  ASSERT_EQ(t.size(), 24u);
  EXPECT_EQ(t[1], 12);  // t[0,0,1] = x[1,0,0]
  EXPECT_EQ(t[2], 4);   // t[0,1,0] = x[0,1,0]
}

TEST(OnnxShapeOpsTest, SqueezeAndUnsqueezeAxesAsAttributeOrInput) {
  const char* graph = R"(
    g (float[1, 3, 1] x) => (float[3] a, float[3, 1] b, float[1, 3, 1, 1] c) {
      a = Squeeze(x)
      %s
    })";
  auto with_body = [&](const std::string& body) {
    std::string text = graph;
    return text.replace(text.find("%s"), 2, body);
  };
  Graph old_style = Import(WithOpset(11, with_body("b = Squeeze <axes = [0]> (x)\n c = Unsqueeze <axes = [-1]> (x)")));
  Graph new_style = Import(WithOpset(13, with_body("zero = Constant <value = int64[1] {0}> ()\n"
                                                   "b = Squeeze(x, zero)\n"
                                                   "last = Constant <value = int64[1] {-1}> ()\n"
                                                   "c = Unsqueeze(x, last)")));
  for (const Graph* g : {&old_style, &new_style}) {
    EXPECT_EQ(OutputNode(*g, 0).shape, (Shape{3}));
    EXPECT_EQ(OutputNode(*g, 1).shape, (Shape{3, 1}));
    EXPECT_EQ(OutputNode(*g, 2).shape, (Shape{1, 3, 1, 1}));
  }
}

TEST(OnnxShapeOpsTest, ConcatAndSplitForms) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 6] x) => (float[2, 2] a, float[2, 4] b, float[2, 3] c, float[2, 3] d, float[2, 12] cat) {
      sizes = Constant <value = int64[2] {2, 4}> ()
      a, b = Split <axis = 1> (x, sizes)
      c, d = Split <axis = -1> (x)
      cat = Concat <axis = 1> (x, x)
    })"));
  std::vector<Tensor> in = {F32({2, 6}, Iota(12))};
  ExpectNear(RunGraph(g, in, 0), {0, 1, 6, 7});
  ExpectNear(RunGraph(g, in, 1), {2, 3, 4, 5, 8, 9, 10, 11});
  ExpectNear(RunGraph(g, in, 3), {3, 4, 5, 9, 10, 11});
  EXPECT_EQ(OutputNode(g, 4).shape, (Shape{2, 12}));
}

TEST(OnnxShapeOpsTest, SplitAttributeBeforeOpset13AndNumOutputsFrom18) {
  Graph old_style = Import(WithOpset(11, R"(
    g (float[5] x) => (float[1] a, float[4] b) { a, b = Split <split = [1, 4]> (x) })"));
  EXPECT_EQ(OutputNode(old_style, 1).shape, (Shape{4}));
  Graph uneven = Import(WithOpset(18, R"(
    g (float[5] x) => (float[2] a, float[2] b, float[1] c) { a, b, c = Split <num_outputs = 3> (x) })"));
  ExpectNear(RunGraph(uneven, {F32({5}, Iota(5))}, 2), {4});
}

TEST(OnnxShapeOpsTest, SliceAttributesBeforeOpset10) {
  Graph g = Import(WithOpset(9, R"(
    g (float[3, 4] x) => (float[2, 3] y) { y = Slice <starts = [1, 1], ends = [3, 1000], axes = [0, 1]> (x) })"));
  EXPECT_EQ(OutputNode(g).shape, (Shape{2, 3}));
}

TEST(OnnxShapeOpsTest, SliceInputsWithNegativeStepsAndInt64Max) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3, 4] x) => (float[3, 2] rev, float[3, 3] tail) {
      starts = Constant <value = int64[1] {-1}> ()
      ends = Constant <value = int64[1] {-9223372036854775807}> ()
      axes = Constant <value = int64[1] {1}> ()
      steps = Constant <value = int64[1] {-2}> ()
      rev = Slice(x, starts, ends, axes, steps)
      one = Constant <value = int64[1] {1}> ()
      big = Constant <value = int64[1] {9223372036854775807}> ()
      tail = Slice(x, one, big, axes)
    })"));
  std::vector<Tensor> in = {F32({3, 4}, Iota(12))};
  ExpectNear(RunGraph(g, in, 0), {3, 1, 7, 5, 11, 9});
  ExpectNear(RunGraph(g, in, 1), {1, 2, 3, 5, 6, 7, 9, 10, 11});
}

TEST(OnnxShapeOpsTest, ExpandBroadcastsBothWays) {
  Graph g = Import(WithOpset(13, R"(
    g (float[3, 1] x) => (float[2, 3, 4] y) {
      shape = Constant <value = int64[3] {2, 1, 4}> ()
      y = Expand(x, shape)
    })"));
  EXPECT_EQ(OutputNode(g).shape, (Shape{2, 3, 4}));
  std::vector<double> y = RunGraph(g, {F32({3, 1}, {5, 6, 7})});
  ASSERT_EQ(y.size(), 24u);
  EXPECT_EQ(y[4], 6);   // [0,1,0]
  EXPECT_EQ(y[23], 7);  // [1,2,3]
}

TEST(OnnxShapeOpsTest, TileRepeatsEachDim) {
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2] x) => (float[2, 4] y) {
      r = Constant <value = int64[2] {1, 2}> ()
      y = Tile(x, r)
    })"));
  ExpectNear(RunGraph(g, {F32({2, 2}, {1, 2, 3, 4})}), {1, 2, 1, 2, 3, 4, 3, 4});
}

}  // namespace
}  // namespace tilefuse::onnx_testing

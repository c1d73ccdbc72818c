// Transpose sinking on the channels-last window forms: the transposes between consecutive
// convolutions must cancel (counted before and after), and every rewritten graph must
// compute what the graph before it computes (both on the f64 reference interpreter, random
// inputs).
#include "passes/sink_transposes.h"

#include <gtest/gtest.h>

#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fold_constants.h"
#include "passes/pass_test_util.h"
#include "passes/window_ops.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

constexpr DType kF64 = DType::kF64;

// The GPU's pipeline from the window rewrite on, with or without the sinking.
Graph ChannelsLast(const Graph& graph, bool sink) {
  StatusOr<Graph> g = RewriteWindowOps(graph, WindowOpsOptions{.channels_last = true});
  if (g.ok() && sink) g = SinkTransposes(*g);
  if (g.ok()) g = FoldConstants(*g);
  if (g.ok()) g = EliminateCommonSubexpressions(*g);
  if (g.ok()) g = EliminateDeadCode(*g);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

Graph Sunk(const Graph& graph) {
  StatusOr<Graph> g = SinkTransposes(graph);
  if (g.ok()) g = EliminateDeadCode(*g);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(g).value();
}

bool ReadsAWindow(const Graph& graph, const Node& n) {
  const Node* input = &graph.node(n.inputs[0]);
  if (input->op == OpCode::kReshape) input = &graph.node(input->inputs[0]);
  return input->op == OpCode::kWindow;
}

// Transposes that move data between layouts: all but those of a window (the im2col
// matrix's column order, a tap's channels moved last) and those read only by windows (the
// window's index arithmetic reads through them).
int MaterialisedTransposes(const Graph& graph) {
  std::vector<std::vector<int>> users = graph.ComputeUsers();
  int count = 0;
  for (const Node& n : graph.nodes()) {
    if (n.op != OpCode::kTranspose || ReadsAWindow(graph, n)) continue;
    bool only_windows = !users[n.id].empty();
    for (int user : users[n.id]) only_windows = only_windows && graph.node(user).op == OpCode::kWindow;
    for (const Graph::Output& out : graph.outputs()) only_windows = only_windows && out.node != n.id;
    count += !only_windows;
  }
  return count;
}

bool HasTransposeOfTranspose(const Graph& graph) {
  for (const Node& n : graph.nodes())
    if (n.op == OpCode::kTranspose && graph.node(n.inputs[0]).op == OpCode::kTranspose) return true;
  return false;
}

void ExpectSameOutputs(const Graph& before, const Graph& after) {
  ASSERT_EQ(before.outputs().size(), after.outputs().size());
  std::vector<Tensor> inputs;
  uint64_t seed = 5;
  for (int id : before.inputs()) inputs.push_back(Tensor::Random(before.node(id).dtype, before.node(id).shape, seed++));
  auto expected = RunReference(before, inputs);
  auto actual = RunReference(after, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t i = 0; i < expected->size(); ++i) {
    Comparison c = CompareNormwise((*actual)[i], (*expected)[i], Tolerance{1e-9, 1e-12});
    EXPECT_TRUE(c.pass) << "output " << i << ": " << c.reason;
  }
}

PoolParams Conv2d(int64_t k, int64_t stride = 1, int64_t pad = 0, int64_t group = 1) {
  return {{k, k}, {stride, stride}, {pad, pad, pad, pad}, {1, 1}, group, false};
}

// A convolution with constant weights and bias: [co, ci/group, k, k].
Value ConvLayer(GraphBuilder& b, Value x, int64_t co, const PoolParams& p, uint64_t seed) {
  const int64_t ci = b.shape(x)[1] / p.group;
  Value w = b.Constant(Tensor::Random(kF64, {co, ci, p.kernel[0], p.kernel[1]}, seed));
  Value bias = b.Constant(Tensor::Random(kF64, {co}, seed + 1));
  return b.Conv(x, w, bias, p);
}

Graph Build(GraphBuilder& b) {
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

TEST(SinkTransposesTest, ConvChainKeepsOnlyTheOutputTranspose) {
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {2, 8, 10, 10});
  Value y = b.Unary(OpCode::kRelu, ConvLayer(b, x, 16, Conv2d(3, 1, 1), 1));
  y = b.Unary(OpCode::kRelu, ConvLayer(b, y, 16, Conv2d(1), 3));
  y = b.Unary(OpCode::kSigmoid, ConvLayer(b, y, 8, Conv2d(3, 2, 1), 5));
  b.Output(ConvLayer(b, y, 4, Conv2d(1), 7), "y");
  Graph graph = Build(b);

  Graph lowered = ChannelsLast(graph, /*sink=*/false);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  // Lowered: each 1×1 conv transposes its input in, each conv its result out.
  EXPECT_EQ(MaterialisedTransposes(lowered), 6);
  // Sunk: the graph output's transpose alone; the 3×3 convolution after a 1×1 reads its
  // NHWC input through a transpose its window folds into the im2col index arithmetic.
  EXPECT_EQ(MaterialisedTransposes(sunk), 1);
  EXPECT_EQ(CountOps(sunk, OpCode::kTranspose), 1 + 1 + 2);  // + the window feed + 2 window permutations
  EXPECT_FALSE(HasTransposeOfTranspose(sunk));
  // The bias adds and activations now run on [N, H, W, C].
  for (const Node& n : sunk.nodes())
    if (n.op == OpCode::kRelu || n.op == OpCode::kSigmoid) {
      EXPECT_EQ(n.shape.back(), n.op == OpCode::kRelu ? 16 : 8);
    }
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, ResidualFromTheGraphInputIsReadThroughATranspose) {
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {2, 6, 7, 7});
  Value c = ConvLayer(b, b.Unary(OpCode::kRelu, ConvLayer(b, x, 6, Conv2d(3, 1, 1), 1)), 6, Conv2d(1), 3);
  b.Output(b.Unary(OpCode::kRelu, b.Add(c, x)), "y");
  Graph graph = Build(b);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  // One aligned input against one that needs a transpose: the add moves to NHWC, x is
  // read through a transpose, the result transposed once for the output.
  int nhwc_adds = 0;
  for (const Node& n : sunk.nodes()) nhwc_adds += n.op == OpCode::kAdd && n.shape == Shape{2, 7, 7, 6};
  EXPECT_EQ(nhwc_adds, 3);  // two biases, the residual
  EXPECT_EQ(MaterialisedTransposes(sunk), 2);  // x for the residual, the output
  EXPECT_LE(MaterialisedTransposes(sunk), MaterialisedTransposes(ChannelsLast(graph, /*sink=*/false)));
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, GlobalAveragePoolReducesTheNhwcSpatialAxes) {
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {3, 4, 6, 6});
  Value c = b.Unary(OpCode::kRelu, ConvLayer(b, x, 8, Conv2d(3, 1, 1), 1));
  Value mean = b.Reduce(OpCode::kReduceMean, c, {2, 3}, /*keepdims=*/true);
  b.Output(b.Reshape(mean, {3, 8}), "y");
  Graph graph = Build(b);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  bool found = false;
  for (const Node& n : sunk.nodes())
    if (n.op == OpCode::kReduceMean) {
      found = true;
      EXPECT_EQ(n.attrs.axes, (std::vector<int64_t>{1, 2}));
    }
  EXPECT_TRUE(found);
  // [N, 1, 1, C] to [N, C] is a reshape: no transpose is left at all.
  EXPECT_EQ(MaterialisedTransposes(sunk), 0);
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, PatchEmbeddingFlattenAndTransposeCancel) {
  // A ViT's patch embedding: conv with stride = kernel, flatten the positions, tokens first.
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {2, 3, 8, 8});
  Value c = ConvLayer(b, x, 10, Conv2d(4, 4), 1);  // [2, 10, 2, 2]
  Value tokens = b.Transpose(b.Reshape(c, {2, 10, 4}), {0, 2, 1});
  b.Output(b.Unary(OpCode::kTanh, tokens), "y");
  Graph graph = Build(b);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  EXPECT_EQ(MaterialisedTransposes(sunk), 0);
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, DepthwiseAndPoolsChainInNhwc) {
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {2, 4, 12, 12});
  Value y = b.MaxPool(ConvLayer(b, x, 8, Conv2d(1), 1), Conv2d(3, 2, 1));
  y = b.Unary(OpCode::kRelu, ConvLayer(b, y, 16, Conv2d(3, 1, 1, /*group=*/8), 3));  // depthwise, multiplier 2
  y = b.AveragePool(y, Conv2d(3, 1, 1));  // divisors per position
  y = ConvLayer(b, y, 8, Conv2d(1), 5);
  b.Output(y, "y");
  Graph graph = Build(b);
  Graph lowered = ChannelsLast(graph, /*sink=*/false);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  // x in, the output out.
  EXPECT_EQ(MaterialisedTransposes(sunk), 2) << MaterialisedTransposes(lowered);
  EXPECT_LT(MaterialisedTransposes(sunk), MaterialisedTransposes(lowered));
  EXPECT_FALSE(HasTransposeOfTranspose(sunk));
  // Every tap reads the NHWC value itself, seen as [N, 1, H, W, C], through no transpose.
  int taps = 0;
  for (const Node& n : sunk.nodes()) {
    if (n.op != OpCode::kWindow) continue;
    ++taps;
    EXPECT_EQ(sunk.node(n.inputs[0]).op, OpCode::kReshape);
    EXPECT_EQ(sunk.node(n.inputs[0]).rank(), 5);
  }
  EXPECT_EQ(taps, 9 + 9 + 9);
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, NearestResizeGathersAndSkipConcatStayNhwc) {
  // U-Net's decoder: upsample by gathering rows and columns, concat the skip connection.
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {1, 4, 6, 6});
  Value skip = b.Unary(OpCode::kRelu, ConvLayer(b, x, 4, Conv2d(3, 1, 1), 1));
  Value low = b.MaxPool(skip, Conv2d(2, 2));
  Value index = b.Constant(Tensor::FromDoubles(DType::kI64, {6}, {0, 0, 1, 1, 2, 2}));
  Value up = b.Gather(b.Gather(low, index, 2), index, 3);
  b.Output(ConvLayer(b, b.Concat({up, skip}, 1), 3, Conv2d(3, 1, 1), 3), "y");
  Graph graph = Build(b);
  Graph sunk = ChannelsLast(graph, /*sink=*/true);
  for (const Node& n : sunk.nodes()) {
    if (n.op == OpCode::kGather) {
      EXPECT_EQ(n.shape.back(), 4) << "gather %" << n.id << " is not channels-last";
    }
    if (n.op == OpCode::kConcat) {
      EXPECT_EQ(n.attrs.axis, 3);
    }
  }
  EXPECT_EQ(MaterialisedTransposes(sunk), 1);  // the output
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, StaysWhenInputsNeedingTransposesOutnumber) {
  GraphBuilder b;
  Value nhwc = b.Parameter("nhwc", kF64, {2, 3, 3, 5});
  Value other = b.Parameter("other", kF64, {2, 5, 3, 3});
  Value third = b.Parameter("third", kF64, {2, 5, 3, 3});
  Value t = b.Transpose(nhwc, {0, 3, 1, 2});
  b.Output(b.Add(t, other), "moves");  // one input in layout against one: moves
  b.Output(b.Where(b.Binary(OpCode::kGreater, other, third), t, third), "stays");  // one against two
  Graph graph = Build(b);
  Graph sunk = Sunk(graph);
  for (const Node& n : sunk.nodes()) {
    if (n.op == OpCode::kAdd) {
      EXPECT_EQ(n.shape, (Shape{2, 3, 3, 5}));
    }
    if (n.op == OpCode::kWhere) {
      EXPECT_EQ(n.shape, (Shape{2, 5, 3, 3}));
    }
  }
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, SimplifiesTransposePairsUnitDimMovesAndReshapeChains) {
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {4, 5, 6});
  Value u = b.Parameter("u", kF64, {1, 5, 1, 3});
  Value back = b.Transpose(b.Transpose(x, {1, 0, 2}), {1, 0, 2});  // the identity
  Value moved = b.Transpose(u, {2, 1, 3, 0});                      // only size-1 dims move
  Value flat = b.Reshape(b.Reshape(x, {20, 6}), {120});
  b.Output(b.Unary(OpCode::kExp, back), "back");
  b.Output(b.Unary(OpCode::kExp, moved), "moved");
  b.Output(b.Unary(OpCode::kExp, flat), "flat");
  Graph graph = Build(b);
  Graph sunk = Sunk(graph);
  EXPECT_EQ(CountOps(sunk, OpCode::kTranspose), 0);
  EXPECT_EQ(CountOps(sunk, OpCode::kReshape), 2);  // moved, flat
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, TransformerTransposesAreLeftAlone) {
  // [B, T, H, D] → [B, H, T, D] heads: not a layout this pass starts, so the scale stays put.
  GraphBuilder b;
  Value q = b.Parameter("q", kF64, {2, 8, 4, 16});
  Value heads = b.MulScalar(b.Transpose(q, {0, 2, 1, 3}), 0.25);
  b.Output(b.MatMul(heads, b.Transpose(heads, {0, 1, 3, 2})), "scores");
  Graph graph = Build(b);
  Graph sunk = Sunk(graph);
  EXPECT_EQ(CountOps(sunk, OpCode::kTranspose), 2);
  for (const Node& n : sunk.nodes())
    if (n.op == OpCode::kMul) {
      EXPECT_EQ(sunk.node(n.inputs[0]).op, OpCode::kTranspose);
    }
  ExpectSameOutputs(graph, sunk);
}

TEST(SinkTransposesTest, RotaryEmbeddingOfAProductsHeadsComputesInTheProductsLayout) {
  // q = (x · w) viewed as [B, T, H, D], heads moved before the rows, then rotated as
  // transformers' LLaMA does: q·cos + rotate_half(q)·sin, rotate_half(q) = [-q₂, q₁] along D.
  constexpr int64_t B = 2, T = 8, H = 4, D = 16;
  GraphBuilder b;
  Value x = b.Parameter("x", kF64, {B * T, 32});
  Value w = b.Constant(Tensor::Random(kF64, {32, H * D}, 3));
  Value cos = b.Constant(Tensor::Random(kF64, {B, 1, T, D}, 4));
  Value sin = b.Constant(Tensor::Random(kF64, {B, 1, T, D}, 5));
  Value q = b.Transpose(b.Reshape(b.MatMul(x, w), {B, T, H, D}), {0, 2, 1, 3});
  Value half1 = b.Slice(q, {0, 0, 0, 0}, {B, H, T, D / 2}, {}, {});
  Value half2 = b.Slice(q, {0, 0, 0, D / 2}, {B, H, T, D}, {}, {});
  Value rotated = b.Concat({b.Unary(OpCode::kNeg, half2), half1}, 3);
  Value embedded = b.Add(b.Mul(q, b.BroadcastTo(cos, {B, H, T, D})), b.Mul(rotated, b.BroadcastTo(sin, {B, H, T, D})));
  b.Output(b.MatMul(embedded, b.Transpose(embedded, {0, 1, 3, 2})), "scores");
  Graph graph = Build(b);
  Graph sunk = Sunk(graph);
  // Every pointwise op, slice and concat reads the [B, T, H, D] layout: no transpose before
  // any of them, one (and its Kᵀ) before the product that reads the embedded heads.
  for (const Node& n : sunk.nodes()) {
    if (n.info().kind != OpKind::Pointwise && n.op != OpCode::kSlice && n.op != OpCode::kConcat) continue;
    for (int input : n.inputs) EXPECT_NE(sunk.node(input).op, OpCode::kTranspose) << OpName(n.op);
    EXPECT_EQ(n.shape[1], T) << OpName(n.op);  // [B, T, H, D or D / 2]
  }
  EXPECT_EQ(CountOps(sunk, OpCode::kTranspose), 2);
  ExpectSameOutputs(graph, sunk);
}

}  // namespace
}  // namespace tilefuse

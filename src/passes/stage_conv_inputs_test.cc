// The staged NHWC inputs of channels-last convolutions: the implicit GEMM's copy, and the
// padded copy an image's few channels get, whose im2col then reads contiguous runs and tests
// no bound.
#include "passes/stage_conv_inputs.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// ResNet's stem: 7x7 stride 2 from `channels` channels with bias, ReLU.
Graph StemAsImported(int64_t channels, const std::vector<int64_t>& pads, DType dtype) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {2, channels, 20, 18});
  Value w = b.Parameter("w", dtype, {8, channels, 7, 7});
  Value bias = b.Parameter("b", dtype, {8});
  b.Output(b.Unary(OpCode::kRelu, b.Conv(x, w, bias, PoolParams{.kernel = {7, 7}, .strides = {2, 2}, .pads = pads, .dilations = {1, 1}})), "y");
  auto built = b.Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  return std::move(built).value();
}

// `g` channels-last, as the CUDA backend passes it.
Graph ChannelsLast(Graph g) {
  PassOptions options;
  options.channels_last = true;
  auto passed = RunGraphPasses(std::move(g), options);
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

Graph Stem(int64_t channels, const std::vector<int64_t>& pads, DType dtype = DType::kF32) {
  return ChannelsLast(StemAsImported(channels, pads, dtype));
}

// The windows of `g` with a 7x7 kernel (the convolution's).
std::vector<const Node*> ConvWindows(const Graph& g) {
  std::vector<const Node*> windows;
  for (const Node& n : g.nodes())
    if (n.op == OpCode::kWindow && n.attrs.kernel == std::vector<int64_t>{7, 7}) windows.push_back(&n);
  return windows;
}

TEST(StageConvInputsTest, AnImagesFewChannelsAreReadFromAPaddedNhwcCopy) {
  for (int64_t channels : {3, 4}) {  // (one channel's convolution is no product: passes/outer_products)
    SCOPED_TRACE(channels);
    Graph g = Stem(channels, {3, 2, 3, 4});
    std::vector<const Node*> windows = ConvWindows(g);
    ASSERT_EQ(windows.size(), 1u);
    EXPECT_EQ(windows[0]->attrs.pads, (std::vector<int64_t>{0, 0, 0, 0})) << "the padding is the copy's";
    const Node& view = g.node(windows[0]->inputs[0]);
    ASSERT_EQ(view.op, OpCode::kTranspose);
    EXPECT_EQ(view.attrs.perm, (std::vector<int64_t>{0, 3, 1, 2}));
    const Node& copy = g.node(view.inputs[0]);
    ASSERT_EQ(copy.op, OpCode::kTranspose);
    EXPECT_EQ(copy.shape, (Shape{2, 20 + 6, 18 + 6, channels})) << "NHWC, padded by the window's pads";
  }
}

TEST(StageConvInputsTest, ManyChannelsAreNotPaddedThere) {
  // f32 with 16 channels: an im2col copy still, but no longer an image's few channels.
  Graph g = Stem(16, {3, 3, 3, 3});
  std::vector<const Node*> windows = ConvWindows(g);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0]->attrs.pads, (std::vector<int64_t>{3, 3, 3, 3}));
}

TEST(StageConvInputsTest, APatchEmbeddingReadsItsInputWhereItLies) {
  // ViT's 16x16 stride 16 over 3 channels: windows that neither overlap nor pad, an im2col the
  // size of its input; a copy would only add one.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {2, 3, 32, 32});
  Value w = b.Parameter("w", DType::kBF16, {8, 3, 16, 16});
  b.Output(b.Conv(x, w, Value{}, PoolParams{.kernel = {16, 16}, .strides = {16, 16}, .pads = {0, 0, 0, 0}, .dilations = {1, 1}}), "y");
  auto built = b.Build();
  ASSERT_TRUE(built.ok());
  const Graph g = ChannelsLast(std::move(built).value());
  for (const Node& n : g.nodes()) {
    if (n.op == OpCode::kWindow) {
      EXPECT_EQ(g.node(n.inputs[0]).op, OpCode::kParameter) << "the window reads x itself";
    }
  }
}

TEST(StageConvInputsTest, ThePaddedCopyComputesTheSameConvolution) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Graph original = StemAsImported(3, {3, 2, 3, 4}, dtype);
    Graph staged = Stem(3, {3, 2, 3, 4}, dtype);
    ASSERT_EQ(ConvWindows(staged)[0]->attrs.pads, (std::vector<int64_t>{0, 0, 0, 0}));
    const std::vector<Tensor> inputs = {Tensor::Random(dtype, {2, 3, 20, 18}, 1), Tensor::Random(dtype, {8, 3, 7, 7}, 2),
                                        Tensor::Random(dtype, {8}, 3)};
    auto expected = RunReference(original, inputs);
    auto actual = RunReference(staged, inputs);
    ASSERT_TRUE(expected.ok() && actual.ok());
    ASSERT_EQ((*actual)[0].shape(), (*expected)[0].shape());
    // The convolution as a product rounds its sum before the bias (the reference's Conv
    // rounds once): a rounding apart at most, where a misplaced pad would be O(1) off.
    const double tolerance = dtype == DType::kF32 ? 1e-5 : 1.0 / 128;
    const std::vector<double> got = (*actual)[0].ToDoubles(), want = (*expected)[0].ToDoubles();
    int positive = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], tolerance * (1 + std::abs(want[i]))) << "element " << i;
      positive += want[i] > 0;
    }
    EXPECT_GT(positive, static_cast<int>(want.size() / 4)) << "ReLU left values to compare";
  }
}

TEST(StageConvInputsTest, ThePaddedCopyIsOneKernelOfItsOwn) {
  // The pad (a window of one element) and the NHWC transpose are one group the planner keeps
  // apart; the convolution's im2col reads it.
  Graph g = Stem(3, {3, 3, 3, 3});
  PlannerOptions options;
  auto plan = PlanFusion(g, options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(VerifyPlan(g, *plan).ok());
  int copies = 0;
  for (const FusionGroup& group : plan->groups) {
    bool pad = false, to_nhwc = false, product = false;
    for (int id : group.nodes) {
      const Node& n = g.node(id);
      pad |= n.op == OpCode::kWindow && n.attrs.kernel == std::vector<int64_t>{1, 1};
      to_nhwc |= n.op == OpCode::kTranspose && n.attrs.perm == std::vector<int64_t>{0, 2, 3, 1};
      product |= n.op == OpCode::kMatMul;
    }
    if (pad || to_nhwc) {
      ++copies;
      EXPECT_TRUE(pad && to_nhwc && !product) << "the pad and the transpose in one group, no product";
    }
  }
  EXPECT_EQ(copies, 1);
}

}  // namespace
}  // namespace tilefuse

// The seeds' workloads, written from primitives and with composite ops, must plan to
// the expected number and kind of groups; every plan must verify.
#include "fusion/planner.h"

#include <gtest/gtest.h>

#include <cmath>

#include "fusion/plan_verifier.h"
#include "passes/pipeline.h"
#include "testing/onnx_text_plan.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

constexpr int64_t kRows = 256, kCols = 1024;

FusionPlan Plan(GraphBuilder& b, PlannerOptions options = {}) {
  auto built = b.Build();
  EXPECT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(built).value(), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, options);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  Status verified = VerifyPlan(*graph, *plan);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  return *plan;
}

std::vector<GroupKind> Kinds(const FusionPlan& plan) {
  std::vector<GroupKind> kinds;
  for (const FusionGroup& g : plan.groups) kinds.push_back(g.kind);
  return kinds;
}


TEST(PlannerTest, GeluWrittenOutIsOneKernel) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
  Value cube = b.Mul(b.Mul(x, x), x);
  Value inner = b.MulScalar(b.Add(x, b.MulScalar(cube, 0.044715)), std::sqrt(2.0 / M_PI));
  Value y = b.Mul(b.MulScalar(x, 0.5), b.AddScalar(b.Unary(OpCode::kTanh, inner), 1.0));
  b.Output(y, "y");
  FusionPlan plan = Plan(b);
  EXPECT_EQ(Kinds(plan), std::vector<GroupKind>{GroupKind::kPointwise});
  EXPECT_GT(plan.unfused_kernels, 5);
  EXPECT_LT(plan.predicted_us, plan.unfused_predicted_us);
}

Value SoftmaxByHand(GraphBuilder& b, Value x) {
  Value max = b.Reduce(OpCode::kReduceMax, x, {-1}, true);
  Value e = b.Unary(OpCode::kExp, b.Sub(x, max));
  return b.Div(e, b.Reduce(OpCode::kReduceSum, e, {-1}, true));
}

TEST(PlannerTest, SoftmaxIsOneRowReduction) {
  for (bool composite : {false, true}) {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
    b.Output(composite ? b.Softmax(x, -1) : SoftmaxByHand(b, x), "y");
    EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kRowReduction}) << "composite=" << composite;
  }
}

// A few very long rows: fused with the stores along them (or a second pass over them), the
// row template runs one block a row, the GPU mostly idle; apart, the reductions split over
// blocks (codegen/cuda/cuda_row_splits.h) and the stores run as pointwise kernels. x / max|x|
// a row (a quantization's scaling) and softmax, over two rows of 2^22, go apart
// on a GPU, stay one kernel on the CPU (whose loops split rows over threads) and where rows
// fill the GPU.
TEST(PlannerTest, AFewVeryLongRowsAreReducedApartFromTheirStoresOnAGpu) {
  auto scaled_by_amax = [](GraphBuilder& b, const Shape& shape) {
    Value x = b.Parameter("x", DType::kF32, shape);
    b.Output(b.Div(x, b.Reduce(OpCode::kReduceMax, b.Unary(OpCode::kAbs, x), {1}, true)), "y");
  };
  auto softmax = [](GraphBuilder& b, const Shape& shape) { b.Output(SoftmaxByHand(b, b.Parameter("x", DType::kF32, shape)), "y"); };
  for (auto build : {+scaled_by_amax, +softmax}) {
    GraphBuilder gpu, cpu, many_rows;
    build(gpu, {2, 1 << 22});
    build(cpu, {2, 1 << 22});
    build(many_rows, {kRows, kCols});
    EXPECT_GT(Plan(gpu).groups.size(), 1u);
    PlannerOptions on_cpu;
    on_cpu.device = "cpu";
    EXPECT_EQ(Plan(cpu, on_cpu).groups.size(), 1u);
    EXPECT_EQ(Plan(many_rows).groups.size(), 1u);
  }
}

Value LayerNormByHand(GraphBuilder& b, Value x, Value scale, Value bias) {
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, {-1}, true));
  Value var = b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), {-1}, true);
  Value inv = b.Unary(OpCode::kRsqrt, b.AddScalar(var, 1e-5));
  return b.Add(b.Mul(b.Mul(centered, inv), scale), bias);
}

TEST(PlannerTest, LayerNormIsOneRowReduction) {
  for (bool composite : {false, true}) {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
    Value scale = b.Parameter("scale", DType::kF32, {kCols});
    Value bias = b.Parameter("bias", DType::kF32, {kCols});
    b.Output(composite ? b.LayerNorm(x, scale, bias, -1, 1e-5) : LayerNormByHand(b, x, scale, bias), "y");
    EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kRowReduction}) << "composite=" << composite;
  }
}

// bf16 activations with a bf16 scale and bias, as exported transformers have them: the op
// casts the vectors to f32 ([kCols] elements, read through broadcasts). The row kernel
// converts them where it loads them, so there is no kernel of their own; and a cast that is
// also an output keeps one (nothing else would store it).
TEST(PlannerTest, LayerNormConvertsItsHalfScaleAndBiasWhereItReadsThem) {
  for (bool cast_is_output : {false, true}) {
    PlannedText p = PlanOnnxText(
        std::string("g (bfloat16[256,1024] x, bfloat16[1024] s, bfloat16[1024] t) => (bfloat16[256,1024] y") +
            (cast_is_output ? ", float[1024] s32)" : ")"),
        "  s32 = Cast <to = 1> (s)\n  t32 = Cast <to = 1> (t)\n  x32 = Cast <to = 1> (x)\n"
        "  n = LayerNormalization <axis = -1, epsilon = 1e-5> (x32, s32, t32)\n  y = Cast <to = 16> (n)\n");
    EXPECT_EQ(Kinds(p.plan), cast_is_output ? std::vector<GroupKind>({GroupKind::kPointwise, GroupKind::kRowReduction})
                                            : std::vector<GroupKind>({GroupKind::kRowReduction}))
        << "cast_is_output=" << cast_is_output;
    EXPECT_TRUE(VerifyPlan(p.graph, p.plan).ok());
  }
}

TEST(PlannerTest, RmsNormIsOneRowReduction) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
  Value scale = b.Parameter("scale", DType::kF32, {kCols});
  Value ms = b.Reduce(OpCode::kReduceMean, b.Mul(x, x), {-1}, true);
  b.Output(b.Mul(b.Mul(x, b.Unary(OpCode::kRsqrt, b.AddScalar(ms, 1e-6))), scale), "y");
  EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kRowReduction});
}

TEST(PlannerTest, WeightedSumIsOneKernel) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
  Value w = b.Parameter("w", DType::kF32, {kCols});
  b.Output(b.Reduce(OpCode::kReduceSum, b.Mul(x, w), {1}, false), "y");
  EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kRowReduction});
}

TEST(PlannerTest, MatmulBiasReluIsOneGemm) {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kBF16, {512, 256});
  Value w = b.Parameter("w", DType::kBF16, {256, 512});
  Value bias = b.Parameter("bias", DType::kBF16, {512});
  b.Output(b.Unary(OpCode::kRelu, b.Add(b.MatMul(a, w), bias)), "y");
  EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kGemm});
}

// Convolution: the window view is the product's prologue; the bias, viewed as [C, 1, 1]
// (fewer elements than the product) and broadcast, joins the epilogue with the ReLU and the
// residual add rather than staying a kernel of its own.
TEST(PlannerTest, ConvBiasReluResidualIsOneGemm) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {2, 16, 12, 12});
  Value w = b.Parameter("w", DType::kBF16, {16, 16, 3, 3});
  Value bias = b.Parameter("bias", DType::kBF16, {16});
  Value c = b.Conv(x, w, bias, PoolParams{{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}});
  b.Output(b.Unary(OpCode::kRelu, b.Add(c, x)), "y");
  FusionPlan plan = Plan(b);
  EXPECT_EQ(Kinds(plan), std::vector<GroupKind>{GroupKind::kGemm});
}

TEST(PlannerTest, MatmulPlusTwoTensorsIsOneGemm) {
  GraphBuilder b;
  Value a = b.Parameter("A", DType::kF32, {256, 128});
  Value w = b.Parameter("B", DType::kF32, {128, 256});
  Value c = b.Parameter("C", DType::kF32, {256, 256});
  Value d = b.Parameter("D", DType::kF32, {256, 256});
  b.Output(b.Add(b.Add(b.MatMul(a, w), c), d), "y");
  EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kGemm});
}

Value CausalAttention(GraphBuilder& b, Value q, Value k, Value v, bool composite_softmax) {
  int64_t t = b.shape(q)[2], d = b.shape(q)[3];
  Value scores = b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 1.0 / std::sqrt(static_cast<double>(d)));
  Value row = b.Iota({t, t}, 0, DType::kI64), col = b.Iota({t, t}, 1, DType::kI64);
  Value masked = b.Where(b.Binary(OpCode::kLessEqual, col, row), scores, b.Scalar(-1e9, b.dtype(scores)));
  Value probs = composite_softmax ? b.Softmax(masked, -1) : SoftmaxByHand(b, masked);
  return b.MatMul(probs, v);
}

TEST(PlannerTest, CausalAttentionIsOneAttentionGroup) {
  for (bool composite : {false, true}) {
    GraphBuilder b;
    Shape shape = {2, 4, 128, 64};
    Value q = b.Parameter("q", DType::kF32, shape), k = b.Parameter("k", DType::kF32, shape),
          v = b.Parameter("v", DType::kF32, shape);
    b.Output(CausalAttention(b, q, k, v, composite), "y");
    EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kAttention}) << "composite=" << composite;
  }
}

TEST(PlannerTest, MlpBlockIsThreeKernels) {
  GraphBuilder b;
  const int64_t d = 256, hidden = 1024;
  Value x = b.Parameter("x", DType::kF32, {512, d});
  Value scale = b.Parameter("scale", DType::kF32, {d}), shift = b.Parameter("shift", DType::kF32, {d});
  Value w1 = b.Parameter("w1", DType::kF32, {d, hidden}), b1 = b.Parameter("b1", DType::kF32, {hidden});
  Value w2 = b.Parameter("w2", DType::kF32, {hidden, d}), b2 = b.Parameter("b2", DType::kF32, {d});
  Value h = b.Gelu(b.Add(b.MatMul(b.LayerNorm(x, scale, shift, -1, 1e-5), w1), b1), false);
  b.Output(b.Add(b.Add(b.MatMul(h, w2), b2), x), "y");
  EXPECT_EQ(Kinds(Plan(b)), (std::vector<GroupKind>{GroupKind::kRowReduction, GroupKind::kGemm, GroupKind::kGemm}));
}

TEST(PlannerTest, ReductionsOverDifferentAxesAreTwoKernels) {
  GraphBuilder b;
  Value e = b.Unary(OpCode::kExp, b.Parameter("x", DType::kF32, {kRows, kCols}));
  b.Output(b.Reduce(OpCode::kReduceSum, e, {0}, false), "columns");
  b.Output(b.Reduce(OpCode::kReduceSum, e, {1}, false), "rows");
  FusionPlan plan = Plan(b);
  EXPECT_EQ(plan.groups.size(), 2u);
  bool explained = false;
  for (const RejectedMerge& r : plan.rejected) explained |= r.reason.find("iteration space") != std::string::npos ||
                                                            r.reason.find("elements") != std::string::npos;
  EXPECT_TRUE(explained) << "the rejected merge must say why";
}

// A sum over an inner dim followed by a transpose (a GQA backward: the repeated heads' key
// gradients summed, then [batch, heads, tokens, dim] to [batch, tokens, heads, dim]): the
// transpose would read the reduction at another output position, which the reduction kernel
// does not compute there, so it stays out of the reduction's group (before, the group ran on
// the reference interpreter).
TEST(PlannerTest, AViewThatMovesAReductionsResultsStaysOutOfItsGroup) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 2, 4, 16, 8});
  Value summed = b.Reshape(b.Reduce(OpCode::kReduceSum, x, {2}, true), {2, 2, 16, 8});
  b.Output(b.MulScalar(b.Transpose(summed, {0, 2, 1, 3}), 2.0), "y");
  FusionPlan plan = Plan(b);
  bool explained = false;
  for (const RejectedMerge& r : plan.rejected) explained |= r.reason.find("reorders the reduction's results") != std::string::npos;
  EXPECT_TRUE(explained) << "the rejected merge must say why";
  EXPECT_GE(plan.groups.size(), 2u);
}

// Rotary embedding's rotate-half: two half-width results concatenated. The halves have
// half the concat's elements, but only the concat reads them: one kernel over the concat's
// space evaluates each where the concat reads it. A half that is also a graph output needs
// its own space (something must store it), so it is not computed inside the concat's kernel.
Value RotateHalf(GraphBuilder& b, Value* first_half) {
  Value x = b.Parameter("x", DType::kF32, {kRows, 64});
  Value cos = b.Parameter("cos", DType::kF32, {kRows, 32}), sin = b.Parameter("sin", DType::kF32, {kRows, 32});
  Value x1 = b.Slice(x, {0}, {32}, {1}, {});
  Value x2 = b.Slice(x, {32}, {64}, {1}, {});
  *first_half = b.Sub(b.Mul(x1, cos), b.Mul(x2, sin));
  return b.Concat({*first_half, b.Add(b.Mul(x2, cos), b.Mul(x1, sin))}, 1);
}

TEST(PlannerTest, HalvesReadOnlyByTheirConcatAreOneKernel) {
  GraphBuilder b;
  Value first;
  Value y = RotateHalf(b, &first);
  b.Output(y, "y");
  EXPECT_EQ(Kinds(Plan(b)), std::vector<GroupKind>{GroupKind::kPointwise});
}

TEST(PlannerTest, HalfThatIsAlsoAnOutputKeepsItsOwnKernel) {
  GraphBuilder b;
  Value first;
  Value y = RotateHalf(b, &first);
  b.Output(y, "y");
  b.Output(first, "first");
  FusionPlan plan = Plan(b);
  EXPECT_EQ(plan.groups.size(), 2u);
  bool explained = false;
  for (const RejectedMerge& r : plan.rejected) explained |= r.reason.find("iteration spaces differ") != std::string::npos;
  EXPECT_TRUE(explained) << "the rejected merge must say why";
}

// A generator that is also an output is stored by its own group, and what reads it is no
// generator: inlined into a reader's group, it would load the output's buffer from a group
// the order put first (a training backward's zeros gradient, sliced into the rotary's
// slice_scatter, was read before it was written).
TEST(PlannerTest, WhatReadsAGeneratorThatIsAnOutputRunsAfterIt) {
  GraphBuilder b;
  // Larger than constant folding expands (kMaxFoldedExpansionElements), so the iota stays.
  Value x = b.Parameter("x", DType::kF32, {1024, 2048});
  Value negated = b.Unary(OpCode::kNeg, x);  // first, so the reader's group has the smaller first member
  Value positions = b.Iota({1024, 2048}, 1, DType::kF32);
  b.Output(positions, "positions");
  b.Output(b.Add(negated, b.MulScalar(positions, 0.5)), "y");
  auto graph = RunGraphPasses(*b.Build(), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  Status verified = VerifyPlan(*graph, *plan);  // no inlined generator reads a group's value
  ASSERT_TRUE(verified.ok()) << verified.ToString();
  int iota = -1, add = -1;
  for (const Node& n : graph->nodes()) {
    if (n.op == OpCode::kIota) iota = n.id;
    if (n.op == OpCode::kAdd) add = n.id;
  }
  ASSERT_GE(iota, 0) << "the iota was folded";
  ASSERT_GE(plan->group_of[iota], 0) << "an output is stored by a group";
  ASSERT_GE(plan->group_of[add], 0);
  EXPECT_LE(plan->group_of[iota], plan->group_of[add]) << "groups run in plan order";
}

TEST(PlannerTest, DiamondThatWouldCycleStaysLegal) {
  // p feeds c directly and through a matmul that cannot take p as prologue:
  //   p = exp(x) ──────────────► c = p + m
  //        └─► m = matmul(p, w) ─┘
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {256, 256});
  Value w = b.Parameter("w", DType::kF32, {256, 256});
  Value p = b.Unary(OpCode::kExp, x);
  b.Output(b.Add(p, b.MatMul(p, w)), "y");
  FusionPlan plan = Plan(b);  // Plan() verifies convexity and coverage
  EXPECT_EQ(plan.groups.size(), 2u);
}

TEST(PlannerTest, NoFusionRunsEveryOpAlone) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {kRows, kCols});
  Value bias = b.Parameter("bias", DType::kF32, {kCols});
  b.Output(b.Unary(OpCode::kTanh, b.Add(b.Unary(OpCode::kExp, x), bias)), "y");
  PlannerOptions options;
  options.fuse = false;
  FusionPlan plan = Plan(b, options);
  EXPECT_EQ(plan.groups.size(), 3u);  // exp, add (with the bias broadcast folded in), tanh
  EXPECT_EQ(plan.unfused_kernels, 3);
}

TEST(PlannerTest, DisabledKindIsNotFormed) {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kF32, {128, 128});
  Value w = b.Parameter("w", DType::kF32, {128, 128});
  b.Output(b.Unary(OpCode::kRelu, b.MatMul(a, w)), "y");
  PlannerOptions options;
  options.disabled_kinds = {GroupKind::kGemm};
  FusionPlan plan = Plan(b, options);
  EXPECT_EQ(plan.groups.size(), 2u);
  ASSERT_FALSE(plan.rejected.empty());
  EXPECT_NE(plan.rejected[0].reason.find("disabled"), std::string::npos);
}

TEST(PlannerTest, UnknownDeviceIsAnError) {
  GraphBuilder b;
  b.Output(b.Unary(OpCode::kExp, b.Parameter("x", DType::kF32, {4})), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  PlannerOptions options;
  options.device = "tpu";
  auto plan = PlanFusion(*graph, options);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("unknown device 'tpu'"), std::string::npos);
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// The out-projection of a transformer block at D 2048: the gemm is compute-bound, so
// greedy merging once took the f32 cast for the next layer norm into its epilogue (the
// extra 134 MB write looked free) and the layer norm then read the f32 copy back.
// MoveBoundaryOps puts the cast with its readers: the gemm writes h once, in bf16.
TEST(PlannerTest, WideningCastGoesToTheLayerNormThatReadsIt) {
  PlannedText p = PlanOnnxText(
      "g (bfloat16[16384,2048] a, bfloat16[2048,2048] w, bfloat16[2048] b, bfloat16[16384,2048] x, float[2048] s, float[2048] t) "
      "=> (bfloat16[16384,2048] h, float[16384,2048] y)",
      "  proj = MatMul (a, w)\n  biased = Add (proj, b)\n  h = Add (x, biased)\n  wide = Cast <to = 1> (h)\n"
      "  y = LayerNormalization <axis = -1, epsilon = 1e-5> (wide, s, t)\n");
  int cast = -1;
  for (const Node& n : p.graph.nodes())
    if (n.op == OpCode::kCast && n.dtype == DType::kF32 && n.shape == Shape{16384, 2048}) cast = n.id;
  ASSERT_GE(cast, 0);
  const FusionGroup& holder = p.plan.groups[p.plan.group_of[cast]];
  EXPECT_EQ(holder.kind, GroupKind::kRowReduction) << "the cast stayed in the " << GroupKindName(holder.kind) << " group";
  for (const FusionGroup& g : p.plan.groups) {
    if (g.kind != GroupKind::kGemm) continue;
    for (int out : g.outputs) {
      EXPECT_NE(p.graph.node(out).dtype, DType::kF32) << "the gemm writes an f32 copy";
    }
  }
  EXPECT_TRUE(VerifyPlan(p.graph, p.plan).ok());
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// A pool's taps read windows of one shared view of the input (the input stored NHWC,
// seen as NCHW): the view has the input's size, the taps the (strided) output's. It is
// index arithmetic in the taps' loads, so the pool stays one kernel with no copy of it.
TEST(PlannerTest, SharedViewOfTheInputReadByStridedTapsIsIndexArithmetic) {
  GraphBuilder b;
  Value nhwc = b.Parameter("x", DType::kF32, {2, 16, 16, 8});
  Value x = b.Transpose(nhwc, {0, 3, 1, 2});
  Value zero = b.Scalar(0, DType::kF32);
  Value y;
  for (int64_t k = 0; k < 2; ++k) {  // two taps of a stride-2 window
    PoolParams p{{1, 1}, {2, 2}, {-k, -k, k - 1, k - 1}, {1, 1}};
    Value tap = b.Reshape(b.Window(x, zero, p), {2, 8, 8, 8});
    y = k == 0 ? tap : b.Binary(OpCode::kMax, y, tap);
  }
  b.Output(y, "y");
  FusionPlan plan = Plan(b);
  EXPECT_EQ(Kinds(plan), std::vector<GroupKind>{GroupKind::kPointwise});
}

// A value computed in one group and read only through a transpose by a matmul's prologue:
// the transpose goes to the matmul's group, and the first group writes the value as it
// computes it instead of a transposed copy.
TEST(PlannerTest, TransposeReadByAGemmPrologueLeavesTheGroupWritingItsInput) {
  PlannedText p = PlanOnnxText("g (bfloat16[64,256] x, bfloat16[64,128] w) => (bfloat16[256,128] y)",
                               "  e = Exp (x)\n  r = Relu (e)\n  t = Transpose <perm = [1, 0]> (r)\n  y = MatMul (t, w)\n");
  ASSERT_EQ(Kinds(p.plan), (std::vector<GroupKind>{GroupKind::kPointwise, GroupKind::kGemm}));
  ASSERT_EQ(p.plan.groups[0].outputs.size(), 1u);
  EXPECT_EQ(p.graph.node(p.plan.groups[0].outputs[0]).op, OpCode::kRelu);
  EXPECT_TRUE(VerifyPlan(p.graph, p.plan).ok());
}

// A depthwise convolution combined tap by tap reads values other kernels wrote: over a sum
// computed in its group each of its 9 taps would recompute the sum, and inside a reduction
// every pass over a row would recompute the taps.
TEST(PlannerTest, DepthwiseTapsReadAWrittenValueAndStayOutOfReductions) {
  PlannedText p = PlanOnnxText(
      "g (float[2,8,10,10] x, float[2,8,10,10] y, float[8,1,3,3] w) => (float[2,1,10,10] m)",
      "  s = Add (x, y)\n  d = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1], group = 8> (s, w)\n"
      "  m = ReduceMean <axes = [1]> (d)\n");
  ASSERT_FALSE(p.plan.groups.empty());
  bool saw_add = false;
  for (const FusionGroup& group : p.plan.groups) {
    int windows = 0;
    bool add = false;
    for (int id : group.nodes) {
      const Node& n = p.graph.node(id);
      windows += n.op == OpCode::kWindow;
      add = add || (n.op == OpCode::kAdd && n.name == "s");
    }
    saw_add = saw_add || add;
    if (add) EXPECT_LE(windows, 1) << "taps recompute the sum they read";  // one shifted read costs what a load does
    if (group.kind == GroupKind::kReduction || group.kind == GroupKind::kRowReduction)
      EXPECT_EQ(windows, 0) << "a reduction recomputes taps";
  }
  EXPECT_TRUE(saw_add);
}

}  // namespace
}  // namespace tilefuse

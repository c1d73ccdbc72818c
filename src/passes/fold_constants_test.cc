#include "passes/fold_constants.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

TEST(FoldConstantsTest, AddOfTwoConstantsBecomesAConstant) {
  GraphBuilder b;
  Value a = b.Constant(Tensor::FromDoubles(DType::kF32, {2, 2}, {1, 2, 3, 4}));
  Value c = b.Constant(Tensor::FromDoubles(DType::kF32, {2, 2}, {0.5, -2, 10, 0.25}));
  b.SetLocation("", "sum");
  b.Output(b.Add(a, c), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();

  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& out = folded->node(folded->outputs()[0].node);
  ASSERT_EQ(out.op, OpCode::kConstant);
  EXPECT_EQ(out.name, "sum");
  EXPECT_EQ(out.dtype, DType::kF32);
  EXPECT_EQ(out.shape, (Shape{2, 2}));
  EXPECT_EQ(out.attrs.value->ToDoubles(), (std::vector<double>{1.5, 0, 13, 4.25}));
  EXPECT_EQ(CountOps(*folded, OpCode::kAdd), 0);
}

// Transposes and reshapes of constants are folded by moving bytes, not through the
// interpreter: the same values as the interpreter's, for several element sizes and ranks.
TEST(FoldConstantsTest, TransposesAndReshapesOfConstantsMatchTheInterpreter) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64, DType::kBool}) {
    for (const std::vector<int64_t>& perm : {std::vector<int64_t>{1, 0, 2}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}}) {
      GraphBuilder b;
      const Tensor value = Tensor::Random(dtype, {3, 4, 5}, 7);
      Value c = b.Constant(value);
      Value t = b.Transpose(c, perm);
      b.Output(t, "t");
      b.Output(b.Reshape(t, {b.shape(t)[0] * b.shape(t)[1], b.shape(t)[2]}), "r");
      auto graph = b.Build();
      ASSERT_TRUE(graph.ok()) << graph.status().ToString();
      const Node& transpose = graph->node(graph->outputs()[0].node);
      auto expected = EvaluateNode(transpose, {&value});
      ASSERT_TRUE(expected.ok()) << expected.status().ToString();

      auto folded = FoldConstants(*graph);
      ASSERT_TRUE(folded.ok()) << folded.status().ToString();
      const Node& t_out = folded->node(folded->outputs()[0].node);
      const Node& r_out = folded->node(folded->outputs()[1].node);
      ASSERT_EQ(t_out.op, OpCode::kConstant);
      ASSERT_EQ(r_out.op, OpCode::kConstant);
      EXPECT_EQ(t_out.shape, expected->shape());
      EXPECT_EQ(t_out.attrs.value->ToDoubles(), expected->ToDoubles()) << DTypeName(dtype);
      EXPECT_EQ(r_out.attrs.value->ToDoubles(), expected->ToDoubles()) << DTypeName(dtype);  // same order, new shape
      EXPECT_EQ(r_out.shape, (Shape{expected->shape()[0] * expected->shape()[1], expected->shape()[2]}));
    }
  }
}

// Matrix transposes go by 64x64 tiles: ragged edges, a batch, bf16 and f32, and one over 16 MB
// (split over the threads) match the interpreter.
TEST(FoldConstantsTest, TiledMatrixTransposesMatchTheInterpreter) {
  struct Case {
    DType dtype;
    Shape shape;
    std::vector<int64_t> perm;
  };
  for (const Case& c : {Case{DType::kF32, {130, 67}, {1, 0}}, Case{DType::kBF16, {2, 70, 129}, {0, 2, 1}},
                        Case{DType::kI64, {1, 65, 3, 64}, {0, 1, 3, 2}}, Case{DType::kF32, {2100, 2101}, {1, 0}}}) {
    GraphBuilder b;
    const Tensor value = Tensor::Random(c.dtype, c.shape, 11);
    b.Output(b.Transpose(b.Constant(value), c.perm), "t");
    auto graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto expected = EvaluateNode(graph->node(graph->outputs()[0].node), {&value});
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    auto folded = FoldConstants(*graph);
    ASSERT_TRUE(folded.ok()) << folded.status().ToString();
    const Node& out = folded->node(folded->outputs()[0].node);
    ASSERT_EQ(out.op, OpCode::kConstant);
    EXPECT_EQ(out.shape, expected->shape());
    EXPECT_EQ(std::memcmp(out.attrs.value->data(), expected->data(), expected->num_bytes()), 0) << ShapeToString(c.shape);
  }
}

TEST(FoldConstantsTest, FoldsChainsButKeepsParameterDependentNodes) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {3});
  Value six = b.Mul(b.Scalar(2, DType::kF64), b.Scalar(3, DType::kF64));
  Value seven = b.AddScalar(six, 1);
  b.Output(b.Mul(x, seven), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();

  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& out = folded->node(folded->outputs()[0].node);
  ASSERT_EQ(out.op, OpCode::kMul);
  EXPECT_EQ(folded->node(out.inputs[0]).op, OpCode::kParameter);
  // The factor stays a broadcast scalar: a stride-0 load, not a [3] buffer.
  const Node& factor = folded->node(out.inputs[1]);
  ASSERT_EQ(factor.op, OpCode::kBroadcast);
  const Node& scalar = folded->node(factor.inputs[0]);
  ASSERT_EQ(scalar.op, OpCode::kConstant);
  EXPECT_EQ(scalar.attrs.value->ToDoubles(), (std::vector<double>{7}));
  EXPECT_EQ(CountOps(*folded, OpCode::kAdd), 0);
}

TEST(FoldConstantsTest, PointwiseOfSplatsStaysASplat) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 256});
  Value two = b.BroadcastTo(b.Scalar(2, DType::kF32), {4, 256});
  Value half = b.BroadcastTo(b.Constant(Tensor::FromDoubles(DType::kF32, {1, 1}, {0.5})), {4, 256});
  b.Output(b.Add(x, b.Unary(OpCode::kExp, b.Mul(two, half))), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& add = folded->node(folded->outputs()[0].node);
  const Node& splat = folded->node(add.inputs[1]);
  ASSERT_EQ(splat.op, OpCode::kBroadcast);
  EXPECT_EQ(splat.shape, (Shape{4, 256}));
  const Node& value = folded->node(splat.inputs[0]);
  ASSERT_EQ(value.op, OpCode::kConstant);
  EXPECT_EQ(value.shape, Shape{});
  EXPECT_FLOAT_EQ(value.attrs.value->GetDouble(0), std::exp(1.0f));
  EXPECT_EQ(CountOps(*folded, OpCode::kExp), 0);
  EXPECT_EQ(CountOps(*folded, OpCode::kMul), 0);
}

// slice_scatter into zeros, as the torch frontend translates it: the zeros' halves stay
// splats (a broadcast of one value), not a constant of every element.
TEST(FoldConstantsTest, SlicesReshapesAndTransposesOfASplatStaySplats) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8, 32});
  Value zeros = b.BroadcastTo(b.Scalar(-1.5, DType::kF32), {4, 8, 64});
  Value left = b.Slice(zeros, {0}, {32}, {2}, {});
  Value moved = b.Reshape(b.Transpose(left, {1, 0, 2}), {8, 4, 32});
  b.Output(b.Concat({left, x}, 2), "y");
  b.Output(moved, "moved");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& concat = folded->node(folded->outputs()[0].node);
  const Node& moved_node = folded->node(folded->outputs()[1].node);
  for (const Node* splat : {&folded->node(concat.inputs[0]), &moved_node}) {
    ASSERT_EQ(splat->op, OpCode::kBroadcast) << OpName(splat->op);
    const Node& value = folded->node(splat->inputs[0]);
    ASSERT_EQ(value.op, OpCode::kConstant);
    EXPECT_EQ(value.shape, Shape{});
    EXPECT_EQ(value.attrs.value->GetDouble(0), -1.5);
  }
  EXPECT_EQ(folded->node(concat.inputs[0]).shape, (Shape{4, 8, 32}));
  EXPECT_EQ(moved_node.shape, (Shape{8, 4, 32}));
  EXPECT_EQ(CountOps(*folded, OpCode::kSlice) + CountOps(*folded, OpCode::kTranspose) + CountOps(*folded, OpCode::kReshape), 0);
}

TEST(FoldConstantsTest, MixesBroadcastAndFullConstants) {
  GraphBuilder b;
  Value c = b.Constant(Tensor::FromDoubles(DType::kI32, {2, 2}, {1, 2, 3, 4}));
  Value row = b.Constant(Tensor::FromDoubles(DType::kI32, {2}, {10, 20}));
  b.Output(b.Mul(c, row), "y");  // row broadcasts to [[10, 20], [10, 20]]
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& out = folded->node(folded->outputs()[0].node);
  ASSERT_EQ(out.op, OpCode::kConstant);
  EXPECT_EQ(out.dtype, DType::kI32);
  EXPECT_EQ(out.attrs.value->ToDoubles(), (std::vector<double>{10, 40, 30, 80}));
}

TEST(FoldConstantsTest, FoldsSmallIotaAndCast) {
  GraphBuilder b;
  Value iota = b.Iota({2, 3}, 1, DType::kI64);
  b.Output(b.Cast(iota, DType::kF32), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  const Node& out = folded->node(folded->outputs()[0].node);
  ASSERT_EQ(out.op, OpCode::kConstant);
  EXPECT_EQ(out.dtype, DType::kF32);
  EXPECT_EQ(out.attrs.value->ToDoubles(), (std::vector<double>{0, 1, 2, 0, 1, 2}));
}

// A vocabulary's iota compared with each row's target (a cross-entropy's one-hot) stays an
// iota: as a constant, every row's kernel would load it (1 MB of i64 at 128K).
TEST(FoldConstantsTest, KeepsAVocabularysIotaAGenerator) {
  GraphBuilder b;
  Value target = b.Parameter("target", DType::kI64, {4, 1});
  Value columns = b.Reshape(b.Iota({128256}, 0, DType::kI64), {1, 128256});
  b.Output(b.Binary(OpCode::kEqual, b.BroadcastTo(columns, {4, 128256}), b.BroadcastTo(target, {4, 128256})), "onehot");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(CountOps(*folded, OpCode::kIota), 1);
  for (const Node& n : folded->nodes())
    if (n.op == OpCode::kConstant) EXPECT_LE(NumElements(n.shape), kMaxFoldedIotaElements) << "constant %" << n.id;
}

// A small iota whose reader reads a run-time value too (a small KV cache's update compares each
// element's key with the step's position) stays an iota: an index computation, which CSE merges
// with the same iota of the values' update and the decode attention's fold reads as the key.
// Folded, it was a 4096-element constant of each update, a load, never merged.
TEST(FoldConstantsTest, KeepsASmallIotaReadWithARunTimeValueAnIota) {
  GraphBuilder b;
  Value position = b.Parameter("position", DType::kI64, {1, 1, 1, 1});
  Value keys = b.Iota({1, 4, 16, 64}, 2, DType::kI64);
  b.Output(b.Binary(OpCode::kEqual, keys, b.BroadcastTo(position, {1, 4, 16, 64})), "at_position");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(CountOps(*folded, OpCode::kIota), 1);
  EXPECT_EQ(CountOps(*folded, OpCode::kConstant), 0);
}

TEST(FoldConstantsTest, NeverFoldsRandomUniform) {
  GraphBuilder b;
  Value r = b.RandomUniform({4}, DType::kF32, 7);
  b.Output(b.AddScalar(r, 1.0), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(CountOps(*folded, OpCode::kRandomUniform), 1);
  EXPECT_EQ(folded->node(folded->outputs()[0].node).op, OpCode::kAdd);
}

TEST(FoldConstantsTest, KeepsLargeExpansionsAsOps) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2048, 1024});
  Value big = b.BroadcastTo(b.Scalar(1, DType::kF32), {2048, 1024});  // 2M elements from 1
  Value ramp = b.Iota({2048, 1024}, 0, DType::kF32);
  b.Output(b.Add(b.Add(x, big), ramp), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(CountOps(*folded, OpCode::kBroadcast), 1);
  EXPECT_EQ(CountOps(*folded, OpCode::kIota), 1);
}

// A linear layer's weight [N][K] transposed for its product: with the CUDA backend's K-major
// options, the transpose stays where that product reads its weight K-major anyway (a
// half-precision vocabulary of unaligned N; f32 under TF32 with aligned N), instead of being
// folded to [K][N] and transposed back. Elsewhere, or with another reader, it folds.
TEST(FoldConstantsTest, TransposedWeightsStayWhereTheirProductReadsThemKMajor) {
  struct Case {
    DType dtype;
    int64_t n;
    KMajorWeightsOptions k_major;
    bool second_reader;
    bool kept;
  };
  const Case cases[] = {
      {DType::kBF16, 9, {.unaligned_half = true}, false, true},    // N rows of 18 bytes: K-major
      {DType::kBF16, 16, {.unaligned_half = true}, false, false},  // aligned: the template reads [K][N]
      {DType::kBF16, 9, {}, false, false},                         // no K-major options (the CPU)
      {DType::kF32, 8, {.f32 = true}, false, true},                // TF32
      {DType::kF32, 9, {.f32 = true}, false, false},               // unaligned f32: padded first
      {DType::kBF16, 9, {.unaligned_half = true}, true, false},    // also read by a pointwise op
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("{} N={} second reader {}", DTypeName(c.dtype), c.n, c.second_reader));
    GraphBuilder b;
    Value x = b.Parameter("x", c.dtype, {4, 16});
    // [N][K], cast from f32 as exports write half-precision weights: a constant once folded.
    Value w = b.Cast(b.Constant(Tensor::Random(DType::kF32, {c.n, 16}, 5)), c.dtype);
    Value wt = b.Transpose(w, {1, 0});
    b.Output(b.MatMul(x, wt), "y");
    if (c.second_reader) b.Output(b.Unary(OpCode::kNeg, wt), "z");
    auto graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto folded = FoldConstants(*graph, {.k_major = c.k_major});
    ASSERT_TRUE(folded.ok()) << folded.status().ToString();
    EXPECT_EQ(CountOps(*folded, OpCode::kTranspose), c.kept ? 1 : 0);
    const Node& product = folded->node(folded->outputs()[0].node);
    ASSERT_EQ(product.op, OpCode::kMatMul);
    const Node& operand = folded->node(product.inputs[1]);
    EXPECT_EQ(operand.op, c.kept ? OpCode::kTranspose : OpCode::kConstant);
    if (c.kept) {
      EXPECT_EQ(folded->node(operand.inputs[0]).op, OpCode::kConstant);
      EXPECT_EQ(folded->node(operand.inputs[0]).shape, (Shape{c.n, 16}));
    }
    const Tensor input = Tensor::Random(c.dtype, {4, 16}, 3);
    auto expected = RunReference(*graph, {input});
    auto actual = RunReference(*folded, {input});
    ASSERT_TRUE(expected.ok() && actual.ok());
    for (size_t i = 0; i < expected->size(); ++i) EXPECT_EQ((*actual)[i].ToDoubles(), (*expected)[i].ToDoubles()) << i;
  }
}

TEST(FoldConstantsTest, LeavesConstantsAndParametersAlone) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2});
  Value c = b.Constant(Tensor::FromDoubles(DType::kF32, {2}, {1, 2}));
  b.Output(b.Add(x, c), "y");
  b.Output(c, "c");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto folded = FoldConstants(*graph);
  ASSERT_TRUE(folded.ok()) << folded.status().ToString();
  EXPECT_EQ(folded->num_nodes(), 3);
  EXPECT_EQ(folded->inputs(), (std::vector<int>{0}));
  EXPECT_EQ(folded->node(folded->outputs()[1].node).attrs.value->ToDoubles(), (std::vector<double>{1, 2}));
}

}  // namespace
}  // namespace tilefuse

// The interpreter's driver: input validation, multiple outputs, error context, value
// lifetimes on long graphs, and EvaluateNode.
#include "reference/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reference/interpreter_test_util.h"

namespace tilefuse {
namespace {

using interpreter_test::F64;
using interpreter_test::RunGraph;
using interpreter_test::TryRun;

Graph AddGraph() {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 3});
  Value y = b.Parameter("y", DType::kF32, {2, 3});
  b.Output(b.Add(x, y), "sum");
  b.Output(b.Mul(x, y), "product");
  return std::move(b.Build()).value();
}

TEST(InterpreterTest, RunsEveryOutputInOrder) {
  Graph graph = AddGraph();
  Tensor x = Tensor::FromDoubles(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor y = Tensor::FromDoubles(DType::kF32, {2, 3}, {10, 20, 30, 40, 50, 60});
  auto outputs = RunReference(graph, {x, y});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  ASSERT_EQ(outputs->size(), 2u);
  EXPECT_EQ((*outputs)[0].dtype(), DType::kF32);
  EXPECT_EQ((*outputs)[0].shape(), (Shape{2, 3}));
  EXPECT_EQ((*outputs)[0].ToDoubles(), (std::vector<double>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ((*outputs)[1].ToDoubles(), (std::vector<double>{10, 40, 90, 160, 250, 360}));
}

TEST(InterpreterTest, WrongInputCountIsAnError) {
  Graph graph = AddGraph();
  auto outputs = RunReference(graph, {Tensor(DType::kF32, {2, 3})});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(outputs.status().message(), "graph takes 2 inputs, got 1");
}

TEST(InterpreterTest, WrongInputShapeNamesTheInput) {
  Graph graph = AddGraph();
  auto outputs = RunReference(graph, {Tensor(DType::kF32, {2, 3}), Tensor(DType::kF32, {2, 4})});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(outputs.status().message(), "input 'y' expects f32[2,3], got f32[2,4]");
}

TEST(InterpreterTest, WrongInputDTypeNamesTheInput) {
  Graph graph = AddGraph();
  auto outputs = RunReference(graph, {Tensor(DType::kF16, {2, 3}), Tensor(DType::kF32, {2, 3})});
  ASSERT_FALSE(outputs.ok());
  EXPECT_EQ(outputs.status().message(), "input 'x' expects f32[2,3], got f16[2,3]");
}

TEST(InterpreterTest, ParameterAndConstantCanBeOutputs) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kI32, {2});
  Value c = b.Constant(Tensor::FromDoubles(DType::kI64, {3}, {7, 8, 9}));
  b.Output(x, "x_out");
  b.Output(c, "c_out");
  Graph graph = std::move(b.Build()).value();
  auto outputs = RunReference(graph, {Tensor::FromDoubles(DType::kI32, {2}, {-4, 5})});
  ASSERT_TRUE(outputs.ok()) << outputs.status().ToString();
  EXPECT_EQ((*outputs)[0].ToDoubles(), (std::vector<double>{-4, 5}));
  EXPECT_EQ((*outputs)[1].dtype(), DType::kI64);
  EXPECT_EQ((*outputs)[1].ToDoubles(), (std::vector<double>{7, 8, 9}));
}

TEST(InterpreterTest, KernelErrorNamesTheNodeAndOp) {
  GraphBuilder b;
  Value data = b.Parameter("data", DType::kF32, {3});
  Value indices = b.Constant(Tensor::FromDoubles(DType::kI64, {1}, {5}));
  b.SetLocation("node 'lookup'", "lookup");
  StatusOr<Tensor> result = TryRun(b, b.Gather(data, indices, 0), {Tensor(DType::kF32, {3})});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("node 'lookup' (gather)"), std::string::npos) << result.status().message();
  EXPECT_NE(result.status().message().find("index 5 out of range [-3, 3)"), std::string::npos)
      << result.status().message();
}

TEST(InterpreterTest, LongChainWithSharedValuesStaysCorrect) {
  // v <- v + v * 0.001 over 2000 steps, each value read twice: values are freed after
  // their last use, so this also checks the use counting. Closed form: x * 1.001^2000.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {3});
  Value rate = b.BroadcastTo(b.Scalar(0.001, DType::kF64), {3});
  Value v = x;
  const int steps = 2000;
  for (int i = 0; i < steps; ++i) v = b.Add(v, b.Mul(v, rate));
  std::vector<double> out = RunGraph(b, v, {F64({3}, {1, -2, 0})});
  double factor = std::pow(1.001, steps);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NEAR(out[0], factor, factor * 1e-11);
  EXPECT_NEAR(out[1], -2 * factor, factor * 1e-11);
  EXPECT_EQ(out[2], 0.0);
}

TEST(InterpreterTest, UnusedNodesDoNotRun) {
  // The out-of-range gather feeds nothing, so the graph still runs.
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {3});
  b.Gather(x, b.Constant(Tensor::FromDoubles(DType::kI64, {1}, {99})), 0);
  std::vector<double> out = RunGraph(b, b.Unary(OpCode::kNeg, x), {Tensor::FromDoubles(DType::kF32, {3}, {1, 2, 3})});
  EXPECT_EQ(out, (std::vector<double>{-1, -2, -3}));
}

TEST(InterpreterTest, EvaluateNodeComputesFromTensors) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 2});
  Value y = b.Reduce(OpCode::kReduceSum, x, {1}, /*keepdims=*/false);
  b.Output(y, "y");
  Graph graph = std::move(b.Build()).value();
  Tensor input = Tensor::FromDoubles(DType::kF32, {2, 2}, {1, 2, 3, 4});
  auto result = EvaluateNode(graph.node(y.id), {&input});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->shape(), (Shape{2}));
  EXPECT_EQ(result->ToDoubles(), (std::vector<double>{3, 7}));
  EXPECT_FALSE(EvaluateNode(graph.node(x.id), {}).ok());
  EXPECT_FALSE(EvaluateNode(graph.node(y.id), {}).ok());
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// ReferenceRounding: inexact results move by at most `ulps` of their dtype (and some do),
// exact ones (relu, max) and f64 nodes never move.
TEST(InterpreterTest, AlternativeRoundingMovesOnlyInexactResultsByAtMostTheUlps) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {256});
  b.Output(b.Unary(OpCode::kExp, x), "exp");
  b.Output(b.Unary(OpCode::kRelu, x), "relu");
  b.Output(b.Unary(OpCode::kExp, b.Cast(x, DType::kF64)), "exp64");
  Graph graph = std::move(b.Build()).value();
  Tensor input = Tensor::Random(DType::kF32, {256}, 3);
  auto nearest = RunReference(graph, {input});
  ASSERT_TRUE(nearest.ok()) << nearest.status().ToString();
  for (int ulps : {1, 2}) {
    auto moved = RunReference(graph, {input}, ReferenceRounding{ulps, 7});
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    int changed = 0;
    for (int64_t i = 0; i < 256; ++i) {
      double e = (*nearest)[0].GetDouble(i), m = (*moved)[0].GetDouble(i);
      double ulp = std::nextafter(static_cast<float>(std::fabs(e)), INFINITY) - std::fabs(static_cast<float>(e));
      EXPECT_LE(std::fabs(m - e), ulps * ulp * 1.0000001) << i;
      changed += m != e;
      EXPECT_EQ((*moved)[1].GetDouble(i), (*nearest)[1].GetDouble(i)) << "relu is exact";
      EXPECT_EQ((*moved)[2].GetDouble(i), (*nearest)[2].GetDouble(i)) << "f64 stays";
    }
    EXPECT_GT(changed, 256 / 4) << ulps;
  }
}

}  // namespace
}  // namespace tilefuse

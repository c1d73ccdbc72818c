#include "passes/decompose.h"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>

#include "reference/interpreter.h"
#include "passes/pass_test_util.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountKind;
using pass_testing::CountOps;

// Builds one composite over x (and, for layer_norm, its own scale/bias parameters).
using CompositeBuilder = std::function<Value(GraphBuilder&, Value x)>;

struct CompositeCase {
  const char* name;
  CompositeBuilder build;
};

void PrintTo(const CompositeCase& c, std::ostream* os) { *os << c.name; }

Value LayerNormWithParams(GraphBuilder& b, Value x, int64_t axis, bool with_bias) {
  Shape x_shape = b.shape(x);
  Shape normalized(x_shape.begin() + axis, x_shape.end());
  Value scale = b.Parameter("scale", b.dtype(x), normalized);
  Value bias = with_bias ? b.Parameter("bias", b.dtype(x), normalized) : Value{};
  return b.LayerNorm(x, scale, bias, axis, 1e-5);
}

const CompositeCase kCases[] = {
    {"softmax_last", [](GraphBuilder& b, Value x) { return b.Softmax(x, -1); }},
    {"softmax_middle", [](GraphBuilder& b, Value x) { return b.Softmax(x, 1); }},
    {"log_softmax", [](GraphBuilder& b, Value x) { return b.LogSoftmax(x, -1); }},
    {"log_softmax_first", [](GraphBuilder& b, Value x) { return b.LogSoftmax(x, 0); }},
    {"layer_norm_bias", [](GraphBuilder& b, Value x) { return LayerNormWithParams(b, x, 1, true); }},
    {"layer_norm_last", [](GraphBuilder& b, Value x) { return LayerNormWithParams(b, x, 2, false); }},
    {"gelu", [](GraphBuilder& b, Value x) { return b.Gelu(x, false); }},
    {"gelu_tanh", [](GraphBuilder& b, Value x) { return b.Gelu(x, true); }},
};

class DecomposeTest : public ::testing::TestWithParam<std::tuple<CompositeCase, DType>> {};

Graph BuildCase(const CompositeCase& c, DType dtype) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {3, 5, 16});
  b.SetLocation("", "composite");
  b.Output(c.build(b, x), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int id : graph.inputs()) {
    // Values up to +-4 so that exp, erf and tanh see more than their linear range.
    Tensor t = Tensor::Random(graph.node(id).dtype, graph.node(id).shape, seed++);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, 4 * t.GetDouble(i));
    inputs.push_back(t);
  }
  return inputs;
}

TEST_P(DecomposeTest, MatchesTheCompositeOnRandomInputs) {
  const auto& [c, dtype] = GetParam();
  Graph composite = BuildCase(c, dtype);
  ASSERT_EQ(CountKind(composite, OpKind::Composite), 1);

  auto decomposed = DecomposeComposites(composite);
  ASSERT_TRUE(decomposed.ok()) << decomposed.status().ToString();
  EXPECT_EQ(CountKind(*decomposed, OpKind::Composite), 0);
  const Node& out = decomposed->node(decomposed->outputs()[0].node);
  EXPECT_EQ(out.dtype, dtype);
  EXPECT_EQ(out.shape, (Shape{3, 5, 16}));
  for (const Node& n : decomposed->nodes()) {
    if (n.op != OpCode::kParameter) {
      EXPECT_EQ(n.name, "composite") << "%" << n.id;
    }
  }
  if (dtype == DType::kBF16 || dtype == DType::kF16) {
    EXPECT_GT(CountOps(*decomposed, OpCode::kCast), 0);
  }

  std::vector<Tensor> inputs = RandomInputs(composite, 42);
  auto expected = RunReference(composite, inputs);
  auto actual = RunReference(*decomposed, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  // Half types: the composite rounds its f64 result once, the decomposition computes
  // in f32; they may land one bf16 ulp (2^-7 relative at worst) apart.
  double tolerance = dtype == DType::kF64 ? 1e-12 : dtype == DType::kF32 ? 1e-5 : 1e-2;
  const Tensor& e = (*expected)[0];
  const Tensor& a = (*actual)[0];
  ASSERT_EQ(a.dtype(), e.dtype());
  ASSERT_EQ(a.shape(), e.shape());
  for (int64_t i = 0; i < e.num_elements(); ++i)
    ASSERT_NEAR(a.GetDouble(i), e.GetDouble(i), tolerance * std::max(1.0, std::fabs(e.GetDouble(i)))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(AllComposites, DecomposeTest,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values(DType::kF64, DType::kF32, DType::kBF16, DType::kF16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::string(DTypeName(std::get<1>(info.param)));
                         });

// Hand-computed values, independent of how the interpreter implements composites.
double RunScalarOutput(Graph graph, const std::vector<Tensor>& inputs, int64_t index) {
  auto decomposed = DecomposeComposites(graph);
  EXPECT_TRUE(decomposed.ok()) << decomposed.status().ToString();
  auto outputs = RunReference(*decomposed, inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
  return (*outputs)[0].GetDouble(index);
}

Graph OneOp(const std::function<Value(GraphBuilder&, Value)>& build, Shape shape) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, shape);
  b.Output(build(b, x), "y");
  return std::move(b.Build()).value();
}

TEST(DecomposeValuesTest, SoftmaxAndLogSoftmaxOfZeroAndLog2) {
  Tensor x = Tensor::FromDoubles(DType::kF64, {2}, {0, std::log(2.0)});
  Graph softmax = OneOp([](GraphBuilder& b, Value v) { return b.Softmax(v, 0); }, {2});
  EXPECT_NEAR(RunScalarOutput(softmax, {x}, 0), 1.0 / 3, 1e-15);
  EXPECT_NEAR(RunScalarOutput(softmax, {x}, 1), 2.0 / 3, 1e-15);
  Graph log_softmax = OneOp([](GraphBuilder& b, Value v) { return b.LogSoftmax(v, 0); }, {2});
  EXPECT_NEAR(RunScalarOutput(log_softmax, {x}, 0), std::log(1.0 / 3), 1e-15);
  EXPECT_NEAR(RunScalarOutput(log_softmax, {x}, 1), std::log(2.0 / 3), 1e-15);
}

TEST(DecomposeValuesTest, GeluAtOne) {
  Tensor one = Tensor::FromDoubles(DType::kF64, {1}, {1.0});
  // Phi(1) and the tanh form evaluated independently (Python's math module).
  Graph exact = OneOp([](GraphBuilder& b, Value v) { return b.Gelu(v, false); }, {1});
  EXPECT_NEAR(RunScalarOutput(exact, {one}, 0), 0.8413447460685429, 1e-15);
  Graph approx = OneOp([](GraphBuilder& b, Value v) { return b.Gelu(v, true); }, {1});
  EXPECT_NEAR(RunScalarOutput(approx, {one}, 0), 0.8411919906082768, 1e-15);
}

TEST(DecomposeValuesTest, LayerNormOfOneToFour) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {1, 4});
  Value scale = b.Parameter("scale", DType::kF64, {4});
  Value bias = b.Parameter("bias", DType::kF64, {4});
  b.Output(b.LayerNorm(x, scale, bias, 1, 0.0), "y");
  Graph graph = std::move(b.Build()).value();
  std::vector<Tensor> inputs = {Tensor::FromDoubles(DType::kF64, {1, 4}, {1, 2, 3, 4}),
                                Tensor::FromDoubles(DType::kF64, {4}, {1, 1, 2, 1}),
                                Tensor::FromDoubles(DType::kF64, {4}, {0, 0, 0, 10})};
  // mean 2.5, variance 1.25: (x - 2.5) / sqrt(1.25), then * scale + bias.
  EXPECT_NEAR(RunScalarOutput(graph, inputs, 0), -1.3416407864998738, 1e-15);
  EXPECT_NEAR(RunScalarOutput(graph, inputs, 2), 2 * 0.5 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(RunScalarOutput(graph, inputs, 3), 10 + 1.5 / std::sqrt(1.25), 1e-14);
}

TEST(DecomposeValuesTest, SoftmaxOfAScalarIsOne) {
  Graph graph = OneOp([](GraphBuilder& b, Value v) { return b.Softmax(v, 0); }, {});
  EXPECT_EQ(RunScalarOutput(graph, {Tensor::FromDoubles(DType::kF64, {}, {-3.5})}, 0), 1.0);
}

TEST(DecomposeValuesTest, LeavesPrimitivesAlone) {
  Graph graph = OneOp([](GraphBuilder& b, Value v) { return b.Unary(OpCode::kExp, v); }, {3});
  auto decomposed = DecomposeComposites(graph);
  ASSERT_TRUE(decomposed.ok()) << decomposed.status().ToString();
  EXPECT_EQ(decomposed->num_nodes(), 2);
  EXPECT_EQ(decomposed->node(1).op, OpCode::kExp);
}

}  // namespace
}  // namespace tilefuse

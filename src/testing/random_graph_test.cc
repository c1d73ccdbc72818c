// The random graph generator is only useful as an oracle if its graphs are valid, run
// through the passes and the reference interpreter, and stay finite everywhere; and
// only useful for replay if the same seed gives the same graph. The coverage test
// checks that 1000 seeds reach every op family the differential fuzzer promises.
#include "testing/random_graph.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "reference/interpreter.h"
#include "ir/printer.h"
#include "passes/pipeline.h"

namespace tilefuse {
namespace {

RandomGraphOptions WithSeed(uint64_t seed) {
  RandomGraphOptions options;
  options.seed = seed;
  return options;
}

std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int id : graph.inputs()) inputs.push_back(Tensor::Random(graph.node(id).dtype, graph.node(id).shape, seed + id));
  return inputs;
}

// Every float node as an output too, so the finiteness check sees intermediates that a
// where() might hide from the real outputs (a fused kernel may not hide them: 0 * inf).
// Not the fills of windows: max pooling's is the dtype's lowest value, -inf, read only
// where a window reaches outside its input.
Graph WithEveryFloatNodeAsOutput(Graph graph) {
  std::set<int> fills;
  for (const Node& node : graph.nodes())
    if (node.op == OpCode::kWindow) fills.insert(node.inputs[1]);
  for (const Node& node : graph.nodes())
    if (IsFloat(node.dtype) && !fills.count(node.id)) graph.AddOutput(node.id, fmt::format("n{}", node.id));
  return graph;
}

TEST(RandomGraphTest, GraphsVerifyRunAndStayFinite) {
  constexpr double kHalfMax = 65504;  // f16's largest finite value: no dtype may overflow
  for (uint64_t seed = 0; seed < 1500; ++seed) {
    RandomGraphOptions options = WithSeed(seed);
    std::string replay = DescribeRandomGraphOptions(options);
    auto graph = GenerateRandomGraph(options);
    ASSERT_TRUE(graph.ok()) << replay << ": " << graph.status().ToString();
    auto passed = RunGraphPasses(*graph, PassOptions{});
    ASSERT_TRUE(passed.ok()) << replay << ": " << passed.status().ToString();
    Graph probed = WithEveryFloatNodeAsOutput(*passed);
    auto outputs = RunReference(probed, RandomInputs(probed, seed * 131));
    ASSERT_TRUE(outputs.ok()) << replay << ": " << outputs.status().ToString();
    ASSERT_EQ(outputs->size(), probed.outputs().size());
    for (size_t i = 0; i < outputs->size(); ++i) {
      for (double v : (*outputs)[i].ToDoubles()) {
        ASSERT_TRUE(std::isfinite(v) && std::abs(v) < kHalfMax)
            << replay << ": value " << v << " in " << probed.outputs()[i].name << "\n" << PrintGraph(*passed);
      }
    }
  }
}

// A fused kernel rounds differently from the f64 reference; that must not change the
// outputs by more than a tolerance can absorb. Stand-in: nudge every input by about
// one f32 ulp and require the outputs to move little, in nearly every graph.
TEST(RandomGraphTest, OutputsBarelyMoveWhenInputsMoveByAnUlp) {
  const int kGraphs = 400;
  int sensitive = 0;
  for (uint64_t seed = 0; seed < kGraphs; ++seed) {
    auto graph = GenerateRandomGraph(WithSeed(seed));
    ASSERT_TRUE(graph.ok());
    std::vector<Tensor> inputs = RandomInputs(*graph, seed), nudged = RandomInputs(*graph, seed);
    for (Tensor& t : nudged)
      for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, t.GetDouble(i) * (1 + 3e-7 * (i % 3 - 1.0)));
    auto a = RunReference(*graph, inputs), b = RunReference(*graph, nudged);
    ASSERT_TRUE(a.ok() && b.ok());
    double worst = 0;
    for (size_t k = 0; k < a->size(); ++k) {
      std::vector<double> x = (*a)[k].ToDoubles(), y = (*b)[k].ToDoubles();
      for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]) / (1 + std::abs(x[i])));
    }
    if (worst > 1e-4) ++sensitive;
  }
  EXPECT_LE(sensitive, kGraphs / 50) << "graphs whose outputs amplify input rounding";
}

TEST(RandomGraphTest, SameSeedSameGraphOtherSeedOtherGraph) {
  std::set<std::string> distinct;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    auto first = GenerateRandomGraph(WithSeed(seed)), second = GenerateRandomGraph(WithSeed(seed));
    ASSERT_TRUE(first.ok() && second.ok());
    std::string text = PrintGraph(*first);
    EXPECT_EQ(text, PrintGraph(*second)) << "seed " << seed;
    distinct.insert(text);
  }
  EXPECT_GE(distinct.size(), 195u);
}

// ---- coverage: what 1000 graphs contain, read from the graphs themselves

// Skips the broadcasts and reshapes the builder inserts between a value and its use.
const Node& Underlying(const Graph& g, int id) {
  const Node* node = &g.node(id);
  while (node->op == OpCode::kBroadcast || node->op == OpCode::kReshape) node = &g.node(node->inputs[0]);
  return *node;
}

std::set<std::string> FeaturesOf(const Graph& g) {
  std::set<std::string> f;
  if (g.outputs().size() >= 2) f.insert("multiple outputs");
  for (int id : g.inputs()) f.insert(fmt::format("{} parameter", DTypeName(g.node(id).dtype)));
  for (const Node& n : g.nodes()) {
    f.insert(std::string(OpName(n.op)));
    f.insert(fmt::format("rank {}", n.rank()));
    auto input = [&](size_t i) -> const Node& { return Underlying(g, n.inputs[i]); };
    if (n.op == OpCode::kSlice)
      for (int64_t step : n.attrs.steps)
        if (step < 0) f.insert("negative-step slice");
    if (n.op == OpCode::kBroadcast) {
      const Node& in = g.node(n.inputs[0]);
      f.insert(in.rank() < n.rank() ? "rank-extending broadcast" : "size-1 broadcast");
    }
    if (n.op == OpCode::kConcat && n.inputs.size() == 3) f.insert("concat of 3");
    if (n.info().kind == OpKind::Reduction) {
      const Node& in = g.node(n.inputs[0]);
      f.insert(n.attrs.keepdims ? "keepdims" : "no keepdims");
      if (n.attrs.axes.front() == 0) f.insert("leading-axis reduction");
      if (n.attrs.axes.back() == in.rank() - 1) f.insert("trailing-axis reduction");
    }
    if (n.op == OpCode::kMatMul) {
      const Node &a = g.node(n.inputs[0]), &b = g.node(n.inputs[1]);
      if (n.rank() > 2) f.insert("batched matmul");
      if (n.rank() > 2 && a.shape != b.shape && (a.rank() != b.rank() || a.shape[0] != b.shape[0]))
        f.insert("broadcast-batch matmul");
    }
    if (n.op == OpCode::kExp && input(0).op == OpCode::kSub && input(0).inputs.size() == 2 &&
        Underlying(g, input(0).inputs[1]).op == OpCode::kReduceMax)
      f.insert("softmax pattern");
    if (n.op == OpCode::kRsqrt && input(0).op == OpCode::kAdd && input(0).inputs.size() == 2 &&
        Underlying(g, input(0).inputs[0]).op == OpCode::kReduceMean)
      f.insert("layer-norm pattern");
    if (n.op == OpCode::kWhere && input(0).op == OpCode::kGreaterEqual &&
        Underlying(g, input(0).inputs[0]).op == OpCode::kRandomUniform)
      f.insert("dropout pattern");
    if (n.op == OpCode::kWhere && input(0).info().result == ResultDType::Bool && input(0).inputs.size() == 2 &&
        (Underlying(g, input(0).inputs[0]).op == OpCode::kIota))
      f.insert("iota mask");
    if (n.op == OpCode::kCast && IsFloat(n.dtype) && IsFloat(g.node(n.inputs[0]).dtype)) f.insert("float cast");
    if (n.op == OpCode::kMatMul && n.rank() == 4 && input(0).op == OpCode::kTranspose) f.insert("multi-head attention pattern");
    if (n.op == OpCode::kAdd && g.node(n.inputs[0]).op == OpCode::kMatMul && input(1).op == OpCode::kConstant &&
        input(1).rank() == 1)
      f.insert("gemm-epilogue pattern");
    if (n.op == OpCode::kConv && n.attrs.group > 1) f.insert("depthwise conv");
  }
  return f;
}

TEST(RandomGraphTest, ThousandSeedsCoverEveryOpFamily) {
  std::map<std::string, int> seen;
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    auto graph = GenerateRandomGraph(WithSeed(seed));
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    for (const std::string& feature : FeaturesOf(*graph)) ++seen[feature];
  }
  const char* required[] = {
      "parameter", "constant", "iota", "random_uniform", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh",
      "sigmoid", "erf", "sin", "cos", "relu", "not", "cast", "add", "sub", "mul", "div", "pow", "max", "min",
      "and", "or", "xor", "equal", "less", "less_equal", "greater", "greater_equal", "where", "broadcast",
      "reshape", "transpose", "slice", "concat", "reduce_sum", "reduce_max", "reduce_min", "reduce_mean",
      "matmul", "negative-step slice", "rank-extending broadcast", "size-1 broadcast", "concat of 3",
      "keepdims", "no keepdims", "leading-axis reduction", "trailing-axis reduction", "batched matmul",
      "broadcast-batch matmul", "softmax pattern", "layer-norm pattern", "dropout pattern", "iota mask",
      "float cast", "multiple outputs", "f32 parameter", "f16 parameter", "bf16 parameter", "f64 parameter",
      "rank 0", "rank 1", "rank 2", "rank 3", "rank 4", "conv", "depthwise conv", "max_pool", "average_pool",
      "multi-head attention pattern", "gemm-epilogue pattern"};
  for (const char* feature : required) EXPECT_GE(seen[feature], 10) << "'" << feature << "' (almost) never generated";
  EXPECT_EQ(seen["rank 5"], 0) << "max_rank is 4";
}

// ---- options

std::set<OpCode> OpsOf(const RandomGraphOptions& base, int graphs) {
  std::set<OpCode> ops;
  for (int seed = 0; seed < graphs; ++seed) {
    RandomGraphOptions options = base;
    options.seed = seed;
    auto graph = GenerateRandomGraph(options);
    EXPECT_TRUE(graph.ok()) << DescribeRandomGraphOptions(options) << ": " << graph.status().ToString();
    if (!graph.ok()) continue;
    for (const Node& n : graph->nodes()) {
      ops.insert(n.op);
      EXPECT_LE(n.rank(), options.max_rank) << DescribeRandomGraphOptions(options);
      EXPECT_LE(NumElements(n.shape), options.max_elements) << DescribeRandomGraphOptions(options) << ": " << PrintNode(n);
      if (IsFloat(n.dtype)) {
        EXPECT_NE(std::find(options.dtypes.begin(), options.dtypes.end(), n.dtype), options.dtypes.end())
            << DescribeRandomGraphOptions(options) << ": " << PrintNode(n);
      }
    }
  }
  return ops;
}

TEST(RandomGraphTest, OptionsTurnOpFamiliesOff) {
  RandomGraphOptions options;
  options.dtypes = {DType::kF32};
  options.allow_matmul = options.allow_dropout = options.allow_reductions = options.allow_views = false;
  options.max_rank = 3;
  options.max_elements = 300;
  std::set<OpCode> ops = OpsOf(options, 300);
  for (OpCode banned : {OpCode::kMatMul, OpCode::kRandomUniform, OpCode::kReduceSum, OpCode::kReduceMax,
                        OpCode::kReduceMean, OpCode::kTranspose, OpCode::kSlice, OpCode::kConcat, OpCode::kReshape,
                        OpCode::kCast})
    EXPECT_EQ(ops.count(banned), 0u) << OpName(banned);
  EXPECT_TRUE(ops.count(OpCode::kWhere) && ops.count(OpCode::kAdd)) << "the rest still appears";
}

TEST(RandomGraphTest, NoCastsAndNoMasksMeansNoCastAndNoBoolNodes) {
  RandomGraphOptions options;
  options.dtypes = {DType::kF32, DType::kBF16};
  options.allow_casts = options.allow_masks = options.allow_dropout = false;
  std::set<OpCode> ops = OpsOf(options, 300);
  for (OpCode banned : {OpCode::kCast, OpCode::kIota, OpCode::kWhere, OpCode::kLess, OpCode::kGreaterEqual})
    EXPECT_EQ(ops.count(banned), 0u) << OpName(banned);
}

TEST(RandomGraphTest, SmallLimitsAreRespected) {
  RandomGraphOptions options;
  options.dtypes = {DType::kF32};
  options.max_rank = 2;
  options.max_elements = 64;
  std::set<OpCode> ops = OpsOf(options, 300);
  EXPECT_TRUE(ops.count(OpCode::kMatMul) && ops.count(OpCode::kReduceSum));
}

TEST(RandomGraphTest, BadOptionsAreRejectedAndDescribed) {
  RandomGraphOptions options;
  options.min_ops = 5;
  options.max_ops = 2;
  EXPECT_FALSE(GenerateRandomGraph(options).ok());
  options = {};
  options.dtypes = {};
  EXPECT_FALSE(GenerateRandomGraph(options).ok());
  options.dtypes = {DType::kI32};
  EXPECT_FALSE(GenerateRandomGraph(options).ok());

  options = {};
  options.seed = 42;
  options.allow_matmul = false;
  std::string line = DescribeRandomGraphOptions(options);
  EXPECT_NE(line.find("seed=42"), std::string::npos) << line;
  EXPECT_NE(line.find("without matmul"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
}

}  // namespace
}  // namespace tilefuse

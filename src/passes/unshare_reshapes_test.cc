#include "passes/unshare_reshapes.h"

#include <gtest/gtest.h>

#include "fusion/planner.h"
#include "passes/dce.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

// The LM head's two gradient products, as a training backward has them: both read the
// logits gradient reshaped to [tokens, vocabulary].
Graph LmHeadGradients(bool reshape_is_output) {
  GraphBuilder b;
  Value grad = b.Parameter("grad", DType::kF32, {2, 16, 40});
  Value h = b.Parameter("h", DType::kF32, {32, 24});
  Value w = b.Parameter("w", DType::kF32, {40, 24});
  Value flat = b.Reshape(grad, {32, 40});
  b.Output(b.MatMul(flat, w), "dh");
  b.Output(b.MatMul(b.Transpose(flat, {1, 0}), h), "dw");
  if (reshape_is_output) b.Output(flat, "flat");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

// Both graphs on the reference interpreter, the same random inputs: the same outputs.
void ExpectSameOutputs(const Graph& before, const Graph& after, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int id : before.inputs()) inputs.push_back(Tensor::Random(before.node(id).dtype, before.node(id).shape, seed + id));
  auto expected = RunReference(before, inputs);
  auto actual = RunReference(after, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (size_t i = 0; i < expected->size(); ++i) EXPECT_TRUE(CompareTensors((*actual)[i], (*expected)[i]).pass) << "output " << i;
}

TEST(UnshareReshapesTest, EachReaderGetsItsOwnReshapeAndTheValuesStay) {
  for (bool reshape_is_output : {false, true}) {
    Graph graph = LmHeadGradients(reshape_is_output);
    auto unshared = UnshareReshapes(graph);
    ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
    auto cleaned = EliminateDeadCode(*unshared);
    ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
    EXPECT_EQ(CountOps(*cleaned, OpCode::kReshape), reshape_is_output ? 3 : 2);
    std::vector<std::vector<int>> users = cleaned->ComputeUsers();
    for (const Node& n : cleaned->nodes())
      if (n.op == OpCode::kReshape) EXPECT_LE(users[n.id].size(), 1u);
    ExpectSameOutputs(graph, *cleaned, 10);
  }
}

// Opaque readers read stored operands: an attention backward call's three gradients share the
// reshaped logsumexp (one copy, one step), where a product beside them gets its own.
TEST(UnshareReshapesTest, OpaqueReadersShareTheView) {
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {1, 2, 8, 64});
  Value lse = b.Reshape(b.Parameter("lse", DType::kF32, {1, 2, 8, 1}), {1, 2, 8});
  for (OpCode op : {OpCode::kAttentionGradQ, OpCode::kAttentionGradK, OpCode::kAttentionGradV})
    b.Output(b.AttentionGrad(op, q, q, q, q, q, lse, 0.125, false), std::string(OpName(op)));
  b.Output(b.MatMul(lse, b.Parameter("w", DType::kF32, {8, 4})), "product");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto unshared = UnshareReshapes(*graph);
  ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
  auto cleaned = EliminateDeadCode(*unshared);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(CountOps(*cleaned, OpCode::kReshape), 2);
  const std::vector<std::vector<int>> users = cleaned->ComputeUsers();
  for (const Node& n : cleaned->nodes())
    if (n.op == OpCode::kReshape) EXPECT_TRUE(users[n.id].size() == 3 || users[n.id].size() == 1) << users[n.id].size();
}

// Planned, no group stores the reshaped input for another: each product reads the input.
TEST(UnshareReshapesTest, NoGroupStoresTheReshapedInput) {
  auto graph = RunGraphPasses(LmHeadGradients(false), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const FusionGroup& g : plan->groups)
    for (int out : g.outputs) EXPECT_NE(graph->node(out).op, OpCode::kReshape) << "group " << g.id << " stores a reshape";
  EXPECT_EQ(plan->groups.size(), 2u);
}

// A LLaMA-style layer's q, k and v products read its RMS norm through one reshape to
// [tokens, hidden]: each product takes its own, and no group stores the norm reshaped (the
// first product's prologue had copied it for the other two). A reshape of a view (here a
// transpose) stays shared: each reader would compute the view again.
TEST(UnshareReshapesTest, ProductsOfOneNormReadItWhereItLiesAndViewsStayShared) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {2, 16, 32});
  Value gamma = b.Parameter("gamma", DType::kF32, {32});
  Value mean = b.Reduce(OpCode::kReduceMean, b.Mul(x, x), {2}, true);
  Value norm = b.Mul(b.Mul(x, b.Unary(OpCode::kRsqrt, b.AddScalar(mean, 1e-6))), gamma);
  Value flat = b.Reshape(norm, {32, 32});
  for (const char* name : {"q", "k", "v"}) b.Output(b.MatMul(flat, b.Parameter(std::string("w") + name, DType::kF32, {32, 24})), name);
  Value viewed = b.Reshape(b.Transpose(x, {0, 2, 1}), {64, 16});
  b.Output(b.MatMul(viewed, b.Parameter("u", DType::kF32, {16, 8})), "a");
  b.Output(b.MatMul(viewed, b.Parameter("t", DType::kF32, {16, 8})), "b");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto unshared = UnshareReshapes(*built);
  ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
  auto cleaned = EliminateDeadCode(*unshared);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(CountOps(*cleaned, OpCode::kReshape), 4);  // three of the norm, one of the transpose
  ExpectSameOutputs(*built, *cleaned, 20);

  auto passed = RunGraphPasses(*built, PassOptions{});
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  auto plan = PlanFusion(*passed, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const FusionGroup& g : plan->groups)
    for (int out : g.outputs)
      if (passed->node(out).op == OpCode::kReshape)
        EXPECT_EQ(passed->node(passed->node(out).inputs[0]).op, OpCode::kTranspose) << "group " << g.id << " stores the norm reshaped";
}

// A table broadcast over heads (through a reshape) for two readers, as rotary embeddings' cos
// for q and k: each reader gets its own reshape and broadcast of the input, and planned, no
// group stores the broadcast for the other.
TEST(UnshareReshapesTest, EachReaderBroadcastsTheTableItself) {
  GraphBuilder b;
  Value cos = b.Parameter("cos", DType::kF32, {1, 1, 16, 8});
  Value q = b.Parameter("q", DType::kF32, {1, 16, 4, 8});
  Value k = b.Parameter("k", DType::kF32, {1, 16, 4, 8});
  Value table = b.BroadcastTo(b.Reshape(cos, {1, 16, 1, 8}), {1, 16, 4, 8});
  b.Output(b.Unary(OpCode::kTanh, b.Mul(q, table)), "q_out");
  b.Output(b.Reduce(OpCode::kReduceSum, b.Mul(k, table), {3}, false), "k_out");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto unshared = UnshareReshapes(*built);
  ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
  auto cleaned = EliminateDeadCode(*unshared);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(CountOps(*cleaned, OpCode::kBroadcast), 2);
  EXPECT_EQ(CountOps(*cleaned, OpCode::kReshape), 2);
  std::vector<std::vector<int>> users = cleaned->ComputeUsers();
  for (const Node& n : cleaned->nodes())
    if (n.op == OpCode::kBroadcast || n.op == OpCode::kReshape) EXPECT_EQ(users[n.id].size(), 1u);
  ExpectSameOutputs(*built, *cleaned, 30);

  auto passed = RunGraphPasses(*built, PassOptions{});
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  auto plan = PlanFusion(*passed, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->groups.size(), 2u);
  for (const FusionGroup& g : plan->groups)
    for (int out : g.outputs) EXPECT_NE(passed->node(out).op, OpCode::kBroadcast) << "group " << g.id << " stores the broadcast";
}

}  // namespace
}  // namespace tilefuse

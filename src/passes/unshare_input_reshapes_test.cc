#include "passes/unshare_input_reshapes.h"

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

TEST(UnshareInputReshapesTest, EachReaderGetsItsOwnReshapeAndTheValuesStay) {
  for (bool reshape_is_output : {false, true}) {
    Graph graph = LmHeadGradients(reshape_is_output);
    auto unshared = UnshareInputReshapes(graph);
    ASSERT_TRUE(unshared.ok()) << unshared.status().ToString();
    auto cleaned = EliminateDeadCode(*unshared);
    ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
    EXPECT_EQ(CountOps(*cleaned, OpCode::kReshape), reshape_is_output ? 3 : 2);
    std::vector<std::vector<int>> users = cleaned->ComputeUsers();
    for (const Node& n : cleaned->nodes())
      if (n.op == OpCode::kReshape) EXPECT_LE(users[n.id].size(), 1u);
    std::vector<Tensor> inputs;
    for (int id : graph.inputs()) inputs.push_back(Tensor::Random(DType::kF32, graph.node(id).shape, 10 + id));
    auto expected = RunReference(graph, inputs);
    auto actual = RunReference(*cleaned, inputs);
    ASSERT_TRUE(expected.ok() && actual.ok());
    for (size_t i = 0; i < expected->size(); ++i) EXPECT_TRUE(CompareTensors((*actual)[i], (*expected)[i]).pass);
  }
}

// Planned, no group stores the reshaped input for another: each product reads the input.
TEST(UnshareInputReshapesTest, NoGroupStoresTheReshapedInput) {
  auto graph = RunGraphPasses(LmHeadGradients(false), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (const FusionGroup& g : plan->groups)
    for (int out : g.outputs) EXPECT_NE(graph->node(out).op, OpCode::kReshape) << "group " << g.id << " stores a reshape";
  EXPECT_EQ(plan->groups.size(), 2u);
}

}  // namespace
}  // namespace tilefuse

// The plans of a model file's bindings: found for a graph of the same structure at other sizes,
// not for another structure or other options, and compiled where found (ModelFile on the CPU).
#include "api/binding_plans.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "api/model_inputs.h"
#include "fusion/planner.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"
#include "tilefuse/tilefuse.h"

namespace tilefuse {
namespace {

// exp(x + b) then a softmax over the last axis, x [rows, 8] ("+ 1" on x instead: another structure).
Graph RowsGraph(int64_t rows, bool plus_one = false) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {rows, 8});
  Value y = plus_one ? b.Add(x, b.Scalar(1, DType::kF32)) : b.Add(x, b.Parameter("b", DType::kF32, {8}));
  b.Output(b.Softmax(b.Unary(OpCode::kExp, y), 1), "y");
  StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  StatusOr<Graph> passed = CompiledModel::RunPasses(std::move(graph).value(), ModelOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

FusionPlan PlanOf(const Graph& graph) {
  StatusOr<FusionPlan> plan = PlanFusion(graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return std::move(plan).value();
}

TEST(BindingPlans, AreFoundForTheSameStructureAtOtherSizesOnly) {
  BindingPlans::State plans;
  const Graph small = RowsGraph(3), large = RowsGraph(1000), other = RowsGraph(3, true);
  ASSERT_EQ(GraphStructure(small), GraphStructure(large));
  ASSERT_NE(GraphStructure(small), GraphStructure(other));
  EXPECT_FALSE(plans.Find(large, "cpu").has_value());
  const FusionPlan plan = PlanOf(small);
  plans.Remember(small, "cpu", "cpu", plan);
  std::optional<CachedCompile> found = plans.Find(large, "cpu");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->backend, "cpu");
  EXPECT_EQ(found->plan.group_of, plan.group_of);
  EXPECT_FALSE(plans.Find(large, "cuda").has_value());  // other options plan otherwise
  EXPECT_FALSE(plans.Find(other, "cpu").has_value());
}

TEST(BindingPlans, AreNotFoundWhereTheNewGraphFailsTheirVerification) {
  BindingPlans::State plans;
  const Graph graph = RowsGraph(4);
  FusionPlan plan = PlanOf(graph);
  ASSERT_GE(plan.groups.size(), 1u);
  plan.groups[0].kind = GroupKind::kGemm;  // a plan of the right form that does not fit the graph
  plans.Remember(graph, "cpu", "cpu", plan);
  EXPECT_FALSE(plans.Find(RowsGraph(9), "cpu").has_value());
}

// A model file's second binding compiles the first's plan, and runs as the reference does.
TEST(BindingPlans, AModelFileSecondBindingCompilesTheFirstsPlan) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "tilefuse_binding_plans.onnxtxt";
  std::ofstream(path) << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                         "g (float[n, 16] x, float[16] b) => (float[n, 16] y) {\n"
                         "  t = Add (x, b)\n  e = Exp (t)\n  y = Softmax <axis = -1> (e)\n}\n";
  StatusOr<std::shared_ptr<ModelFile>> file = ModelFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ModelOptions options;
  options.backend = "cpu";
  // A cache of its own: the compiled-model cache of an earlier run would answer before the plans.
  const std::filesystem::path cache = std::filesystem::temp_directory_path() / ("tilefuse_binding_plans_" + std::to_string(::getpid()));
  options.cache_dir = cache.string();
  for (int64_t n : {5, 700}) {
    options.dims = {{"n", n}};
    StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromModelFile(**file, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    bool reused = false;
    for (const auto& [stage, ms] : (*model)->compile_stages_ms()) reused |= stage.starts_with("plan of an earlier binding");
    EXPECT_EQ(reused, n == 700) << "n = " << n;
    StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 11);
    ASSERT_TRUE(inputs.ok());
    StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
    StatusOr<std::vector<Tensor>> expected = RunReference((*model)->graph(), *inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    ASSERT_TRUE(expected.ok());
    Comparison c = CompareWithReference((*actual)[0], (*expected)[0]);
    EXPECT_TRUE(c.pass) << c.reason;
  }
  std::filesystem::remove_all(cache);
}

}  // namespace
}  // namespace tilefuse

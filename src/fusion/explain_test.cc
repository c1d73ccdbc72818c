// The planner through the user's path: the ONNX text examples (written from primitives
// and with composite ops) and the real exported models, rendered by explain.
#include "fusion/explain.h"

#include <gtest/gtest.h>

#include "frontend/onnx/importer.h"
#include "fusion/plan_verifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

struct Planned {
  Graph graph;
  FusionPlan plan;
};

Planned PlanModel(const std::string& relative_path) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/" + relative_path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, PlannerOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  Status verified = VerifyPlan(*graph, *plan);
  EXPECT_TRUE(verified.ok()) << verified.ToString();
  return {std::move(graph).value(), std::move(plan).value()};
}

struct ExampleCase {
  const char* file;
  std::vector<const char*> kinds;
};

class ExamplePlanTest : public testing::TestWithParam<ExampleCase> {};

TEST_P(ExamplePlanTest, PlansToTheExpectedKernels) {
  Planned p = PlanModel(std::string("examples/") + GetParam().file);
  nlohmann::json json = ExplainJson(p.graph, p.plan);
  std::vector<std::string> kinds;
  for (const auto& group : json["groups"]) kinds.push_back(group["kind"]);
  EXPECT_EQ(kinds, std::vector<std::string>(GetParam().kinds.begin(), GetParam().kinds.end()));
  EXPECT_EQ(json["fused_kernels"], kinds.size());
  EXPECT_GT(json["unfused_kernels"].get<int>(), static_cast<int>(kinds.size()));
  EXPECT_LT(json["predicted_us"].get<double>(), json["unfused_predicted_us"].get<double>());
}

INSTANTIATE_TEST_SUITE_P(
    Examples, ExamplePlanTest,
    testing::Values(ExampleCase{"gelu_manual.onnxtxt", {"pointwise"}},
                    ExampleCase{"gelu_composite.onnxtxt", {"pointwise"}},
                    ExampleCase{"softmax_manual.onnxtxt", {"row_reduction"}},
                    ExampleCase{"softmax_composite.onnxtxt", {"row_reduction"}},
                    ExampleCase{"layernorm_manual.onnxtxt", {"row_reduction"}},
                    ExampleCase{"layernorm_composite.onnxtxt", {"row_reduction"}},
                    ExampleCase{"rmsnorm.onnxtxt", {"row_reduction"}},
                    ExampleCase{"matmul_bias_relu.onnxtxt", {"gemm"}},
                    ExampleCase{"matmul_add_add.onnxtxt", {"gemm"}},
                    ExampleCase{"causal_attention.onnxtxt", {"attention"}},
                    ExampleCase{"dropout_residual_layernorm.onnxtxt", {"row_reduction"}},
                    ExampleCase{"mlp_block.onnxtxt", {"row_reduction", "gemm", "gemm"}}),
    [](const testing::TestParamInfo<ExampleCase>& info) {
      std::string name = info.param.file;
      return name.substr(0, name.find('.'));
    });

TEST(ExplainTest, RealModelsFindTheirAttention) {
  for (const char* model : {"attention_block", "gpt2_2layer", "llama_2layer"}) {
    Planned p = PlanModel(std::string("tests/models/") + model);
    int attention = 0;
    for (const FusionGroup& g : p.plan.groups) attention += g.kind == GroupKind::kAttention;
    EXPECT_GE(attention, 1) << model;
  }
}

Planned PlanText(const std::string& signature, const std::string& body) {
  PlannedText p = PlanOnnxText(signature, body);
  return {std::move(p.graph), std::move(p.plan)};
}

// An attention whose N×N probabilities or scores are needed outside it is not claimed
// (its intermediates must be stored), and explain says so; other matmuls are not listed.
TEST(ExplainTest, AttentionNotMatchedSaysWhy) {
  const std::string body =
      "  k_t = Transpose <perm = [0, 1, 3, 2]> (k)\n  scores = MatMul (q, k_t)\n  probs = Softmax <axis = -1> (scores)\n"
      "  out = MatMul (probs, v)\n";
  Planned output = PlanText("g (float[1,2,64,32] q, float[1,2,64,32] k, float[1,2,64,32] v) => (float[1,2,64,32] out, float[1,2,64,64] probs)", body);
  for (const FusionGroup& g : output.plan.groups) EXPECT_NE(g.kind, GroupKind::kAttention);
  std::string text = ExplainText(output.graph, output.plan);
  EXPECT_NE(text.find("attention not matched at matmul %"), std::string::npos) << text;
  EXPECT_NE(text.find("is a graph output: its N×N values would have to be stored"), std::string::npos) << text;
  EXPECT_EQ(ExplainJson(output.graph, output.plan)["missed_attention"].size(), 1u);

  Planned read = PlanText("g (float[1,2,64,32] q, float[1,2,64,32] k, float[1,2,64,32] v) => (float[1,2,64,32] out, float[1,2,64] m)",
                          body + "  m = ReduceMax <axes = [-1], keepdims = 0> (scores)\n");
  EXPECT_NE(ExplainText(read.graph, read.plan).find("are also read by reduce_max"), std::string::npos) << ExplainText(read.graph, read.plan);

  Planned mlp = PlanModel("examples/mlp_block.onnxtxt");
  EXPECT_TRUE(mlp.plan.missed_attention.empty());
}

TEST(ExplainTest, TextNamesOnnxNodesAndRejections) {
  Planned p = PlanModel("examples/mlp_block.onnxtxt");
  std::string text = ExplainText(p.graph, p.plan);
  EXPECT_NE(text.find("group 0 row_reduction"), std::string::npos) << text;
  EXPECT_NE(text.find("not merged with group 1: a gemm group cannot hold a reduction"), std::string::npos) << text;
  EXPECT_NE(text.find("19 kernels unfused -> 3 fused"), std::string::npos) << text;
}

TEST(ExplainTest, JsonHasTheDocumentedFields) {
  Planned p = PlanModel("examples/mlp_block.onnxtxt");
  nlohmann::json json = ExplainJson(p.graph, p.plan);
  for (const char* key : {"device", "unfused_kernels", "fused_kernels", "groups", "rejected"}) EXPECT_TRUE(json.contains(key)) << key;
  for (const auto& group : json["groups"])
    for (const char* key : {"id", "kind", "nodes", "predicted_us", "unfused_predicted_us"}) EXPECT_TRUE(group.contains(key)) << key;
  ASSERT_FALSE(json["rejected"].empty());
  for (const auto& r : json["rejected"]) EXPECT_FALSE(r["reason"].get<std::string>().empty());
}

TEST(ExplainTest, DotHasOneClusterPerGroup) {
  Planned p = PlanModel("examples/mlp_block.onnxtxt");
  std::string dot = ExplainDot(p.graph, p.plan);
  size_t clusters = 0;
  for (size_t at = dot.find("subgraph cluster_"); at != std::string::npos; at = dot.find("subgraph cluster_", at + 1)) ++clusters;
  EXPECT_EQ(clusters, p.plan.groups.size());
  EXPECT_EQ(dot.rfind("}\n"), dot.size() - 2);
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// GELU written out: its constants reach the group as broadcast generators, recomputed in
// the kernel. The group reads x (64 Mi bf16 elements) and writes y, nothing more.
TEST(ExplainBytesTest, GeneratorsAreNotCountedAsReads) {
  Planned p = PlanModel("bench/cases/gelu_tanh_bf16.onnxtxt");
  ASSERT_EQ(p.plan.groups.size(), 1u);
  nlohmann::json j = ExplainJson(p.graph, p.plan);
  const double tensor = 16384.0 * 4096 * 2;
  EXPECT_EQ(j["groups"][0]["bytes_in"].get<double>(), tensor);
  EXPECT_EQ(j["groups"][0]["bytes_out"].get<double>(), tensor);
}

}  // namespace
}  // namespace tilefuse

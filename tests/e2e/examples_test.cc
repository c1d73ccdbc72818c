// Every examples/*.onnxtxt imports, loses its composite ops in the passes, and computes
// the same as before the passes. A few examples are also checked against values
// computed here by hand from their formulas, so the examples mean what they say.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "reference/interpreter.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "testing/random_inputs.h"

namespace tilefuse {
namespace {

namespace fs = std::filesystem;

std::string ExamplePath(const std::string& name) {
  return std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name + ".onnxtxt";
}

std::vector<std::string> ExampleNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(std::string(TILEFUSE_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() == ".onnxtxt") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// f32 results of a decomposed graph round at every node; the composite rounds once. In
// mlp_block those rounding differences pass through two matmuls (K = 256, 1024) into
// outputs of magnitude ~75, hence the absolute tolerance.
void ExpectClose(const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  ASSERT_EQ(actual.shape(), expected.shape());
  ASSERT_EQ(actual.dtype(), expected.dtype());
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    double a = actual.GetDouble(i), e = expected.GetDouble(i);
    ASSERT_LE(std::fabs(a - e), atol + rtol * std::fabs(e)) << "element " << i << ": " << a << " vs " << e;
  }
}

class ExampleTest : public testing::TestWithParam<std::string> {};

TEST_P(ExampleTest, ImportsDecomposesAndAgreesWithTheGraphBeforePasses) {
  StatusOr<ImportedModel> imported = ImportOnnx(ExamplePath(GetParam()));
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(imported->graph, PassOptions{});
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  for (const Node& node : passed->nodes()) {
    EXPECT_NE(node.info().kind, OpKind::Composite) << node.name << " " << node.info().name;
  }
  std::vector<Tensor> inputs = RandomInputs(imported->graph, 11);
  StatusOr<std::vector<Tensor>> before = RunReference(imported->graph, inputs);
  StatusOr<std::vector<Tensor>> after = RunReference(*passed, inputs);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(before->size(), after->size());
  for (size_t i = 0; i < before->size(); ++i) ExpectClose((*after)[i], (*before)[i], 1e-3, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleTest, testing::ValuesIn(ExampleNames()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

// Runs an example (after the passes) on the given inputs.
std::vector<Tensor> RunExample(const std::string& name, const std::vector<Tensor>& inputs) {
  StatusOr<ImportedModel> imported = ImportOnnx(ExamplePath(name));
  EXPECT_TRUE(imported.ok()) << imported.status().ToString();
  if (!imported.ok()) return {};
  StatusOr<Graph> passed = RunGraphPasses(imported->graph, PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  if (!passed.ok()) return {};
  StatusOr<std::vector<Tensor>> outputs = RunReference(*passed, inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().ToString();
  return outputs.ok() ? *outputs : std::vector<Tensor>{};
}

TEST(ExampleValues, GeluManualFollowsTheTanhFormula) {
  Tensor x = Tensor::Random(DType::kF32, {64, 512}, 3);
  std::vector<Tensor> y = RunExample("gelu_manual", {x});
  ASSERT_EQ(y.size(), 1u);
  for (int64_t i = 0; i < x.num_elements(); i += 97) {
    double v = x.GetDouble(i);
    double want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(y[0].GetDouble(i), want, 1e-6) << i;
  }
}

TEST(ExampleValues, SoftmaxManualRowsAreNormalizedExponentials) {
  Tensor x = Tensor::Random(DType::kF32, {64, 512}, 4);
  std::vector<Tensor> y = RunExample("softmax_manual", {x});
  ASSERT_EQ(y.size(), 1u);
  for (int64_t row = 0; row < 64; row += 9) {
    double denominator = 0;
    for (int64_t c = 0; c < 512; ++c) denominator += std::exp(x.GetDouble(row * 512 + c));
    for (int64_t c = 0; c < 512; c += 31) {
      double want = std::exp(x.GetDouble(row * 512 + c)) / denominator;
      EXPECT_NEAR(y[0].GetDouble(row * 512 + c), want, 1e-3 * want) << row << "," << c;
    }
  }
}

TEST(ExampleValues, MatmulBiasReluIsALinearLayer) {
  Tensor x = Tensor::Random(DType::kF32, {64, 256}, 5);
  Tensor w = Tensor::Random(DType::kF32, {256, 512}, 6);
  Tensor b = Tensor::Random(DType::kF32, {512}, 7);
  std::vector<Tensor> y = RunExample("matmul_bias_relu", {x, w, b});
  ASSERT_EQ(y.size(), 1u);
  for (int64_t i = 0; i < 64; i += 13) {
    for (int64_t j = 0; j < 512; j += 37) {
      double acc = b.GetDouble(j);
      for (int64_t k = 0; k < 256; ++k) acc += x.GetDouble(i * 256 + k) * w.GetDouble(k * 512 + j);
      EXPECT_NEAR(y[0].GetDouble(i * 512 + j), std::max(acc, 0.0), 1e-4) << i << "," << j;
    }
  }
}

TEST(ExampleValues, RmsnormScalesRowsToUnitRootMeanSquare) {
  Tensor x = Tensor::Random(DType::kF32, {64, 512}, 8);
  Tensor weight = Tensor::FromDoubles(DType::kF32, {512}, std::vector<double>(512, 1.0));
  std::vector<Tensor> y = RunExample("rmsnorm", {x, weight});
  ASSERT_EQ(y.size(), 1u);
  // With unit weights every output row has root mean square sqrt(ms / (ms + eps)) ~ 1.
  for (int64_t row = 0; row < 64; ++row) {
    double in_ms = 0, out_ms = 0;
    for (int64_t c = 0; c < 512; ++c) {
      in_ms += x.GetDouble(row * 512 + c) * x.GetDouble(row * 512 + c) / 512;
      out_ms += y[0].GetDouble(row * 512 + c) * y[0].GetDouble(row * 512 + c) / 512;
    }
    EXPECT_NEAR(out_ms, in_ms / (in_ms + 1e-6), 1e-5) << row;
  }
}

TEST(ExampleValues, CausalAttentionFirstQueryOnlySeesTheFirstKey) {
  Tensor q = Tensor::Random(DType::kF32, {2, 4, 64, 32}, 9);
  Tensor k = Tensor::Random(DType::kF32, {2, 4, 64, 32}, 10);
  Tensor v = Tensor::Random(DType::kF32, {2, 4, 64, 32}, 11);
  std::vector<Tensor> out = RunExample("causal_attention", {q, k, v});
  ASSERT_EQ(out.size(), 1u);
  // Position 0 of every (batch, head) attends only to key 0, so its output is v[..., 0, :].
  for (int64_t bh = 0; bh < 8; ++bh) {
    for (int64_t d = 0; d < 32; ++d) {
      int64_t index = bh * 64 * 32 + d;
      EXPECT_NEAR(out[0].GetDouble(index), v.GetDouble(index), 1e-6) << bh << "," << d;
    }
  }
}

}  // namespace
}  // namespace tilefuse

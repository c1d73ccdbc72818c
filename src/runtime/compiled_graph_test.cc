// Every example, convolution case (tests/conv) and real model, compiled for the CPU (fused, and with --no-fusion),
// must match the f64 reference interpreter on fresh random inputs, with kernel
// outputs poisoned beforehand so an unwritten element fails.
#include "runtime/compiled_graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/cpu/interpreter.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "support/tensor_compare.h"

namespace tilefuse {
namespace {

// Norm-wise bounds (support/tensor_compare.h): a matmul's rounding error grows with the
// terms it sums, not with the result. f32 kernels vs the f64 reference: rtol 1e-4, atol
// 1e-5 of the tensor's largest magnitude.
void ExpectClose(const Tensor& actual, const Tensor& expected, const std::string& what) {
  Tolerance tol{1e-4, 1e-5};
  if (expected.dtype() == DType::kF64) tol = {1e-9, 1e-12};
  if (expected.dtype() == DType::kF16 || expected.dtype() == DType::kBF16) tol = {2e-2, 2e-2};
  if (!IsFloat(expected.dtype())) tol = {0, 0};
  Comparison c = CompareNormwise(actual, expected, tol);
  EXPECT_TRUE(c.pass) << what << ": " << c.reason;
}

void CompileAndCheck(const std::string& path, bool fuse) {
  auto model = ImportOnnx(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CompileOptions options;
  options.fuse = fuse;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompiledGraph::Compile(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph->inputs().size(); ++i) {
    const Node& p = graph->node(graph->inputs()[i]);
    Tensor t = Tensor::Random(p.dtype, p.shape, 1000 + i);
    if (!IsFloat(p.dtype)) t = Tensor(p.dtype, p.shape);  // token ids: 0 is always valid
    inputs.push_back(t);
  }
  auto expected = RunReference(*graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t i = 0; i < expected->size(); ++i) ExpectClose((*actual)[i], (*expected)[i], path + " output " + std::to_string(i));
}

class CompiledExampleTest : public testing::TestWithParam<std::string> {};

TEST_P(CompiledExampleTest, FusedMatchesReference) { CompileAndCheck(GetParam(), true); }
TEST_P(CompiledExampleTest, UnfusedMatchesReference) { CompileAndCheck(GetParam(), false); }

std::vector<std::string> Models() {
  std::vector<std::string> paths;
  std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* folder : {"/examples", "/tests/conv"})
    for (const auto& e : std::filesystem::directory_iterator(root + folder))
      if (e.path().extension() == ".onnxtxt") paths.push_back(e.path().string());
  for (const char* m : {"mlp_block", "attention_block", "gpt2_2layer", "llama_2layer"}) paths.push_back(root + "/tests/models/" + m);
  std::sort(paths.begin(), paths.end());
  return paths;
}

INSTANTIATE_TEST_SUITE_P(Models, CompiledExampleTest, testing::ValuesIn(Models()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::filesystem::path path(info.param);
                           bool example = path.extension() == ".onnxtxt";
                           return (example ? "example_" : "model_") + path.stem().string();
                         });

}  // namespace
}  // namespace tilefuse

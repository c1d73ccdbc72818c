// The public facade (tilefuse/tilefuse.h) as a library user meets it: compile an example on
// the CPU, run it on host tensors, compare with the reference interpreter; and the errors a
// user can cause (a bad path, a wrong word, a GPU ordinal the machine lacks, wrong inputs).
#include "tilefuse/tilefuse.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/model_inputs.h"
#include "backend/cuda/cuda_driver.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

std::string Example(const std::string& name) { return std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name; }

ModelOptions CpuOptions() {
  ModelOptions options;
  options.backend = "cpu";
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  return options;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CompiledModel, RunsAnExampleOnTheCpuAsTheReferenceDoes) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->backend(), "cpu");
  EXPECT_FALSE((*model)->kernels().empty());
  StatusOr<ImportedModel> imported = LoadModel(Example("layernorm_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs(imported->graph, 3);
  ASSERT_TRUE(inputs.ok());
  StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
  StatusOr<std::vector<Tensor>> expected = RunReference(imported->graph, *inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < actual->size(); ++i) {
    Comparison c = CompareWithReference((*actual)[i], (*expected)[i]);
    EXPECT_TRUE(c.pass) << c.reason;
  }
}

// The same on GPU 0 where there is one (skipped, saying why, elsewhere); the ordinal after
// the last GPU is refused naming the count the driver gave.
TEST(CompiledModel, RunsAnExampleOnTheGpuAsTheReferenceDoes) {
  ModelOptions options;
  options.backend = "cuda";
  options.poison_outputs = true;
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), options);
  if (!model.ok() && model.status().code() == StatusCode::kNotFound) GTEST_SKIP() << "no GPU: " << model.status().ToString();
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->backend(), "cuda");
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 5);
  ASSERT_TRUE(inputs.ok());
  StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
  StatusOr<std::vector<Tensor>> expected = RunReference((*model)->graph(), *inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  ASSERT_TRUE(expected.ok());
  for (size_t i = 0; i < actual->size(); ++i) {
    Comparison c = CompareWithReference((*actual)[i], (*expected)[i]);
    EXPECT_TRUE(c.pass) << c.reason;
  }
  StatusOr<int> count = CudaDeviceCount();
  ASSERT_TRUE(count.ok()) << count.status().ToString();
  options.device = *count;
  StatusOr<std::unique_ptr<CompiledModel>> past_the_last = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), options);
  ASSERT_FALSE(past_the_last.ok());
  EXPECT_EQ(past_the_last.status().message(),
            "there is no GPU " + std::to_string(*count) + ": this machine has " + std::to_string(*count) +
                " CUDA GPU(s) (numbered from 0)");
}

TEST(CompiledModel, NamesEachTimedKernel) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 0);
  ASSERT_TRUE(inputs.ok());
  std::vector<KernelRunTime> timings;
  ASSERT_TRUE((*model)->Run(*inputs, &timings).ok());
  ASSERT_EQ(timings.size(), (*model)->kernels().size());
  EXPECT_EQ(timings[0].name, (*model)->kernels()[0].name);
}

TEST(CompiledModel, ReferenceBackendFromAGraphIsTheInterpreter) {
  StatusOr<ImportedModel> imported = LoadModel(Example("gelu_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  ModelOptions options;
  options.backend = "reference";
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromGraph(imported->graph, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->backend(), "reference");
  EXPECT_TRUE((*model)->kernels().empty());
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs(imported->graph, 1);
  ASSERT_TRUE(inputs.ok());
  StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
  StatusOr<std::vector<Tensor>> expected = RunReference(imported->graph, *inputs);
  ASSERT_TRUE(actual.ok() && expected.ok());
  EXPECT_TRUE(CompareTensors((*actual)[0], (*expected)[0]).pass);
  Status device_run = (*model)->RunOnDevice({}, {}, 0);
  EXPECT_EQ(device_run.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(device_run.message(), "it runs on reference")) << device_run.message();
}

TEST(CompiledModel, CompilesSerializedBytes) {
  std::ifstream file(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/mobilenetv3_block/model.onnx", std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  ASSERT_FALSE(bytes.str().empty());
  ModelOptions options;
  options.backend = "reference";
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromBytes(bytes.str(), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE((*model)->inputs().empty());
  StatusOr<std::unique_ptr<CompiledModel>> garbage = CompiledModel::FromBytes("not a model", options);
  EXPECT_FALSE(garbage.ok());
}

TEST(CompiledModel, MissingPathIsNotFoundNamingIt) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile("/no/such/model.onnx", CpuOptions());
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(model.status().message(), "model '/no/such/model.onnx' does not exist");
}

TEST(CompiledModel, UnknownWordsAreRefusedNamingTheChoices) {
  ModelOptions options = CpuOptions();
  options.backend = "tpu";
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), "backend 'tpu' is not one of auto, cuda, cpu, reference");
  options = CpuOptions();
  options.precision = "medium";
  model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), "precision 'medium' is not one of highest, high");
}

TEST(CompiledModel, AGpuOrdinalTheMachineLacksIsAnErrorNamingTheCount) {
  for (const char* backend : {"cuda", "auto"}) {
    ModelOptions options;
    options.backend = backend;
    options.device = 4096;  // more GPUs than any machine has
    StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
    ASSERT_FALSE(model.ok()) << backend;
    EXPECT_EQ(model.status().code(), StatusCode::kNotFound);
    // "... has 0 usable CUDA GPUs: no CUDA driver ..." here; "... has 8 CUDA GPU(s) ..." on a GPU machine.
    EXPECT_TRUE(Contains(model.status().message(), "there is no GPU 4096: this machine has ")) << model.status().message();
    EXPECT_TRUE(Contains(model.status().message(), "CUDA GPU")) << model.status().message();
  }
}

TEST(CompiledModel, HostBackendsRefuseAGpuOrdinalButTakeTheDefault) {
  ModelOptions options = CpuOptions();
  options.device = 1;
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(model.status().message(), "device 1 names a GPU, but backend 'cpu' runs on the host"));
  options.device = -1;
  model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_FALSE(model.ok());
  EXPECT_TRUE(Contains(model.status().message(), "device -1 is not a GPU ordinal")) << model.status().message();
  options.device = 0;
  model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->device(), 0);
}

TEST(CompiledModel, WrongInputsNameTheInputAndTheirSource) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> run = (*model)->Run({Tensor(DType::kF32, {3})});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(run.status().message(), "but the call provides f32[3]")) << run.status().message();
}

TEST(CompiledModel, ExplainsThePlanWithItsReasons) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("mlp_block.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::string> text = (*model)->Explain();
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_TRUE(Contains(*text, "gemm")) << *text;
  StatusOr<std::string> json = (*model)->Explain(ExplainFormat::kJson, "h200");
  ASSERT_TRUE(json.ok());
  EXPECT_FALSE(nlohmann::json::parse(*json)["groups"].empty());
  StatusOr<std::string> unknown = (*model)->Explain(ExplainFormat::kText, "a100");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(Contains(unknown.status().message(), "unknown device 'a100'"));
}

}  // namespace
}  // namespace tilefuse

// The public facade (tilefuse/tilefuse.h) as a library user meets it: compile an example on
// the CPU, run it on host tensors, compare with the reference interpreter; and the errors a
// user can cause (a bad path, a wrong word, a GPU ordinal the machine lacks, wrong inputs).
// Then what the CLI's commands ask of it: benchmarks, emitted sources, a CUDA build without
// a GPU, explain, demo's checks and tuning.
#include "tilefuse/tilefuse.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/model_inputs.h"
#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/device_constants.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

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

// The bindings a model file compiles (a decode loop's past lengths) share its weights on the
// GPU: the second binding uploads none.
TEST(CompiledModel, BindingsOfAModelFileShareTheirWeightsOnTheGpu) {
  StatusOr<CudaDevice*> device = CudaDevice::Get(0);
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString();
  std::string weights;
  for (int i = 0; i < 1024; ++i) weights += (i ? ", " : "") + std::to_string(0.5 + i % 7);
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "tilefuse_shared_weights.onnxtxt";
  std::ofstream(path) << "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                         "g (float[n, 1024] x) => (float[n, 1024] y) <float[1024] w = {" << weights << "}> {\n"
                         "  t = Mul (x, w)\n  y = Add (t, x)\n}\n";
  StatusOr<std::shared_ptr<ModelFile>> file = ModelFile::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ModelOptions options;
  options.backend = "cuda";
  options.poison_outputs = true;
  std::vector<std::unique_ptr<CompiledModel>> models;  // both alive: the first's copy is the second's
  int64_t shared_bytes = 0;
  for (int64_t n : {3, 40}) {
    options.dims = {{"n", n}};
    StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromModelFile(**file, options);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    if (models.empty()) shared_bytes = DeviceConstants::Get(*device).live_bytes();
    EXPECT_GE(shared_bytes, 1024 * 4);
    EXPECT_EQ(DeviceConstants::Get(*device).live_bytes(), shared_bytes) << "n = " << n;
    StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 7);
    ASSERT_TRUE(inputs.ok());
    StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
    StatusOr<std::vector<Tensor>> expected = RunReference((*model)->graph(), *inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    ASSERT_TRUE(expected.ok());
    Comparison c = CompareWithReference((*actual)[0], (*expected)[0]);
    EXPECT_TRUE(c.pass) << c.reason;
    models.push_back(std::move(model).value());
  }
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

// An op no generated kernel takes (a pool over f64, the passes' window rewrite skipped)
// runs on the reference interpreter with a warning naming the group and the op; strict
// refuses it, naming them. A model every op of which compiles has no warning.
TEST(CompiledModel, WarnsOfGroupsOnTheInterpreterAndStrictRefusesThem) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {1, 2, 8, 8});
  b.Output(b.MaxPool(x, PoolParams{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}}), "y");
  StatusOr<Graph> graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromPassedGraph(*graph, CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ((*model)->warnings().size(), 1u);
  EXPECT_TRUE(Contains((*model)->warnings()[0], "max_pool %")) << (*model)->warnings()[0];
  ModelOptions strict = CpuOptions();
  strict.strict = true;
  StatusOr<std::unique_ptr<CompiledModel>> refused = CompiledModel::FromPassedGraph(*graph, strict);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Contains(refused.status().message(), "strict: 1 group would run on the reference interpreter")) << refused.status().message();
  EXPECT_TRUE(Contains(refused.status().message(), "max_pool %")) << refused.status().message();
  StatusOr<std::unique_ptr<CompiledModel>> clean = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), strict);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE((*clean)->warnings().empty());
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

// Bench's measurements through the facade on the CPU: whole runs (median of repeats, one
// input set), each group alone (indexed by the kernels' groups), the plan's intermediate
// memory, and a second compile into the same cache found there.
TEST(CompiledModel, BenchmarksWholeRunsAndEachGroupOnTheCpu) {
  ModelOptions options = CpuOptions();
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_bench_cache").string();
  std::filesystem::remove_all(options.cache_dir);
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 0);
  ASSERT_TRUE(inputs.ok());
  StatusOr<BenchmarkResult> timed = (*model)->Benchmark(*inputs, {1, 3, 0});
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_GT(timed->median_ms, 0);
  EXPECT_EQ(timed->input_sets, 1);  // 0 on the CPU: one set
  StatusOr<std::vector<double>> groups = (*model)->GroupTimesUs(*inputs);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), (*model)->kernels().size());
  for (size_t i = 0; i < (*model)->kernels().size(); ++i) EXPECT_EQ((*model)->kernels()[i].group, static_cast<int>(i));
  EXPECT_GT((*model)->flops(), 0);
  double kernel_flops = 0;
  for (const KernelSummary& k : (*model)->kernels()) kernel_flops += k.flops;
  EXPECT_DOUBLE_EQ(kernel_flops, (*model)->flops());
  StatusOr<int64_t> planned = (*model)->PlannedIntermediateBytes();
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_GE(*planned, 0);
  StatusOr<BenchmarkResult> bad = (*model)->Benchmark(*inputs, {0, 0, 1});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);

  StatusOr<std::unique_ptr<CompiledModel>> again = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->jit_compiles(), 0);
  int generated = 0;
  for (const KernelSummary& k : (*again)->kernels()) generated += k.generated ? 1 : 0;
  EXPECT_EQ((*again)->jit_cache_hits(), generated);
  std::filesystem::remove_all(options.cache_dir);
}

TEST(CompiledModel, TheReferenceInterpreterHasNothingToBenchmark) {
  ModelOptions options;
  options.backend = "reference";
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("gelu_manual.onnxtxt"), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 0);
  ASSERT_TRUE(inputs.ok());
  StatusOr<BenchmarkResult> timed = (*model)->Benchmark(*inputs);
  EXPECT_EQ(timed.status().code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(Contains(timed.status().message(), "reference interpreter")) << timed.status().message();
  EXPECT_EQ((*model)->GroupTimesUs(*inputs).status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ((*model)->flops(), 0);
  EXPECT_TRUE((*model)->sources().empty());
}

// `compile --emit`: one whole translation unit per generated kernel, named as the kernel
// summary says, written into a folder with the files a caller adds.
TEST(CompiledModel, EmitsEachGeneratedKernelAsATranslationUnit) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("layernorm_manual.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  std::vector<OutputFile> sources = (*model)->sources();
  ASSERT_FALSE(sources.empty());
  for (const OutputFile& file : sources) {
    auto k = std::find_if((*model)->kernels().begin(), (*model)->kernels().end(),
                          [&](const KernelSummary& s) { return s.source_file == file.name; });
    EXPECT_NE(k, (*model)->kernels().end()) << file.name;
    EXPECT_TRUE(Contains(file.name, ".cc")) << file.name;
    EXPECT_TRUE(Contains(file.text, "#include")) << file.text.substr(0, 200);
  }
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "tilefuse_test_emit" / "nested";
  std::filesystem::remove_all(dir.parent_path());
  sources.push_back({"summary.txt", "two kernels\n"});
  ASSERT_TRUE(WriteOutputFiles(dir.string(), sources).ok());
  for (const OutputFile& file : sources) EXPECT_TRUE(std::filesystem::exists(dir / file.name)) << file.name;
  std::ifstream summary(dir / "summary.txt");
  std::string line;
  std::getline(summary, line);
  EXPECT_EQ(line, "two kernels");
  std::filesystem::remove_all(dir.parent_path());
}

// `compile --backend cuda` needs NVRTC, not a GPU.
TEST(CompiledModel, BuildsCudaKernelsForAnArchitectureWithoutAGpu) {
  ModelOptions options;
  options.backend = "cuda";
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  StatusOr<Graph> passed = CompiledModel::RunPasses(LoadModel(Example("softmax_manual.onnxtxt"))->graph, options);
  ASSERT_TRUE(passed.ok()) << passed.status().ToString();
  StatusOr<CudaBuild> build = BuildForCudaArch(*passed, options, "sm_90a");
  if (!build.ok() && build.status().code() == StatusCode::kNotFound) GTEST_SKIP() << "no NVRTC: " << build.status().ToString();
  ASSERT_TRUE(build.ok()) << build.status().ToString();
  EXPECT_EQ(build->arch, "sm_90a");
  EXPECT_FALSE(build->nvrtc_version.empty());
  ASSERT_FALSE(build->kernels.empty());
  EXPECT_EQ(build->kernels[0].kind, "row_reduction");
  EXPECT_FALSE(build->kernels[0].ptxas.empty());
  EXPECT_GT(build->cubins, 0);
  EXPECT_EQ(build->nvrtc_compiles + build->nvrtc_cache_hits, build->cubins);
  ASSERT_FALSE(build->sources.empty());
  EXPECT_EQ(build->sources.front().name, "kernels.cu");
  EXPECT_EQ(build->sources.back().name, "ptxas.txt");
  options.depthwise = "sideways";
  EXPECT_EQ(BuildForCudaArch(*passed, options).status().code(), StatusCode::kInvalidArgument);
}

// `explain` without a compile: the backend's plan of a model file, in three forms.
TEST(CompiledModel, ExplainsAModelFileWithoutCompilingIt) {
  ExplainOptions options;
  StatusOr<PlanExplanation> plan = ExplainModel(Example("softmax_manual.onnxtxt"), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(Contains(plan->text, "-> 1 fused")) << plan->text;
  EXPECT_EQ(nlohmann::json::parse(plan->json)["device"], "h100-sxm");
  EXPECT_TRUE(Contains(plan->dot, "cluster_0")) << plan->dot;
  options.disabled_kinds = {"gemm"};
  plan = ExplainModel(Example("matmul_bias_relu.onnxtxt"), options);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(Contains(plan->text, "gemm fusion is disabled")) << plan->text;
  EXPECT_TRUE(IsFusionGroupKind("row_reduction"));
  EXPECT_FALSE(IsFusionGroupKind("loops"));
  options.disabled_kinds = {"loops"};
  EXPECT_TRUE(Contains(ExplainModel(Example("softmax_manual.onnxtxt"), options).status().message(), "unknown group kind 'loops'"));
  options = ExplainOptions{};
  options.cost_model = "tpu";
  EXPECT_TRUE(Contains(ExplainModel(Example("softmax_manual.onnxtxt"), options).status().message(), "unknown device 'tpu'"));
}

// `demo`'s checks: the plan in numbers, the interpreter on the graph as imported and after
// the passes, and the two comparison rules.
TEST(CompiledModel, SummarizesThePlanAndChecksAgainstTheInterpreter) {
  StatusOr<ImportedModel> imported = LoadModel(Example("softmax_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  StatusOr<Graph> passed = CompiledModel::RunPasses(imported->graph, CpuOptions());
  ASSERT_TRUE(passed.ok());
  StatusOr<PlanSummary> plan = SummarizePlan(*passed);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->fused_kernels, 1);
  EXPECT_EQ(plan->group_kinds, std::vector<std::string>{"row_reduction"});
  EXPECT_GT(plan->unfused_kernels, plan->fused_kernels);
  EXPECT_GT(plan->unfused_predicted_us, plan->predicted_us);
  EXPECT_FALSE(SummarizePlan(*passed, "tpu").ok());

  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs(*passed, 2);
  ASSERT_TRUE(inputs.ok());
  StatusOr<std::vector<Tensor>> before = RunReferenceInterpreter(imported->graph, *inputs);
  StatusOr<std::vector<Tensor>> after = RunReferenceInterpreter(*passed, *inputs);
  ASSERT_TRUE(before.ok() && after.ok());
  EXPECT_TRUE(CompareOutput((*after)[0], (*before)[0], CompareRule::kElementwise).pass);
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromPassedGraph(*passed, CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> actual = (*model)->Run(*inputs);
  ASSERT_TRUE(actual.ok());
  EXPECT_TRUE(CompareOutput((*actual)[0], (*after)[0], CompareRule::kKernels).pass);
  Tensor wrong = Tensor::Random((*actual)[0].dtype(), (*actual)[0].shape(), 99);
  OutputComparison mismatch = CompareOutput(wrong, (*after)[0], CompareRule::kKernels);
  EXPECT_FALSE(mismatch.pass);
  EXPECT_GT(mismatch.mismatches, 0);
  EXPECT_FALSE(mismatch.reason.empty());
}

TEST(CompiledModel, TuningRefusesWrongWordsBeforeImporting) {
  TuningOptions options;
  options.backend = "tpu";
  EXPECT_EQ(Tune("/no/such/model.onnx", options).status().message(), "backend 'tpu' is not one of auto, cuda, cpu");
  options.backend = "cpu";
  options.device = 1;
  EXPECT_EQ(Tune("/no/such/model.onnx", options).status().code(), StatusCode::kInvalidArgument);
  options.device = 0;
  EXPECT_EQ(Tune("/no/such/model.onnx", options).status().code(), StatusCode::kNotFound);
}

// A tune on the CPU reports each kernel it tuned and the whole report as JSON; a second
// tune of the model finds every configuration in the tuning cache.
TEST(CompiledModel, TunesTheCpuKernelsOfAModel) {
  TuningOptions options;
  options.backend = "cpu";
  options.budget_s = 20;
  int progress_calls = 0;
  options.progress = [&](int, int, const std::string&) { ++progress_calls; };
  StatusOr<TuningReport> first = Tune(Example("gelu_manual.onnxtxt"), options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->device.empty());
  EXPECT_TRUE(first->note.empty());
  ASSERT_FALSE(first->kernels.empty());
  EXPECT_GT(progress_calls, 0);
  EXPECT_FALSE(first->kernels[0].best.empty());
  nlohmann::json json = nlohmann::json::parse(first->json);
  EXPECT_EQ(json["device"], first->device);
  EXPECT_EQ(json["model"], Example("gelu_manual.onnxtxt"));
  StatusOr<TuningReport> second = Tune(Example("gelu_manual.onnxtxt"), options);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->measurements, 0);
}

// The GPU's measurements where there is one (skipped, saying why, elsewhere).
TEST(CompiledModel, BenchmarksOnTheGpuWithRotatedInputsAndMeasuresTheCopyRate) {
  StatusOr<GpuInfo> gpu = DescribeGpu(0);
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status().ToString();
  EXPECT_FALSE(gpu->name.empty());
  EXPECT_GT(gpu->l2_bytes, 0);
  StatusOr<double> copy = MeasureGpuCopyBandwidth(0);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  EXPECT_GT(*copy, 1e11);  // any GPU of this decade copies faster than 100 GB/s
  StatusOr<double> same_size = MeasureGpuCopyMicroseconds(0, 1 << 20, 10);
  ASSERT_TRUE(same_size.ok()) << same_size.status().ToString();
  EXPECT_GT(*same_size, 0);
  ModelOptions options;
  options.backend = "cuda";
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("softmax_manual.onnxtxt"), options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 0);
  ASSERT_TRUE(inputs.ok());
  StatusOr<BenchmarkResult> timed = (*model)->Benchmark(*inputs);
  ASSERT_TRUE(timed.ok()) << timed.status().ToString();
  EXPECT_GT(timed->median_ms, 0);
  EXPECT_GT(timed->input_sets, 1);  // a small input: several copies lie between two uses of one
  StatusOr<std::vector<double>> groups = (*model)->GroupTimesUs(*inputs);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  EXPECT_FALSE(groups->empty());
  EXPECT_GE((*model)->kernels()[0].group, 0);
}

// `run --trace`: the profiled run's kernels as Chrome trace events, each named as kernels()
// names it and with its kind.
TEST(CompiledModel, WritesTheTimedKernelsAsAChromeTrace) {
  StatusOr<std::unique_ptr<CompiledModel>> model = CompiledModel::FromFile(Example("mlp_block.onnxtxt"), CpuOptions());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs((*model)->graph(), 5);
  ASSERT_TRUE(inputs.ok());
  std::vector<KernelRunTime> timings;
  ASSERT_TRUE((*model)->Run(*inputs, &timings).ok());
  ASSERT_FALSE(timings.empty());
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "tilefuse_facade_trace.json";
  ASSERT_TRUE(WriteKernelTrace(**model, timings, path.string()).ok());
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  size_t kernels = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    if (event.value("cat", "") != "kernel") continue;
    ++kernels;
    EXPECT_TRUE(event.contains("args") && event["args"].contains("kind")) << event.dump();
  }
  EXPECT_EQ(kernels, timings.size());
  std::filesystem::remove(path);
}

// A check's conditioning: legitimate computations of a well-conditioned graph stay inside the
// tolerance (ratios <= 1, one per output); a failure far beyond them is not explained by it.
TEST(CompiledModel, MeasuresHowWellConditionedTheOutputsAre) {
  StatusOr<ImportedModel> imported = LoadModel(Example("layernorm_manual.onnxtxt"));
  ASSERT_TRUE(imported.ok());
  StatusOr<std::vector<Tensor>> inputs = MakeRandomInputs(imported->graph, 7);
  ASSERT_TRUE(inputs.ok());
  StatusOr<std::vector<Tensor>> expected = RunReferenceInterpreter(imported->graph, *inputs);
  ASSERT_TRUE(expected.ok());
  StatusOr<OutputConditioning> c = MeasureOutputConditioning(imported->graph, *inputs, *expected, [](size_t, const Tensor& got, const Tensor& e) {
    const OutputComparison k = CompareOutput(got, e, CompareRule::kKernels);
    return k.pass ? 0.5 : 2.0;
  });
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->ratios.size(), expected->size());
  ASSERT_EQ(c->summaries.size(), expected->size());
  for (double r : c->ratios) EXPECT_LE(r, 1.0);
  EXPECT_FALSE(ConditioningExplainsFailure(50.0, c->ratios[0]));
  EXPECT_TRUE(ConditioningExplainsFailure(3.0, 2.0));
}

TEST(CompiledModel, HostCopyBandwidthIsMeasured) { EXPECT_GT(MeasureHostCopyBandwidth(int64_t{16} << 20), 1e8); }

}  // namespace
}  // namespace tilefuse

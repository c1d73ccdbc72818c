// The CPU tuner end to end on tiny shapes: a forced non-default configuration still
// matches the reference, a second tuning run measures nothing, a variant that fails to
// compile counts as infinitely slow, gemm prologue kernels are tuned too.
#include "codegen/kernel_fingerprint.h"
#include "driver/driver.h"
#include "runtime/measure.h"
#include "tune/cpu_tuner.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "testing/tune_test_models.h"
#include "tune/cpu_search_space.h"

namespace tilefuse {
namespace {

using tune_test::PassedGraph;

// A fresh folder for one test's kernel and tuning caches, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tilefuse_cpu_tuner_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<Tensor> Inputs(const Graph& graph) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Node& p = graph.node(graph.inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, 77 + i));
  }
  return inputs;
}

void ExpectMatchesReference(const Graph& graph, CpuExecutable& compiled, const std::string& what) {
  std::vector<Tensor> inputs = Inputs(graph);
  auto expected = RunReference(graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = compiled.Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t i = 0; i < expected->size(); ++i) {
    Comparison c = CompareWithReference((*actual)[i], (*expected)[i]);
    EXPECT_TRUE(c.pass) << what << " output " << i << ": " << c.reason;
  }
}

TuneOptions QuickTuning() {
  TuneOptions tune;
  tune.warmup = 1;
  tune.repeats = 3;
  tune.max_measured = 4;
  return tune;
}

TEST(CpuTunerTest, ForcedConfigurationsMatchTheReference) {
  TempDir dir;
  const CppKernelConfig forced{1, CppSchedule::kDynamic, 4, false};
  for (const std::string& text : {tune_test::SoftmaxModel(16, 96), tune_test::NormalizeModel(12, 40), tune_test::PointwiseModel(5, 33)}) {
    Graph graph = PassedGraph(text);
    CpuCompileOptions options;
    options.cache_dir = dir.path();
    auto plain = CompileForCpu(graph, options);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    for (const KernelInfo& k : (*plain)->kernels())
      if (const Kernel* loop = (*plain)->LoopKernel(k.name)) options.configs[KernelFingerprint(*loop)] = forced;
    ASSERT_FALSE(options.configs.empty());
    options.poison_outputs = true;
    auto tuned = CompileForCpu(graph, options);
    ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
    for (const KernelInfo& k : (*tuned)->kernels()) {
      if (k.generated) {
        EXPECT_NE(k.source.find("schedule(dynamic, 4) num_threads(1)"), std::string::npos) << k.source;
      }
    }
    ExpectMatchesReference(graph, **tuned, text);
  }
}

TEST(CpuTunerTest, SecondRunMeasuresNothing) {
  TempDir dir;
  Graph graph = PassedGraph(tune_test::SoftmaxModel(32, 64));
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  // The fallback rule's decision rests on timings of a tiny kernel on a shared machine
  // (it may replan the group unfused); this test is about the cache, so it is off.
  TuneOptions tune = QuickTuning();
  tune.fallback = false;
  TuneReport first;
  auto tuned = TuneForCpu(graph, options, tune, &first);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  ASSERT_EQ(first.kernels.size(), 1u);
  EXPECT_GT(first.measurements, 0);
  EXPECT_EQ(first.measurements, first.kernels[0].measured);
  EXPECT_LE(first.kernels[0].measured, 4);
  EXPECT_GT(first.kernels[0].best_us, 0);
  EXPECT_TRUE(first.fallbacks.empty());
  ExpectMatchesReference(graph, **tuned, "tuned softmax");

  TuneReport second;
  auto again = TuneForCpu(graph, options, tune, &second);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(second.measurements, 0);
  EXPECT_EQ(second.cache_hits, first.measurements);
  EXPECT_TRUE(second.ToJson()["all_from_cache"].get<bool>());
  EXPECT_EQ(second.kernels[0].best, first.kernels[0].best);
}

TEST(CpuTunerTest, VariantThatFailsToCompileIsInfinitelySlow) {
  TempDir dir;
  Graph graph = PassedGraph(tune_test::SoftmaxModel(16, 64));
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  auto compiled = CompileForCpu(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_TRUE((*compiled)->Run(Inputs(graph)).ok());
  std::string name = (*compiled)->kernels().back().name;
  ASSERT_NE((*compiled)->LoopKernel(name), nullptr);
  const CppKernelConfig broken{-1, CppSchedule::kStatic, 0, true};  // prints an #error line

  auto timings = (*compiled)->MeasureVariants(name, {CppKernelConfig{}, broken, {0, CppSchedule::kDynamic, 4, true}}, 1, 3);
  ASSERT_TRUE(timings.ok()) << timings.status().ToString();
  ASSERT_EQ(timings->size(), 3u);
  EXPECT_TRUE((*timings)[0].time_us.has_value());
  EXPECT_FALSE((*timings)[1].time_us.has_value());
  EXPECT_NE((*timings)[1].error.find("CppKernelConfig"), std::string::npos) << (*timings)[1].error;
  EXPECT_TRUE((*timings)[2].time_us.has_value()) << (*timings)[2].error;  // compiled alone after the batch failed

  // Through the tuner core: the failure is recorded, and never the winner.
  auto cache = TuningCache::Open(dir.path());
  ASSERT_TRUE(cache.ok());
  KernelSearch search;
  search.name = name;
  search.key = {"test cpu", "test", "", "test", "failing-variant", "", ""};
  search.candidates = {CppConfigToJson(broken), CppConfigToJson(CppKernelConfig{})};
  search.rank = [](const nlohmann::json&) { return 0.0; };
  search.measure = [&](const std::vector<nlohmann::json>& configs) -> StatusOr<std::vector<ConfigTiming>> {
    std::vector<CppKernelConfig> typed;
    for (const nlohmann::json& c : configs) typed.push_back(CppConfigFromJson(c));
    ASSIGN_OR_RETURN(std::vector<CppVariantTiming> measured, (*compiled)->MeasureVariants(name, typed, 1, 3));
    std::vector<ConfigTiming> out;
    for (size_t i = 0; i < measured.size(); ++i) out.push_back({configs[i], measured[i].time_us, measured[i].error});
    return out;
  };
  auto result = TuneKernel(search, *cache, QuickTuning(), true);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->best, CppConfigToJson(CppKernelConfig{}));
  auto record = cache->Lookup(search.key);
  ASSERT_TRUE(record.has_value());
  const TuningMeasurement* failed = record->Find(CppConfigToJson(broken));
  ASSERT_NE(failed, nullptr);
  EXPECT_FALSE(failed->time_us.has_value());
  EXPECT_FALSE(failed->error.empty());
}

// A gemm group's prologue kernel is tuned like any loop kernel, and a configuration for
// it reaches its source.
TEST(CpuTunerTest, GemmPrologueKernelsAreTuned) {
  TempDir dir;
  Graph graph = PassedGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
gemm (float16[2,48,32] x, float[48,24] w) => (float[2,32,24] y) {
  xt = Transpose <perm = [0, 2, 1]> (x)
  xf = Cast <to = 1> (xt)
  p = MatMul (xf, w)
  y = Relu (p)
})");
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  auto plain = CompileForCpu(graph, options);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  // The gemm group (its prologue kernel and BLAS), then the ReLU: on the CPU an epilogue is a
  // pass of its own, and the planner's cost model says so.
  ASSERT_EQ((*plain)->kernels().size(), 2u);
  ASSERT_EQ((*plain)->kernels()[0].prologue_kernels.size(), 1u);
  const std::string prologue = (*plain)->kernels()[0].prologue_kernels[0];

  TuneOptions tune = QuickTuning();
  tune.fallback = false;
  TuneReport report;
  auto tuned = TuneForCpu(graph, options, tune, &report);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  std::vector<std::string> names;
  for (const KernelTuneResult& k : report.kernels) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{prologue, (*plain)->kernels()[1].name}));
  ExpectMatchesReference(graph, **tuned, "tuned gemm");

  options.configs[KernelFingerprint(*(*plain)->LoopKernel(prologue))] = CppKernelConfig{1, CppSchedule::kDynamic, 4, false};
  options.poison_outputs = true;
  auto forced = CompileForCpu(graph, options);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  const std::string& source = (*forced)->kernels()[0].source;
  size_t function = source.find(prologue);
  ASSERT_NE(function, std::string::npos);
  EXPECT_NE(source.find("schedule(dynamic, 4) num_threads(1)", function), std::string::npos) << source;
  ExpectMatchesReference(graph, **forced, "gemm, forced prologue configuration");
}

TEST(CpuTunerTest, GroupTimesOnePerGroup) {
  TempDir dir;
  Graph graph = PassedGraph(tune_test::SoftmaxModel(8, 32));
  CpuCompileOptions options;
  options.cache_dir = dir.path();
  options.fuse = false;
  auto compiled = CompileForCpu(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  auto times = GroupTimesUs(**compiled, Inputs(graph));
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  ASSERT_EQ(times->size(), (*compiled)->plan().groups.size());
  for (double us : *times) EXPECT_GE(us, 0);
}

}  // namespace
}  // namespace tilefuse

// The driver's own duties, whatever the backend: stage order, the plan verifier between
// planning and lowering, dumps, one compiler run for a batch, and a backend made for an
// architecture only running every stage but Load.
#include "driver/driver.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "reference/interpreter.h"
#include "backend/cuda/cuda_backend.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

constexpr const char* kSoftmax = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
softmax (float[8,64] x) => (float[8,64] y)
{
  y = Softmax <axis = -1> (x)
}
)ONNX";

Graph Passed(const char* text) {
  auto model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return *graph;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TempDir {
 public:
  TempDir() : path_(std::filesystem::temp_directory_path() / ("tilefuse_driver_test_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A backend whose planner forgets a node: the driver must refuse its plan, not lower it.
class ForgetfulBackend : public Backend {
 public:
  explicit ForgetfulBackend(std::unique_ptr<CpuBackend> cpu) : cpu_(std::move(cpu)) {}
  std::string_view name() const override { return "forgetful"; }
  std::string_view source_file_name() const override { return "kernels.cpp"; }
  const TargetCapabilities& capabilities() const override { return cpu_->capabilities(); }
  StatusOr<PlannedGraph> Plan(const Graph& graph, PlannerOptions options) override {
    ASSIGN_OR_RETURN(PlannedGraph planned, cpu_->Plan(graph, options));
    planned.plan.groups.back().nodes.pop_back();
    return planned;
  }
  StatusOr<std::unique_ptr<LoweredGraph>> Lower(const Graph&, PlannedGraph, const std::string&) override {
    ADD_FAILURE() << "lowered a plan the verifier refuses";
    return Internal("unreachable");
  }
  StatusOr<std::unique_ptr<ObjectCode>> Build(const std::vector<const LoweredGraph*>&) override { return Internal("unreachable"); }
  StatusOr<std::unique_ptr<Executable>> Load(std::unique_ptr<LoweredGraph>, const ObjectCode&) override { return Internal("unreachable"); }

 private:
  std::unique_ptr<CpuBackend> cpu_;
};

TEST(DriverTest, RunsEveryStageAndDumpsWhatEachMade) {
  Graph graph = Passed(kSoftmax);
  TempDir dumps;
  CpuCompileOptions options;
  options.dump_dir = dumps.path().string();
  options.poison_outputs = true;
  auto compiled = CompileForCpu(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_EQ((*compiled)->backend(), "cpu");
  EXPECT_GT((*compiled)->compile_ms(), 0);
  EXPECT_NE(ReadFile(dumps.path() / "plan.txt").find("group 0 row_reduction"), std::string::npos);
  EXPECT_NE(ReadFile(dumps.path() / "kernels.ir.txt").find("reduce_max"), std::string::npos);
  EXPECT_NE(ReadFile(dumps.path() / "kernels.cpp").find("tf_group0_row_reduction"), std::string::npos);
  // And the executable computes the softmax.
  Tensor x = Tensor::Random(DType::kF32, {8, 64}, 7);
  auto expected = RunReference(graph, {x});
  auto actual = (*compiled)->Run({x});
  ASSERT_TRUE(expected.ok() && actual.ok());
  Comparison c = CompareNormwise((*actual)[0], (*expected)[0], {1e-5, 1e-6});
  EXPECT_TRUE(c.pass) << c.reason;
}

TEST(DriverTest, ABatchIsOneCompilerRunWithADumpPerGraph) {
  std::vector<Graph> graphs = {Passed(kSoftmax), Passed(kSoftmax)};
  TempDir dumps;
  CpuCompileOptions options;
  options.dump_dir = dumps.path().string();
  auto compiled = CompileBatchForCpu(graphs, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_EQ(compiled->size(), 2u);
  std::string first = ReadFile(dumps.path() / "g0.kernels.cpp"), second = ReadFile(dumps.path() / "g1.kernels.cpp");
  EXPECT_NE(first.find("g0_tf_group0"), std::string::npos);
  EXPECT_NE(second.find("g1_tf_group0"), std::string::npos);
}

TEST(DriverTest, APlanTheVerifierRefusesIsNeverLowered) {
  auto cpu = CpuBackend::Create(CpuCompileOptions{});
  ASSERT_TRUE(cpu.ok());
  ForgetfulBackend backend(std::move(*cpu));
  auto compiled = CompileGraph(backend, Passed(kSoftmax), CompileOptions{});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kInternal);
  EXPECT_NE(compiled.status().message().find("forgetful backend's plan fails verification"), std::string::npos)
      << compiled.status().message();
}

TEST(DriverTest, APlanOverrideIsVerifiedOnEveryBackend) {
  Graph graph = Passed(kSoftmax);
  auto planned = PlanFusion(graph, PlannerOptions{});
  ASSERT_TRUE(planned.ok());
  FusionPlan broken = *planned;
  broken.groups[0].nodes.pop_back();  // a node in no group
  CpuCompileOptions cpu;
  cpu.plan_override = &broken;
  auto on_cpu = CompileForCpu(graph, cpu);
  ASSERT_FALSE(on_cpu.ok());
  EXPECT_NE(on_cpu.status().message().find("in no group"), std::string::npos) << on_cpu.status().message();
  CudaCompileOptions cuda;
  cuda.plan_override = &broken;
  auto backend = CudaBackend::ForArch("sm_90a", cuda);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto built = BuildGraphs(**backend, {graph}, cuda);
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().message(), on_cpu.status().message());
}

TEST(DriverTest, AnArchitectureOnlyBackendCompilesButDoesNotLoad) {
  CudaCompileOptions options;
  auto backend = CudaBackend::ForArch("sm_90a", options);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  auto built = BuildGraphs(**backend, {Passed(kSoftmax)}, options);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_GT(CudaBackend::CubinsOf(*built->code).bytes(), 0);
  auto loaded = (*backend)->Load(std::move(built->lowered[0]), *built->code);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tilefuse

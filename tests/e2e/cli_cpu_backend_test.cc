// The CPU backend through the `tilefuse` binary: run --backend cpu (fused and
// --no-fusion, --check, --trace, --json), compile --emit, bench --json. Each test uses
// a kernel cache of its own (TILEFUSE_CACHE_DIR in a scratch folder), never ~/.cache.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"
#include "frontend/onnx/importer.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

std::string Example(const std::string& name) { return std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name; }

nlohmann::json ParseJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

// A scratch folder whose "cache" subfolder is the kernel cache while the test runs.
class CliCpuBackend : public testing::Test {
 protected:
  void SetUp() override { setenv("TILEFUSE_CACHE_DIR", (scratch_ / "cache").c_str(), 1); }
  void TearDown() override { unsetenv("TILEFUSE_CACHE_DIR"); }
  ScratchDir scratch_;
};

TEST_F(CliCpuBackend, RunCheckOnAnExamplePasses) {
  CommandResult r = RunTilefuse("run " + Quote(Example("softmax_manual.onnxtxt")) + " --backend cpu --check");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("backend: cpu"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(scratch_ / "cache")) << "the cache dir from the environment is used";
}

TEST_F(CliCpuBackend, DefaultBackendIsCpu) {
  CommandResult r = RunTilefuse("run " + Quote(Example("gelu_manual.onnxtxt")) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ParseJson(r.out)["backend"], "cpu");
  CommandResult ref = RunTilefuse("run " + Quote(Example("gelu_manual.onnxtxt")) + " --backend reference --json");
  ASSERT_EQ(ref.exit_code, 0) << ref.out << ref.err;
  EXPECT_EQ(ParseJson(ref.out)["backend"], "reference");
}

// y = a * b + a and its row sums, with expected outputs worked out by hand.
TEST_F(CliCpuBackend, RunCheckAgainstExpectedOutputs) {
  std::string dir = scratch_ / "axpy";
  testing_cli::WriteBinaryModel(testing_cli::ParseOnnxText(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
axpy (float[2,3] a, float[2,3] b) => (float[2,3] y, float[2] row_sum)
{
  axes = Constant <value = int64[1] {1}> ()
  prod = Mul (a, b)
  y = Add (prod, a)
  row_sum = ReduceSum <keepdims = 0> (y, axes)
}
)ONNX"),
                                dir + "/model.onnx");
  std::string data = dir + "/test_data_set_0";
  std::filesystem::create_directories(data);
  auto save = [&](const Shape& shape, std::vector<double> values, const std::string& name, const std::string& file) {
    ASSERT_TRUE(SaveTensorProtoFile(Tensor::FromDoubles(DType::kF32, shape, values), name, data + "/" + file).ok());
  };
  save({2, 3}, {1, 2, 3, 4, 5, 6}, "a", "input_0.pb");
  save({2, 3}, {0.5, -1, 2, 0, 1, -2}, "b", "input_1.pb");
  save({2, 3}, {1.5, 0, 9, 4, 10, -6}, "y", "output_0.pb");  // a*b + a
  save({2}, {10.5, 8}, "row_sum", "output_1.pb");
  for (const char* fusion : {"", " --no-fusion"}) {
    CommandResult r = RunTilefuse("run " + Quote(dir) + " --backend cpu --check --json" + fusion);
    EXPECT_EQ(r.exit_code, 0) << fusion << r.out << r.err;
    nlohmann::json j = ParseJson(r.out);
    EXPECT_EQ(j["check"], "expected_outputs");
    EXPECT_EQ(j["status"], "pass");
    EXPECT_EQ(j["backend"], "cpu");
  }
  // A wrong expected value is caught by the generated kernels' outputs too.
  save({2}, {10.5, 9}, "row_sum", "output_1.pb");
  CommandResult bad = RunTilefuse("run " + Quote(dir) + " --backend cpu --check");
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
}

TEST_F(CliCpuBackend, NoFusionRunsOneKernelPerOp) {
  std::string model = Quote(Example("layernorm_manual.onnxtxt"));
  CommandResult fused = RunTilefuse("run " + model + " --backend cpu --check --json");
  CommandResult unfused = RunTilefuse("run " + model + " --backend cpu --check --json --no-fusion");
  ASSERT_EQ(fused.exit_code, 0) << fused.out << fused.err;
  ASSERT_EQ(unfused.exit_code, 0) << unfused.out << unfused.err;
  int fused_kernels = ParseJson(fused.out)["num_kernels"];
  nlohmann::json j = ParseJson(unfused.out);
  EXPECT_GT(j["num_kernels"].get<int>(), fused_kernels);
  EXPECT_EQ(j["kernels"].size(), j["num_kernels"].get<size_t>());
  for (const auto& k : j["kernels"]) EXPECT_GE(k["ms"].get<double>(), 0) << k;
}

TEST_F(CliCpuBackend, TraceHasOneEventPerKernel) {
  std::string trace = scratch_ / "trace.json";
  CommandResult r = RunTilefuse("run " + Quote(Example("mlp_block.onnxtxt")) + " --json --trace " + Quote(trace));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json report = ParseJson(r.out);
  nlohmann::json j = ParseJson(testing_cli::ReadFile(trace));
  int kernel_events = 0;
  for (const auto& event : j["traceEvents"]) {
    if (event["ph"] != "X") continue;
    ++kernel_events;
    EXPECT_EQ(event["cat"], "kernel");
    EXPECT_TRUE(event["args"].contains("kind")) << event;
    EXPECT_TRUE(event["args"].contains("generated")) << event;
  }
  EXPECT_EQ(kernel_events, report["num_kernels"].get<int>());
  EXPECT_GT(kernel_events, 0);
}

TEST_F(CliCpuBackend, CompileEmitWritesOneSourcePerGeneratedKernel) {
  std::string emit = scratch_ / "kernels";
  CommandResult r = RunTilefuse("compile " + Quote(Example("mlp_block.onnxtxt")) + " --emit " + Quote(emit));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json summary = ParseJson(testing_cli::ReadFile(emit + "/summary.json"));
  EXPECT_FALSE(testing_cli::ReadFile(emit + "/summary.txt").empty());
  int generated = 0, with_source = 0;
  for (const auto& k : summary["kernels"]) {
    if (!k["generated"].get<bool>()) {
      EXPECT_FALSE(k["why_not"].get<std::string>().empty()) << k;
      continue;
    }
    ++generated;
    if (k["file"].get<std::string>().empty()) {  // a gemm group that is BLAS alone
      EXPECT_EQ(k["kind"], "gemm") << k;
      continue;
    }
    ++with_source;
    std::string source = testing_cli::ReadFile(emit + "/" + k["file"].get<std::string>());
    EXPECT_NE(source.find("extern \"C\""), std::string::npos) << k["file"];
  }
  EXPECT_GT(with_source, 0);
  EXPECT_EQ(summary["generated"].get<int>(), generated);
  int cc_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(emit)) cc_files += entry.path().extension() == ".cc";
  EXPECT_EQ(cc_files, with_source);
  // The same compile again finds every generated kernel in the cache.
  CommandResult again = RunTilefuse("compile " + Quote(Example("mlp_block.onnxtxt")) + " --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(ParseJson(again.out)["jit_compiles"], 0);
}

TEST_F(CliCpuBackend, CompileDumpDirHoldsEveryStage) {
  // A pass's dump, NN-<pass>.txt (its number depends on the backend's passes), or "".
  auto stage = [](const std::string& dumps, const std::string& pass) -> std::string {
    for (const auto& e : std::filesystem::directory_iterator(dumps)) {
      const std::string name = e.path().filename().string();
      if (name.size() == pass.size() + 7 && name.substr(2) == "-" + pass + ".txt") return testing_cli::ReadFile(e.path().string());
    }
    return "";
  };
  for (const char* backend : {"cpu", "cuda"}) {
    std::string dumps = scratch_ / (std::string("stages_") + backend);
    CommandResult r = RunTilefuse("compile " + Quote(Example("layernorm_manual.onnxtxt")) + " --backend " + backend +
                                  " --dump-dir " + Quote(dumps));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(stage(dumps, "decompose").find("reduce_mean"), std::string::npos) << backend;
    EXPECT_EQ(stage(dumps, "fp8-products").empty(), std::string(backend) == "cpu") << backend << ": FP8 products are the CUDA backend's";
    EXPECT_NE(testing_cli::ReadFile(dumps + "/plan.txt").find("row_reduction"), std::string::npos) << backend;
    EXPECT_NE(testing_cli::ReadFile(dumps + "/kernels.ir.txt").find("reduce"), std::string::npos) << backend;
    std::string source = testing_cli::ReadFile(dumps + (std::string(backend) == "cpu" ? "/kernels.cpp" : "/kernels.cu"));
    EXPECT_NE(source.find("tf_group0_row_reduction"), std::string::npos) << backend;
  }
}

TEST_F(CliCpuBackend, BenchJsonHasTheDocumentedFields) {
  CommandResult r = RunTilefuse("bench " + Quote(Example("gelu_manual.onnxtxt")) +
                                " --json --repeats 3 --warmup 1 --copy-mib 16");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r.out);
  for (const char* field : {"model", "backend", "bytes", "flops", "copy_gbps", "speedup", "fused_pct_of_copy"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  for (const char* variant : {"fused", "unfused"}) {
    for (const char* field : {"ms", "gbps", "gflops", "kernels", "compile_cold_ms", "compile_warm_ms",
                              "jit_compiles_cold", "jit_compiles_warm", "peak_intermediate_bytes"}) {
      EXPECT_TRUE(j[variant].contains(field)) << variant << "." << field;
    }
    EXPECT_EQ(j[variant]["jit_compiles_warm"], 0) << "the second compile is a cache hit";
  }
  EXPECT_GT(j["speedup"].get<double>(), 0);
  EXPECT_GT(j["copy_gbps"].get<double>(), 0);
  EXPECT_LE(j["fused"]["kernels"].get<int>(), j["unfused"]["kernels"].get<int>());
}

TEST_F(CliCpuBackend, BenchFusedOnlySkipsTheUnfusedModel) {
  CommandResult r = RunTilefuse("bench " + Quote(Example("gelu_manual.onnxtxt")) + " --json --fused-only --repeats 3 --warmup 1 --copy-mib 16");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = ParseJson(r.out);
  EXPECT_GT(j["fused"]["ms"].get<double>(), 0);
  EXPECT_TRUE(j["unfused"].is_null()) << r.out;
  EXPECT_TRUE(j["speedup"].is_null()) << r.out;
  CommandResult text = RunTilefuse("bench " + Quote(Example("gelu_manual.onnxtxt")) + " --fused-only --repeats 3 --warmup 1 --copy-mib 16");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("fused "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("unfused "), std::string::npos) << text.out;
}

TEST_F(CliCpuBackend, UnknownBackendIsAUsageError) {
  CommandResult r = RunTilefuse("run " + Quote(Example("gelu_manual.onnxtxt")) + " --backend tpu");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  CommandResult bench = RunTilefuse("bench " + Quote(Example("gelu_manual.onnxtxt")) + " --backend reference");
  EXPECT_EQ(bench.exit_code, 2) << bench.out << bench.err;
}

}  // namespace
}  // namespace tilefuse

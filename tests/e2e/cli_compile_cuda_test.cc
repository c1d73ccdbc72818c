// `tilefuse compile MODEL --backend cuda` (NVRTC, no GPU): a cubin per distinct kernel, the
// report and the emitted files under every kernel's own name, and a second compile that
// finds every unit in the cache. The test's kernel cache is its own (TILEFUSE_CACHE_DIR).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "backend/cuda/nvrtc_compiler.h"
#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

class CliCompileCuda : public testing::Test {
 protected:
  void SetUp() override {
    if (!NvrtcCompiler::Create(scratch_ / "probe").ok()) GTEST_SKIP() << "NVRTC not available: CUDA kernels not compiled";
    setenv("TILEFUSE_CACHE_DIR", (scratch_ / "cache").c_str(), 1);
  }
  void TearDown() override { unsetenv("TILEFUSE_CACHE_DIR"); }
  ScratchDir scratch_;
};

TEST_F(CliCompileCuda, ACubinPerDistinctKernelAndASecondCompileFromTheCache) {
  const std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/gpt2_2layer";
  const std::string emit = scratch_ / "emit";
  CommandResult cold = RunTilefuse("compile " + Quote(model) + " --backend cuda --json --emit " + Quote(emit));
  ASSERT_EQ(cold.exit_code, 0) << cold.out << cold.err;
  nlohmann::json j = nlohmann::json::parse(cold.out);
  const int cubins = j["cubins"].get<int>();
  int generated = 0;
  const std::string source = testing_cli::ReadFile(emit + "/kernels.cu");
  const std::string ptxas = testing_cli::ReadFile(emit + "/ptxas.txt");
  for (const nlohmann::json& k : j["kernels"]) {
    if (k["mode"] == "gemm" || k["mode"] == "host") continue;  // cuBLASLt or the host: no kernel
    ++generated;
    const std::string name = k["name"].get<std::string>();
    EXPECT_NE(k["ptxas"].get<std::string>(), "") << name << ": ptxas's line under the kernel's own name";
    EXPECT_NE(source.find(" " + name + "("), std::string::npos) << name << ": kernels.cu holds the whole model";
    EXPECT_NE(ptxas.find("'" + name + "'"), std::string::npos) << name;
    EXPECT_EQ(k["entry"].get<std::string>().rfind("tf_", 0), 0u) << name << ": its function's name in its cubin";
  }
  EXPECT_GT(cubins, 0);
  EXPECT_LT(cubins, generated) << "the second layer's kernels are the first layer's";
  EXPECT_EQ(j["nvrtc_compiles"], cubins);
  EXPECT_EQ(j["from_cache"], false);
  // Each compiled cubin's NVRTC time once, on the first kernel it serves.
  int timed = 0;
  for (const nlohmann::json& k : j["kernels"]) timed += k["nvrtc_ms"].get<double>() > 0;
  EXPECT_EQ(timed, cubins);
  EXPECT_NE(cold.out.find("\"cubin_bytes\""), std::string::npos);

  CommandResult warm = RunTilefuse("compile " + Quote(model) + " --backend cuda --json");
  ASSERT_EQ(warm.exit_code, 0) << warm.out << warm.err;
  nlohmann::json again = nlohmann::json::parse(warm.out);
  EXPECT_EQ(again["nvrtc_compiles"], 0);
  EXPECT_EQ(again["nvrtc_cache_hits"], cubins);
  EXPECT_EQ(again["from_cache"], true);
  for (nlohmann::json* kernels : {&j["kernels"], &again["kernels"]})
    for (nlohmann::json& k : *kernels) {
      if (kernels == &again["kernels"]) {
        EXPECT_EQ(k["nvrtc_ms"], 0.0) << k["name"] << ": nothing compiled";
      }
      k.erase("nvrtc_ms");
    }
  EXPECT_EQ(again["kernels"], j["kernels"]) << "cached units keep their ptxas reports";

  CommandResult text = RunTilefuse("compile " + Quote(model) + " --backend cuda");
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find(std::to_string(cubins) + " cubins (one per distinct kernel): 0 compiled, " + std::to_string(cubins) +
                          " from the cache"),
            std::string::npos)
      << text.out;
  EXPECT_EQ(text.out.find("NVRTC:"), std::string::npos) << "no compile time to report: " << text.out;
}

}  // namespace
}  // namespace tilefuse

// `tilefuse bench MODEL --backend cuda`: on a machine with a GPU, the documented report
// (whole-graph times fused and unfused, compile cold and warm, every fused group's share);
// without one, a clear error and exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "backend/cuda/cuda_driver.h"
#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;

TEST(CliBenchCuda, TimesAModelOnTheGpuOrSaysItNeedsOne) {
  const std::string model = std::string(TILEFUSE_SOURCE_DIR) + "/examples/mlp_block.onnxtxt";
  CommandResult r = RunTilefuse("bench " + Quote(model) + " --backend cuda --json --repeats 3 --warmup 1");
  if (!CudaDevice::Get().ok()) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("--backend cuda needs a GPU"), std::string::npos) << r.err;
    GTEST_SKIP() << "no GPU here: only the error was checked (the GPU script runs the rest)";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "cuda");
  for (const char* field : {"device", "bytes", "flops", "copy_gbps", "speedup", "input_sets", "groups"})
    EXPECT_TRUE(j.contains(field)) << field;
  for (const char* variant : {"fused", "unfused"}) {
    for (const char* field : {"ms", "tflops", "gbps", "pct_of_copy", "kernels", "cuda_graph", "compile_cold_ms", "compile_warm_ms",
                              "nvrtc_compiles_cold", "nvrtc_compiles_warm", "nvrtc_cache_hits_cold", "nvrtc_cache_hits_warm"})
      EXPECT_TRUE(j[variant].contains(field)) << variant << "." << field;
    EXPECT_GT(j[variant]["ms"].get<double>(), 0) << variant;
    EXPECT_EQ(j[variant]["nvrtc_compiles_warm"], 0) << variant << ": the second compile is a cache hit";
    EXPECT_GT(j[variant]["nvrtc_compiles_cold"].get<int>(), 0) << variant << ": the first compile starts from an empty cache";
    EXPECT_EQ(j[variant]["nvrtc_cache_hits_warm"], j[variant]["nvrtc_compiles_cold"]) << variant << ": each kernel compiled cold is found warm";
  }
  EXPECT_LT(j["fused"]["kernels"].get<int>(), j["unfused"]["kernels"].get<int>());
  ASSERT_EQ(j["groups"].size(), j["fused"]["kernels"].get<size_t>());
  double share = 0;
  for (const nlohmann::json& g : j["groups"]) {
    EXPECT_GT(g["us"].get<double>(), 0) << g.dump();
    share += g["share"].get<double>();
  }
  EXPECT_NEAR(share, 1.0, 1e-6);
}

}  // namespace
}  // namespace tilefuse

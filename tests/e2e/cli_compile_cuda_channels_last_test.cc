// `tilefuse compile MODEL --backend cuda`: half-precision convolutions at batch > 1 compile
// channels-last, each product one GEMM-template kernel with its epilogue fused (NCHW made
// them batched products the template refuses: "only a shared B"), every kernel through
// NVRTC for sm_90a without spills. Needs NVRTC, not a GPU. TILEFUSE_CHANNELS_LAST=0 brings
// the NCHW forms back.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;

struct CompiledKernels {
  int gemm_templates = 0;
  int shared_b_refusals = 0;
  int64_t spill_bytes = 0;
};

// Compiles `model` (under tests/conv) with the GEMM template wherever it applies.
CompiledKernels CompileConv(const std::string& model) {
  CompiledKernels kernels;
  const std::string path = std::string(TILEFUSE_SOURCE_DIR) + "/tests/conv/" + model;
  CommandResult r = RunTilefuse("compile " + Quote(path) + " --backend cuda --gemm template --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("kernels")) {
    ADD_FAILURE() << "no JSON report:\n" << r.out << r.err;
    return kernels;
  }
  for (const nlohmann::json& k : j["kernels"]) {
    kernels.gemm_templates += k.value("mode", "") == "gemm template";
    kernels.shared_b_refusals += k.value("why_host", "").find("only a shared B") != std::string::npos;
    kernels.spill_bytes += k.value("spill_bytes", int64_t{0});
  }
  return kernels;
}

// NVRTC missing is "NVRTC not found (tried ...)"; a kernel NVRTC rejects fails the test.
bool NvrtcAvailable() {
  CommandResult r = RunTilefuse("compile " + Quote(std::string(TILEFUSE_SOURCE_DIR) + "/tests/conv/residual_block_bf16.onnxtxt") +
                                " --backend cuda --json");
  return r.err.find("NVRTC not found") == std::string::npos;
}

TEST(CliCompileCudaChannelsLastTest, HalfPrecisionConvolutionsAtBatchTwoTakeTheGemmTemplate) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "NVRTC not available";
  struct Case {
    const char* model;
    int convolutions;
  };
  for (const Case& c : {Case{"residual_block_bf16.onnxtxt", 2}, Case{"conv_bias_relu_stride2_bf16.onnxtxt", 1},
                        Case{"conv1x1_batch32_bf16.onnxtxt", 1}}) {
    SCOPED_TRACE(c.model);
    CompiledKernels kernels = CompileConv(c.model);
    EXPECT_EQ(kernels.gemm_templates, c.convolutions);
    EXPECT_EQ(kernels.shared_b_refusals, 0);
    EXPECT_EQ(kernels.spill_bytes, 0);
  }
}

TEST(CliCompileCudaChannelsLastTest, SwitchedOffTheBatchedNchwProductsGoToCublasLt) {
  if (!NvrtcAvailable()) GTEST_SKIP() << "NVRTC not available";
  setenv("TILEFUSE_CHANNELS_LAST", "0", 1);  // the child process inherits it
  CompiledKernels kernels = CompileConv("residual_block_bf16.onnxtxt");
  unsetenv("TILEFUSE_CHANNELS_LAST");
  EXPECT_EQ(kernels.gemm_templates, 0);
  EXPECT_GT(kernels.shared_b_refusals, 0);
}

}  // namespace
}  // namespace tilefuse

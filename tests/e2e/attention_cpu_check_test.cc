// The attention graphs the GPU template is written against (tests/attention, and the
// transformers exports in tests/attention/exports) also run through the CPU flash-attention
// kernel here, checked against the reference: the shared lowering, the view reads and the
// masked key blocks both backends skip are exercised on every CI run, GPU or not.
#include <gtest/gtest.h>

#include <filesystem>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

std::vector<std::string> AttentionGraphs() {
  std::vector<std::string> paths;
  const std::string root = std::string(TILEFUSE_SOURCE_DIR) + "/tests/attention";
  for (const char* folder : {"", "/exports"})
    for (const auto& e : std::filesystem::directory_iterator(root + folder))
      if (e.path().extension() == ".onnxtxt" || e.path().extension() == ".onnx") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

class CliAttentionCpuCheck : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { setenv("TILEFUSE_CACHE_DIR", (scratch_ / "cache").c_str(), 1); }
  void TearDown() override { unsetenv("TILEFUSE_CACHE_DIR"); }
  ScratchDir scratch_;
};

TEST_P(CliAttentionCpuCheck, FlashKernelMatchesTheReference) {
  CommandResult r = RunTilefuse("run " + Quote(GetParam()) + " --backend cpu --check --strict");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  // The attention group ran as the generated flash kernel, not on the reference kernels
  // (--strict: no group at all did).
  EXPECT_EQ(r.out.find("reference:"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(CliAttention, CliAttentionCpuCheck, testing::ValuesIn(AttentionGraphs()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::filesystem::path path(info.param);
                           std::string name = path.stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace tilefuse

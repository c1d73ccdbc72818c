// The small real models exported from PyTorch (tests/models/export_models.py, run on the
// GPU machine; expected outputs from onnxruntime) must import and match through the CLI,
// exactly as a user would run them: `tilefuse run DIR --check`.
#include <gtest/gtest.h>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

class RealModelTest : public testing::TestWithParam<const char*> {};

TEST_P(RealModelTest, ImportsAndMatchesOnnxRuntime) {
  std::string dir = std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/" + GetParam();
  testing_cli::CommandResult r = testing_cli::RunTilefuse("run " + testing_cli::Quote(dir) + " --check");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTest,
                         testing::Values("mlp_block", "attention_block", "gpt2_2layer", "llama_2layer"));

}  // namespace
}  // namespace tilefuse

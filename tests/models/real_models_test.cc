// The small real models exported from PyTorch (tests/models/export_models.py, run on the
// GPU machine; expected outputs from onnxruntime) must import and match through the CLI,
// exactly as a user would run them: `tilefuse run DIR --check`.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

struct CommandResult {
  int exit_code;
  std::string output;
};

CommandResult RunCommand(const std::string& command) {
  CommandResult result{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class RealModelTest : public testing::TestWithParam<const char*> {};

TEST_P(RealModelTest, ImportsAndMatchesOnnxRuntime) {
  std::string dir = std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/" + GetParam();
  CommandResult r = RunCommand(std::string(TILEFUSE_BINARY) + " run " + dir + " --check");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelTest,
                         testing::Values("mlp_block", "attention_block", "gpt2_2layer", "llama_2layer"));

}  // namespace

// `tilefuse tune`'s words: the precision and symbolic dims the model will run with (the tuned
// graph must be the one `run` compiles with the same words), and a bad word is exit 2.
#include <gtest/gtest.h>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

TEST(CliTune, TakesThePrecisionAndShapesTheModelRunsWith) {
  ScratchDir dir;
  testing_cli::WriteFile(dir / "m.onnxtxt", R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[rows, 8] x) => (float[rows, 8] y) {
  s = Mul (x, x)
  y = Relu (s)
})");
  const std::string model = Quote(dir / "m.onnxtxt");
  CommandResult tuned = RunTilefuse("tune " + model + " --backend cpu --precision high --shape rows=64 --budget 2 --json");
  EXPECT_EQ(tuned.exit_code, 0) << tuned.out << tuned.err;
  EXPECT_NE(tuned.out.find("\"kernels\""), std::string::npos) << tuned.out;
  CommandResult bad = RunTilefuse("tune " + model + " --backend cpu --precision tf32 --shape rows=64");
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--precision"), std::string::npos) << bad.err;
  CommandResult unshaped = RunTilefuse("tune " + model + " --backend cpu");
  EXPECT_EQ(unshaped.exit_code, 2) << unshaped.out << unshaped.err;
  EXPECT_NE(unshaped.err.find("('rows'): give its value"), std::string::npos) << unshaped.err;
}

}  // namespace
}  // namespace tilefuse

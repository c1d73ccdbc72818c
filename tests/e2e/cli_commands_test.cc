// `tilefuse --help`, `print` and `demo`, driven through the built binary.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::Quote;
using testing_cli::RunTilefuse;

std::string Example(const std::string& name) {
  return std::string(TILEFUSE_SOURCE_DIR) + "/examples/" + name + ".onnxtxt";
}

TEST(CliHelp, TopLevelAndEverySubcommandExplainThemselves) {
  CommandResult top = RunTilefuse("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* word : {"run", "print", "demo", "Examples:", "Exit codes"}) {
    EXPECT_NE(top.out.find(word), std::string::npos) << word << "\n" << top.out;
  }
  for (const char* sub : {"run", "print", "demo"}) {
    CommandResult r = RunTilefuse(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("Example"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(std::string("tilefuse ") + sub), std::string::npos) << r.out;
  }
  CommandResult run = RunTilefuse("run --help");
  for (const char* option : {"--inputs", "--random", "--check", "--json", "--dump-dir", "--backend"}) {
    EXPECT_NE(run.out.find(option), std::string::npos) << option;
  }
}

TEST(CliPrint, ShowsTheGraphAsImportedAndAfterPasses) {
  CommandResult imported = RunTilefuse("print " + Quote(Example("softmax_composite")));
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  EXPECT_NE(imported.out.find("softmax"), std::string::npos) << imported.out;
  EXPECT_NE(imported.out.find("as imported"), std::string::npos) << imported.out;

  // After decomposition the composite is gone and its primitives are there.
  CommandResult passed = RunTilefuse("print " + Quote(Example("softmax_composite")) + " --passes");
  ASSERT_EQ(passed.exit_code, 0) << passed.err;
  EXPECT_EQ(passed.out.find("softmax("), std::string::npos) << passed.out;
  for (const char* op : {"reduce_max", "exp", "reduce_sum", "div"}) {
    EXPECT_NE(passed.out.find(op), std::string::npos) << op << "\n" << passed.out;
  }
  CommandResult kept =
      RunTilefuse("print " + Quote(Example("softmax_composite")) + " --passes --keep-composites");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_NE(kept.out.find("softmax("), std::string::npos) << kept.out;
}

TEST(CliDemo, RunsEveryExampleAndAllAgree) {
  // The kernel cache the runtime tests share, not ~/.cache.
  setenv("TILEFUSE_CACHE_DIR", (std::filesystem::temp_directory_path() / "tilefuse_test_cache").c_str(), 1);
  CommandResult r = RunTilefuse("demo --repeats 2");
  unsetenv("TILEFUSE_CACHE_DIR");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TILEFUSE_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".onnxtxt") continue;
    ++examples;
    std::string name = entry.path().stem().string();
    size_t row = r.out.find(name + " ");
    ASSERT_NE(row, std::string::npos) << name << "\n" << r.out;
    std::string line = r.out.substr(row, r.out.find('\n', row) - row);
    EXPECT_NE(line.find("PASS"), std::string::npos) << line;
  }
  EXPECT_GE(examples, 9);
  // The plan is shown (the planner's own tests check each example's groups), with the
  // CPU timings and how many kernels are generated (the rest say they are not).
  EXPECT_NE(r.out.find("mlp_block"), std::string::npos);
  EXPECT_NE(r.out.find("row_reduction gemm gemm"), std::string::npos) << r.out;
  for (const char* column : {"fused ms", "unfused ms", "speedup", "gen"}) {
    EXPECT_NE(r.out.find(column), std::string::npos) << column << "\n" << r.out;
  }
}

TEST(CliDemo, EmptyExamplesFolderIsAnError) {
  testing_cli::ScratchDir empty;
  CommandResult r = RunTilefuse("demo --examples " + Quote(empty.path()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: not found: no .onnxtxt examples"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tilefuse

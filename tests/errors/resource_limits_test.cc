// Resource limits as errors: a model whose values would need more host memory than the
// machine can give is refused with exit code 2 and the node named, never a bad_alloc
// abort or an OOM kill. TILEFUSE_HOST_MEMORY_MB pins the budget, so the refusal does not
// depend on this machine's memory (and nothing large is ever allocated: a regression
// would abort on a 37 GiB request, not thrash).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::Quote;
using testing_cli::RunTilefuse;
using testing_cli::ScratchDir;

// z = x + y is [100000, 100000] f32 (37 GiB); its row sums are 400 KB. Fused, z is never
// materialised; unfused or in the f64 reference it would be.
constexpr const char* kHugeIntermediate = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
huge (float[100000,1] x, float[1,100000] y) => (float[100000] s)
{
  z = Add (x, y)
  axes = Constant <value = int64[1] {1}> ()
  s = ReduceSum <keepdims = 0> (z, axes)
}
)ONNX";

constexpr const char* kHugeInput = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
wide (float[100000,100000] big) => (float[100000,100000] out)
{
  out = Relu (big)
}
)ONNX";

// Cli*: they run the tilefuse binary (the sanitizer stage of scripts/test.sh builds none and skips them).
class CliResourceLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("TILEFUSE_HOST_MEMORY_MB", "1024", 1);
    testing_cli::WriteFile(dir_ / "huge.onnxtxt", kHugeIntermediate);
    testing_cli::WriteFile(dir_ / "wide.onnxtxt", kHugeInput);
  }
  void TearDown() override { unsetenv("TILEFUSE_HOST_MEMORY_MB"); }

  static void ExpectRefused(const testing_cli::CommandResult& r, const std::vector<std::string>& words) {
    EXPECT_EQ(r.exit_code, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    for (const std::string& word : words) EXPECT_NE(r.err.find(word), std::string::npos) << word << " in: " << r.err;
  }

  ScratchDir dir_;
};

TEST_F(CliResourceLimits, UnfusedIntermediateTooLargeForTheHostIsRefusedNamingTheNode) {
  ExpectRefused(RunTilefuse("run " + Quote(dir_ / "huge.onnxtxt") + " --backend cpu --no-fusion"),
                {"out of resources", "'z'", "f32[100000,100000]", "host memory", "1.00 GiB available"});
}

// The passes ran and dumped before the compile was refused: --dump-dir stays unwritten.
TEST_F(CliResourceLimits, RefusedCompileLeavesNoDumpFolder) {
  std::string dumps = dir_ / "stages";
  ExpectRefused(RunTilefuse("compile " + Quote(dir_ / "huge.onnxtxt") + " --no-fusion --dump-dir " + Quote(dumps)),
                {"out of resources", "'z'", "host memory"});
  EXPECT_FALSE(std::filesystem::exists(dumps));
}

TEST_F(CliResourceLimits, ReferenceValueTooLargeForTheHostIsRefusedNamingTheNode) {
  ExpectRefused(RunTilefuse("run " + Quote(dir_ / "huge.onnxtxt") + " --backend reference"),
                {"reference interpreter", "'z'", "f32[100000,100000]", "host memory"});
}

TEST_F(CliResourceLimits, InputTooLargeForTheHostIsRefusedNamingTheInput) {
  ExpectRefused(RunTilefuse("run " + Quote(dir_ / "wide.onnxtxt") + " --backend cpu"),
                {"random inputs", "'big'", "f32[100000,100000]", "host memory"});
}

// Fused, the 37 GiB value is never materialised: the graph fits and runs.
TEST_F(CliResourceLimits, FusedGraphWhoseLargeValueIsNeverMaterialisedStillRuns) {
  testing_cli::CommandResult r = RunTilefuse("run " + Quote(dir_ / "huge.onnxtxt") + " --backend cpu");
  EXPECT_EQ(r.exit_code, 0) << "stdout: " << r.out << "\nstderr: " << r.err;
}

}  // namespace
}  // namespace tilefuse

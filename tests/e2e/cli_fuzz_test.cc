// `tilefuse fuzz`, driven through the built binary: the summary, exit codes, --json.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"

namespace tilefuse {
namespace {

using testing_cli::CommandResult;
using testing_cli::RunTilefuse;

// The kernel cache the runtime tests share, not ~/.cache.
CommandResult RunWithTestCache(const std::string& args) {
  setenv("TILEFUSE_CACHE_DIR", (std::filesystem::temp_directory_path() / "tilefuse_test_cache").c_str(), 1);
  CommandResult r = RunTilefuse(args);
  unsetenv("TILEFUSE_CACHE_DIR");
  return r;
}

TEST(CliFuzz, TwentyGraphsFromSeedOneMatchTheReference) {
  CommandResult r = RunWithTestCache("fuzz --seed 1 --count 20");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  size_t summary = r.out.find("fuzz: 20 random graphs (seeds 1..20)");
  ASSERT_NE(summary, std::string::npos) << r.out;
  std::string line = r.out.substr(summary, r.out.find('\n', summary) - summary);
  EXPECT_NE(line.find(" 0 mismatch, 0 error"), std::string::npos) << line;
  // Most graphs are well conditioned: at least 15 of the 20 are compared and match.
  size_t match = line.rfind(" match,");
  ASSERT_NE(match, std::string::npos) << line;
  size_t number = line.rfind(' ', match - 1) + 1;
  EXPECT_GE(std::stoi(line.substr(number, match - number)), 15) << line;
}

TEST(CliFuzz, JsonReportCountsEveryGraph) {
  CommandResult r = RunWithTestCache("fuzz --seed 1 --count 3 --json");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["first_seed"], 1);
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["match"].get<int>() + j["ill_conditioned"].get<int>() + j["mismatch"].get<int>() + j["error"].get<int>(), 3);
  EXPECT_TRUE(j["failures"].empty()) << r.out;
  EXPECT_EQ(j["ill_conditioned_cases"].size(), j["ill_conditioned"].get<size_t>()) << r.out;
  // Each ill-conditioned graph carries the measurement that explains it.
  for (const nlohmann::json& c : j["ill_conditioned_cases"]) {
    EXPECT_GT(c["sensitivity_ratio"].get<double>(), 1) << c.dump();
    EXPECT_LE(c["error_ratio"].get<double>(), 10 * c["sensitivity_ratio"].get<double>()) << c.dump();
    EXPECT_NE(c["detail"].get<std::string>().find("the reference itself moves"), std::string::npos) << c.dump();
  }
}

// A lowering bug injected on purpose fails the run (exit 1) with mismatches listed.
TEST(CliFuzz, InjectedLoweringBugFailsTheRun) {
  CommandResult r = RunWithTestCache("fuzz --seed 0 --count 40 --inject-fault exp --json");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["mismatch"].get<int>(), 3) << r.out;
  EXPECT_EQ(j["failures"].size(), j["mismatch"].get<size_t>() + j["error"].get<size_t>());
}

TEST(CliFuzz, UsageErrorsExitTwoAndHelpExplains) {
  EXPECT_EQ(RunTilefuse("fuzz --count -3").exit_code, 2);
  EXPECT_EQ(RunTilefuse("fuzz --seed banana").exit_code, 2);
  EXPECT_EQ(RunTilefuse("fuzz --backend cuda").exit_code, 2);
  CommandResult help = RunTilefuse("fuzz --help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* word : {"--seed", "--count", "--backend", "--json", "replays", "Examples:", "Exit codes"})
    EXPECT_NE(help.out.find(word), std::string::npos) << word << "\n" << help.out;
}

// Random graphs' CUDA kernels compile through NVRTC for sm_90a without a GPU (--emit): seed
// 400153 (a max over a value broadcast along the row, followed by a sum of exp, once took the
// one-pass max and sum and printed a use of the running max before it existed), and 60 more.
TEST(CliFuzz, CudaKernelsOfRandomGraphsCompileForSm90a) {
  const std::filesystem::path emit = std::filesystem::temp_directory_path() / "tilefuse_fuzz_emit_test";
  std::filesystem::remove_all(emit);
  for (const char* range : {"--seed 400153 --count 1", "--seed 400100 --count 60"}) {
    CommandResult r = RunWithTestCache(std::string("fuzz ") + range + " --backend cuda --emit " + emit.string());
    if (r.exit_code != 0 && r.err.find("NVRTC") != std::string::npos && r.err.find("not available") != std::string::npos)
      GTEST_SKIP() << "NVRTC not available: " << r.err;
    EXPECT_EQ(r.exit_code, 0) << range << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.find("NVRTC failed"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(std::filesystem::exists(emit / "seed400153" / "cuda" / "kernels.cu"));
  std::filesystem::remove_all(emit);
}

// Seed 30061 on the CPU: x*y minus its mean over one element is 0 only if both uses of x*y
// are rounded alike; GCC fused the product into the subtraction (the product's rounding
// error, which a layer norm then scaled by 1/sqrt(eps)), until the loop kernels were
// compiled without contraction.
TEST(CliFuzz, ProductsKeepTheirRoundingOnTheCpu) {
  CommandResult r = RunWithTestCache("fuzz --seed 30061 --count 1");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 match, 0 ill-conditioned"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tilefuse

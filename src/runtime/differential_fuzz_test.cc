// Differential fuzzing (testing/differential_fuzz.h): random graphs compiled for the
// CPU, fused and unfused, must match the f64 reference interpreter. A failure names
// the seed; replay it with `tilefuse fuzz --seed N --count 1`.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "testing/differential_fuzz.h"

namespace tilefuse {
namespace {

DifferentialFuzzOptions Options(uint64_t first_seed, int count, bool fuse) {
  DifferentialFuzzOptions options;
  options.first_seed = first_seed;
  options.count = count;
  options.fuse = fuse;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  return options;
}

FuzzReport Fuzz(const DifferentialFuzzOptions& options) {
  auto report = RunDifferentialFuzz(options);
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (!report.ok()) return {};
  for (const FuzzCase& c : report->cases) {
    EXPECT_NE(c.verdict, FuzzVerdict::kError) << "seed " << c.seed << ": " << c.detail;
    if (c.verdict != FuzzVerdict::kMatch)
      std::printf("%s: seed %llu %s %s\n", FuzzVerdictName(c.verdict), static_cast<unsigned long long>(c.seed),
                  options.fuse ? "fused" : "unfused", c.detail.c_str());
  }
  return std::move(report).value();
}

// No mismatch is tolerated. A graph is ill-conditioned only when the judge measured
// that legitimate roundings of the reference already leave the tolerance (each printed
// with its numbers); at most 1% of the graphs may be, so the judge cannot explain a
// run away.
TEST(DifferentialFuzzTest, FusedMatchesReference) {
  FuzzReport r = Fuzz(Options(0, 300, true));
  int ill = r.Count(FuzzVerdict::kIllConditioned), mismatched = r.Count(FuzzVerdict::kMismatch);
  std::printf("fused: 300 random graphs, %d ill-conditioned, %d mismatched\n", ill, mismatched);
  EXPECT_EQ(mismatched, 0);
  EXPECT_LE(ill, 3);
}

TEST(DifferentialFuzzTest, UnfusedMatchesReference) {
  FuzzReport r = Fuzz(Options(10000, 150, false));
  int ill = r.Count(FuzzVerdict::kIllConditioned), mismatched = r.Count(FuzzVerdict::kMismatch);
  std::printf("unfused: 150 random graphs, %d ill-conditioned, %d mismatched\n", ill, mismatched);
  EXPECT_EQ(mismatched, 0);
  EXPECT_LE(ill, 2);
}

// The judge must not explain a lowering bug away: exp's results off by 1e-3 (ten times
// the tolerance's rtol) in every generated loop kernel. The same seeds match without it.
TEST(DifferentialFuzzTest, InjectedLoweringBugFailsTheRun) {
  DifferentialFuzzOptions options = Options(0, 100, true);
  options.fault.op = OpCode::kExp;
  options.fault.relative_error = 1e-3;
  FuzzReport r = Fuzz(options);
  int mismatched = r.Count(FuzzVerdict::kMismatch), ill = r.Count(FuzzVerdict::kIllConditioned);
  std::printf("exp off by 1e-3: 100 random graphs, %d mismatched, %d ill-conditioned\n", mismatched, ill);
  EXPECT_GE(mismatched, 10);
  EXPECT_LE(ill, 1);
  FuzzReport clean = Fuzz(Options(0, 100, true));
  EXPECT_EQ(clean.Count(FuzzVerdict::kMismatch), 0);
}

}  // namespace
}  // namespace tilefuse

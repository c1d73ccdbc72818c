// The C++ emitter's tunable parameters: the default prints the untuned pragmas, every
// other value reaches the pragma it names, recomputing drops the row buffer, and an
// invalid configuration cannot compile.
#include "codegen/cpp/cpp_kernel_config.h"

#include <gtest/gtest.h>

#include "codegen/cpp/cpp_emitter.h"
#include "testing/tune_test_models.h"

namespace tilefuse {
namespace {

using tune_test::LowerLastGroup;

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CppKernelConfigTest, DefaultPrintsTheUntunedPragmas) {
  std::string row = EmitCppFunction(LowerLastGroup(tune_test::SoftmaxModel(8, 64)));
  EXPECT_TRUE(Contains(row, "#pragma omp parallel\n")) << row;
  EXPECT_TRUE(Contains(row, "#pragma omp for schedule(static)\n")) << row;
  EXPECT_TRUE(Contains(row, "row0[i1]")) << row;
  std::string pointwise = EmitCppFunction(LowerLastGroup(tune_test::PointwiseModel(8, 64)));
  EXPECT_TRUE(Contains(pointwise, "#pragma omp parallel for simd schedule(static)\n")) << pointwise;
  EXPECT_FALSE(Contains(row + pointwise, "num_threads")) << row;
  EXPECT_FALSE(Contains(row + pointwise, "#error"));
}

TEST(CppKernelConfigTest, ParametersReachThePragmas) {
  std::string row = EmitCppFunction(LowerLastGroup(tune_test::SoftmaxModel(8, 64)), {3, CppSchedule::kDynamic, 8, true});
  EXPECT_TRUE(Contains(row, "#pragma omp parallel num_threads(3)\n")) << row;
  EXPECT_TRUE(Contains(row, "#pragma omp for schedule(dynamic, 8)\n")) << row;
  std::string pointwise =
      EmitCppFunction(LowerLastGroup(tune_test::PointwiseModel(8, 64)), {2, CppSchedule::kStaticChunk, 64, true});
  EXPECT_TRUE(Contains(pointwise, "#pragma omp parallel for simd schedule(static, 64) num_threads(2)\n")) << pointwise;
}

TEST(CppKernelConfigTest, RecomputeDropsTheRowBuffer) {
  CppKernelConfig recompute;
  recompute.row_buffer = false;
  std::string row = EmitCppFunction(LowerLastGroup(tune_test::SoftmaxModel(8, 64)), recompute);
  EXPECT_FALSE(Contains(row, "row0")) << row;
  EXPECT_FALSE(Contains(row, "__builtin_malloc")) << row;
}

TEST(CppKernelConfigTest, InvalidConfigurationsCannotCompile) {
  EXPECT_EQ(CppConfigErrorDirective({}), "");
  EXPECT_EQ(CppConfigErrorDirective({4, CppSchedule::kDynamic, 16, false}), "");
  EXPECT_TRUE(Contains(CppConfigErrorDirective({-1, CppSchedule::kStatic, 0, true}), "#error"));
  EXPECT_TRUE(Contains(CppConfigErrorDirective({0, CppSchedule::kDynamic, 0, true}), "#error"));
  std::string bad = EmitCppFunction(LowerLastGroup(tune_test::SoftmaxModel(8, 64)), {0, CppSchedule::kStaticChunk, -2, true});
  EXPECT_EQ(bad.rfind("#error", 0), 0u) << bad;
}

TEST(CppKernelConfigTest, ScheduleNamesRoundTrip) {
  for (CppSchedule s : {CppSchedule::kStatic, CppSchedule::kStaticChunk, CppSchedule::kDynamic}) {
    CppSchedule parsed = CppSchedule::kStatic;
    ASSERT_TRUE(ParseCppSchedule(CppScheduleName(s), &parsed));
    EXPECT_EQ(parsed, s);
  }
  CppSchedule unused;
  EXPECT_FALSE(ParseCppSchedule("guided", &unused));
}

}  // namespace
}  // namespace tilefuse

// A template's scalar program printed for one element: the powers multiplied out, the
// values the rewrite adds named apart from the ones the caller reads by their ids.
#include "codegen/cuda/cuda_scalar_program.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"
#include "testing/file_check.h"

namespace tilefuse {
namespace {

TEST(CudaElementProgramTest, CubeIsMultipliedOutUnderItsCallersName) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {16});
  Value cube = b.Binary(OpCode::kPow, x, b.Scalar(3, DType::kF32));
  b.Output(b.Div(b.Add(x, cube), x), "y");
  Kernel k = LowerSingleGroup(b);
  ASSERT_EQ(k.values.size(), 5u);  // x, 3, x^3, x + x^3, (x + x^3) / x
  // The square is value 2 of the rewritten program: t2, beside the caller's v2 (the cube).
  std::string program = CudaElementProgram(k, {4}, {{0, "acc"}}, {"row", "col"}, "  ");
  EXPECT_TRUE(MatchesChecks(program, R"(
    CHECK:      const float v0 = acc;
    CHECK-NEXT: const float t2 = float(v0 * v0);
    CHECK-NEXT: const float v2 = float(t2 * v0);
    CHECK-NEXT: const float v3 = float(v0 + v2);
    CHECK-NEXT: const float v4 = float(v3 / v0);
  )")) << program;
}

}  // namespace
}  // namespace tilefuse

// The emission rewrites, text in (a small graph lowered to its Kernel), text out (the
// rewritten Kernel printed): which powers and divisions change, and which keep their form.
#include "codegen/kernel_rewrites.h"

#include <gtest/gtest.h>

#include "codegen/kernel_printer.h"
#include "testing/lower_test_util.h"
#include "testing/file_check.h"

namespace tilefuse {
namespace {

std::string Rewritten(GraphBuilder& b, const EmissionRewrites& rewrites = {}) {
  return PrintKernel(RewriteForEmission(LowerSingleGroup(b), rewrites));
}

TEST(KernelRewritesTest, RowInvariantDivisorBecomesOneReciprocalPerRow) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value sum = b.Reduce(OpCode::kReduceSum, x, {1}, /*keepdims=*/true);
  b.Output(b.Div(x, sum), "y");
  b.Output(b.Div(b.Unary(OpCode::kExp, x), sum), "z");
  EXPECT_TRUE(MatchesChecks(Rewritten(b), R"(
    CHECK:      %v0 = load b0[(i0 * 8 + i1)] : f32 [inner]
    CHECK-NEXT: %v1 = accumulator r0 : f32
    CHECK-NEXT: %v2 = reciprocal %v1 : f32
    CHECK-NEXT: %v3 = mul %v0, %v2 : f32 [inner]
    CHECK-NEXT: %v4 = exp %v0 : f32 [inner]
    CHECK-NEXT: %v5 = mul %v4, %v2 : f32 [inner]
    CHECK-NEXT: r0 = reduce_sum %v0 over 8 : f32
    CHECK-NOT:  div
    CHECK:      store b1[(i0 * 8 + i1)] = %v3
    CHECK-NEXT: store b2[(i0 * 8 + i1)] = %v5
  )"));
}

// A division a rounding reads keeps its form: floor, a cast to an integer or an 8-bit float,
// whose whole steps a reciprocal's one-ulp error could cross (a quantizer's round(x / scale)).
TEST(KernelRewritesTest, DivisionsThatARoundingReadsStayDivisions) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value peak = b.Reduce(OpCode::kReduceMax, x, {1}, /*keepdims=*/true);
  b.Output(b.Unary(OpCode::kFloor, b.Div(x, peak)), "floor");
  b.Output(b.Cast(b.Div(b.Unary(OpCode::kExp, x), peak), DType::kI8), "int8");
  b.Output(b.Cast(b.Div(b.Unary(OpCode::kNeg, x), peak), DType::kF8E4M3), "f8");
  const std::string text = Rewritten(b);
  EXPECT_TRUE(MatchesChecks(text, R"(
    CHECK:     div %v0, %v1
    CHECK:     floor
    CHECK:     div
    CHECK:     cast
    CHECK:     div
    CHECK-NOT: reciprocal
  )")) << text;
}

TEST(KernelRewritesTest, SquaresAndCubesBecomeProducts) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {16});
  Value square = b.Binary(OpCode::kPow, x, b.Scalar(2, DType::kF32));
  Value cube = b.Binary(OpCode::kPow, x, b.Scalar(3, DType::kF32));
  b.Output(b.Add(square, cube), "y");
  EXPECT_TRUE(MatchesChecks(Rewritten(b), R"(
    CHECK:      %v0 = load b0[i0] : f32
    CHECK-NEXT: %v1 = constant 2 : f32
    CHECK-NEXT: %v2 = mul %v0, %v0 : f32
    CHECK-NEXT: %v3 = constant 3 : f32
    CHECK-NEXT: %v4 = mul %v0, %v0 : f32
    CHECK-NEXT: %v5 = mul %v4, %v0 : f32
    CHECK-NEXT: %v6 = add %v2, %v5 : f32
    CHECK-NOT:  pow
    CHECK:      store b1[i0] = %v6
  )"));
}

// Other exponents and integer powers stay pow; a division by a value that is not per row
// (a pointwise kernel's, or with the rewrite off) stays a division.
TEST(KernelRewritesTest, OtherPowersAndDivisionsKeepTheirForm) {
  GraphBuilder root;
  Value x = root.Parameter("x", DType::kF32, {16});
  root.Output(root.Binary(OpCode::kPow, x, root.Scalar(0.5, DType::kF32)), "y");
  EXPECT_TRUE(MatchesChecks(Rewritten(root), "CHECK: %v2 = pow %v0, %v1 : f32"));
  GraphBuilder integer;
  Value n = integer.Parameter("n", DType::kI32, {16});
  integer.Output(integer.Binary(OpCode::kPow, n, integer.Scalar(2, DType::kI32)), "y");
  EXPECT_TRUE(MatchesChecks(Rewritten(integer), "CHECK: %v2 = pow %v0, %v1 : i32"));
  GraphBuilder pointwise;
  Value p = pointwise.Parameter("p", DType::kF32, {16});
  pointwise.Output(pointwise.Div(p, pointwise.Scalar(3, DType::kF32)), "y");
  EXPECT_TRUE(MatchesChecks(Rewritten(pointwise), "CHECK: %v2 = div %v0, %v1 : f32"));
  GraphBuilder rows;
  Value r = rows.Parameter("r", DType::kF32, {4, 8});
  rows.Output(rows.Div(r, rows.Reduce(OpCode::kReduceMax, r, {1}, /*keepdims=*/true)), "y");
  EXPECT_TRUE(MatchesChecks(Rewritten(rows, {.row_invariant_divisors = false}), R"(
    CHECK: %v2 = div %v0, %v1 : f32 [inner]
    CHECK-NOT: reciprocal
  )"));
}

// A value the rewrite adds shifts the later ids: arguments, gathered index values and
// stores follow, and `new_ids` says where each value went.
TEST(KernelRewritesTest, LaterValuesAreRenumberedEverywhere) {
  GraphBuilder b;
  Value table = b.Parameter("table", DType::kF32, {64});
  Value x = b.Parameter("x", DType::kF32, {16});
  Value cube = b.Binary(OpCode::kPow, x, b.Scalar(3, DType::kF32));
  b.Output(b.Add(b.Gather(table, b.Cast(cube, DType::kI64), 0), cube), "y");
  const Kernel k = LowerSingleGroup(b);
  std::vector<int> new_ids;
  ASSERT_EQ(k.values.size(), 12u);
  EXPECT_TRUE(MatchesChecks(PrintKernel(RewriteForEmission(k, {}, &new_ids)), R"(
    CHECK:      %v2 = mul %v0, %v0 : f32
    CHECK-NEXT: %v3 = mul %v2, %v0 : f32
    CHECK-NEXT: %v4 = cast %v3 : i64
    CHECK:      %v10 = where %v7, %v9, %v5 : i64
    CHECK-NEXT: %v11 = load b1[tf_clamp(v10, 0, 63)] : f32
    CHECK-NEXT: %v12 = add %v11, %v3 : f32
    CHECK-NEXT: store b2[i0] = %v12
  )"));
  EXPECT_EQ(new_ids, (std::vector<int>{0, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
}

// With stored_casts, a store of cast(x) to the stored dtype stores x (the store's conversion
// rounds as the cast does); a cast to another dtype than the store's keeps its place, and
// without the option every cast stays.
TEST(KernelRewritesTest, StoredCastsGiveWayToTheStoresConversion) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {16});
  Value y = b.Add(x, x);
  b.Output(b.Cast(y, DType::kBF16), "to_bf16");
  b.Output(b.Cast(b.Cast(y, DType::kF16), DType::kF32), "through_f16");
  const Kernel k = LowerSingleGroup(b);
  EXPECT_TRUE(MatchesChecks(PrintKernel(RewriteForEmission(k, {.stored_casts = true})), R"(
    CHECK:      %v1 = add %v0, %v0 : f32
    CHECK:      %v3 = cast %v1 : f16
    CHECK:      store b1[i0] = %v1
    CHECK-NEXT: store b2[i0] = %v3
  )"));
  EXPECT_TRUE(MatchesChecks(PrintKernel(RewriteForEmission(k)), R"(
    CHECK:      %v2 = cast %v1 : bf16
    CHECK:      store b1[i0] = %v2
  )"));
}

}  // namespace
}  // namespace tilefuse

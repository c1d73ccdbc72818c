// The Kernel IR's text form: every part of a small row kernel on its own line, in order.
#include "codegen/kernel_printer.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"
#include "testing/file_check.h"

namespace tilefuse {
namespace {

TEST(KernelPrinterTest, RowKernelPrintsDomainBuffersValuesReductionsAndStores) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 8});
  Value max = b.Reduce(OpCode::kReduceMax, x, {1}, /*keepdims=*/true);
  b.Output(b.Sub(x, max), "y");
  EXPECT_TRUE(MatchesChecks(PrintKernel(LowerSingleGroup(b)), R"(
    CHECK: kernel tf_group0_row_reduction row_reduction: outer 4 x inner 8
    CHECK-NEXT: b0 = %0 f32[32] in
    CHECK-NEXT: b1 = %3 f32[32] out
    CHECK-NEXT: %v0 = load b0[(i0 * 8 + i1)] : f32 [inner]
    CHECK-NEXT: %v1 = accumulator r0 : f32
    CHECK-NEXT: %v2 = sub %v0, %v1 : f32 [inner]
    CHECK-NEXT: r0 = reduce_max %v0 over 8 : f32
    CHECK-NEXT: store b1[(i0 * 8 + i1)] = %v2
  )"));
}

// The leaves lowering makes (random, constant, index) and a gathered index, which prints
// its value as PrintIndex does.
TEST(KernelPrinterTest, LeavesPrintTheirOperands) {
  Kernel k;
  k.name = "k";
  k.outer = 16;
  k.buffers = {{3, DType::kF32, 64, false}, {5, DType::kF32, 16, true}};
  ScalarValue random;
  random.kind = ScalarValue::Kind::kRandom;
  random.seed = 7;
  random.index = IndexVar(0, 16);
  k.values.push_back(random);
  ScalarValue half;
  half.constant = 0.5;
  k.values.push_back(half);
  ScalarValue index;
  index.kind = ScalarValue::Kind::kIndex;
  index.dtype = DType::kI64;
  index.index = IndexMod(IndexVar(0, 16), 4);
  k.values.push_back(index);
  ScalarValue gather;
  gather.kind = ScalarValue::Kind::kLoad;
  gather.buffer = 0;
  gather.index = IndexValue(2, 0, 63);
  k.values.push_back(gather);
  k.stores.push_back({1, 3, IndexVar(0, 16)});
  EXPECT_TRUE(MatchesChecks(PrintKernel(k), R"(
    CHECK:      kernel k pointwise: outer 16 x inner 1
    CHECK-NEXT: b0 = %3 f32[64] in
    CHECK-NEXT: b1 = %5 f32[16] out
    CHECK-NEXT: %v0 = random seed 7 at i0 : f32
    CHECK-NEXT: %v1 = constant 0.5 : f32
    CHECK-NEXT: %v2 = index (i0 % 4) : i64
    CHECK-NEXT: %v3 = load b0[v2] : f32
    CHECK-NEXT: store b1[i0] = %v3
  )"));
}

}  // namespace
}  // namespace tilefuse

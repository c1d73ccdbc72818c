// Splitting a pointwise kernel's flat loop into rows: the divisions of the flat index that
// views put there fold away along a row, and the split kernel computes the same values
// (every example and tests/conv case runs split on the CPU against the reference, with
// poisoned outputs: runtime/compiled_graph_test).
#include "codegen/split_rows.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"

namespace tilefuse {
namespace {

// Does a division or remainder of an expression of loop variable 1 remain?
bool DividesVar1(const Index& index) {
  if (!index) return false;
  if ((index->kind == IndexExpr::Kind::kDiv || index->kind == IndexExpr::Kind::kMod) && UsesVar(index->a, 1)) return true;
  return DividesVar1(index->a) || DividesVar1(index->b);
}

TEST(SplitPointwiseRows, TransposeRowsHaveNoDivisionsAlongThem) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {8, 16, 12});
  b.Output(b.Unary(OpCode::kRelu, b.Transpose(x, {0, 2, 1})), "y");  // [8, 12, 16]
  Kernel flat = LowerSingleGroup(b);
  ASSERT_EQ(flat.outer, 8 * 12 * 16);
  Kernel split = SplitPointwiseRows(flat);
  EXPECT_EQ(split.inner, 16);
  EXPECT_EQ(split.outer, 8 * 12);
  bool reads_along_row = false;
  for (const ScalarValue& v : split.values) {
    EXPECT_FALSE(DividesVar1(v.index)) << PrintIndex(v.index, {"i0", "i1"});
    reads_along_row = reads_along_row || (v.kind == ScalarValue::Kind::kLoad && v.inner);
  }
  EXPECT_TRUE(reads_along_row);
  ASSERT_EQ(split.stores.size(), 1u);
  EXPECT_EQ(PrintIndex(split.stores[0].index, {"i0", "i1"}), "(i0 * 16 + i1)");
}

TEST(SplitPointwiseRows, ContiguousKernelsStayFlat) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {64, 256});
  b.Output(b.Unary(OpCode::kRelu, x), "y");
  Kernel flat = LowerSingleGroup(b);
  Kernel split = SplitPointwiseRows(flat);
  EXPECT_EQ(split.outer, flat.outer);
  EXPECT_EQ(split.inner, 1);
}

}  // namespace
}  // namespace tilefuse

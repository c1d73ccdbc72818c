#include "passes/pad_gemm_columns.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

Graph ProductWithConstant(DType dtype, int64_t columns) {
  GraphBuilder b;
  Value a = b.Parameter("a", dtype, {3, 2, 8});
  Value w = b.Constant(Tensor::Random(dtype, {8, columns}, 11));
  b.Output(b.MatMul(a, w), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

TEST(PadGemmColumnsTest, AnUnalignedConstantOperandIsPaddedAndTheProductSlicedWithTheSameValues) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    const int64_t columns = 1029;  // 2058 / 4116 bytes a row: not a multiple of 16
    Graph graph = ProductWithConstant(dtype, columns);
    auto padded = PadGemmColumns(graph);
    ASSERT_TRUE(padded.ok()) << padded.status().ToString();
    EXPECT_EQ(CountOps(*padded, OpCode::kSlice), 1);
    const Node& out = padded->node(padded->outputs()[0].node);
    EXPECT_EQ(out.op, OpCode::kSlice);
    EXPECT_EQ(out.shape, (Shape{3, 2, columns}));
    const Node& product = padded->node(out.inputs[0]);
    ASSERT_EQ(product.op, OpCode::kMatMul);
    const int64_t wide = product.shape.back();
    EXPECT_EQ(wide * DTypeSize(dtype) % 16, 0);
    EXPECT_GT(wide, columns);
    EXPECT_LT(wide - columns, 16 / DTypeSize(dtype));

    const Tensor a = Tensor::Random(dtype, {3, 2, 8}, 5);
    auto expected = RunReference(graph, {a});
    auto actual = RunReference(*padded, {a});
    ASSERT_TRUE(expected.ok() && actual.ok());
    EXPECT_EQ((*actual)[0].shape(), (*expected)[0].shape());
    EXPECT_EQ((*actual)[0].ToDoubles(), (*expected)[0].ToDoubles()) << DTypeName(dtype);
  }
}

TEST(PadGemmColumnsTest, AlignedNarrowOrComputedOperandsAreLeftAlone) {
  for (Graph graph : {ProductWithConstant(DType::kBF16, 1032), ProductWithConstant(DType::kBF16, 1023 - 1000)}) {
    auto padded = PadGemmColumns(graph);
    ASSERT_TRUE(padded.ok());
    EXPECT_EQ(CountOps(*padded, OpCode::kSlice), 0);
  }
  GraphBuilder b;  // a right operand computed at run time: nothing to pad once
  Value a = b.Parameter("a", DType::kBF16, {4, 8});
  Value w = b.Parameter("w", DType::kBF16, {8, 1029});
  b.Output(b.MatMul(a, w), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto padded = PadGemmColumns(*graph);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(CountOps(*padded, OpCode::kSlice), 0);
}

}  // namespace
}  // namespace tilefuse

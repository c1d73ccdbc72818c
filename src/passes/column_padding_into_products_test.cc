#include "passes/column_padding_into_products.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

// concat([reshape(h · w'), zeros], last axis): logits [2, 3, 1001] padded to 1008 columns, w'
// the transpose of a [1001][16] weight (`transposed`) or a [16][1001] weight itself.
Graph PaddedLogits(bool transposed, bool zeros = true, bool product_also_output = false) {
  GraphBuilder b;
  Value h = b.Parameter("h", DType::kBF16, {6, 16});
  Value w = transposed ? b.Transpose(b.Parameter("w", DType::kBF16, {1001, 16}), {1, 0}) : b.Parameter("w", DType::kBF16, {16, 1001});
  Value product = b.MatMul(h, w);
  Value logits = b.Reshape(product, {2, 3, 1001});
  Value fill = b.BroadcastTo(b.Scalar(zeros ? 0.0 : 1.0, DType::kBF16), {2, 3, 7});
  b.Output(b.Concat({logits, fill}, 2), "padded");
  if (product_also_output) b.Output(product, "product");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

TEST(ColumnPaddingIntoProductsTest, TheProductWritesThePaddedColumnsWithTheSameValues) {
  for (bool transposed : {true, false}) {
    Graph graph = PaddedLogits(transposed);
    auto moved = MoveColumnPaddingIntoProducts(graph);
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    const Node& out = moved->node(moved->outputs()[0].node);
    ASSERT_EQ(out.op, OpCode::kReshape);
    EXPECT_EQ(out.shape, (Shape{2, 3, 1008}));
    const Node& product = moved->node(out.inputs[0]);
    ASSERT_EQ(product.op, OpCode::kMatMul);
    EXPECT_EQ(product.shape, (Shape{6, 1008}));
    // wᵀ keeps its transpose outermost (the GEMM template reads w K-major through it).
    EXPECT_EQ(moved->node(product.inputs[1]).op, transposed ? OpCode::kTranspose : OpCode::kConcat);

    const Tensor h = Tensor::Random(DType::kBF16, {6, 16}, 5);
    const Tensor w = Tensor::Random(DType::kBF16, transposed ? Shape{1001, 16} : Shape{16, 1001}, 7);
    auto expected = RunReference(graph, {h, w});
    auto actual = RunReference(*moved, {h, w});
    ASSERT_TRUE(expected.ok() && actual.ok());
    EXPECT_EQ((*actual)[0].shape(), (*expected)[0].shape());
    EXPECT_EQ((*actual)[0].ToDoubles(), (*expected)[0].ToDoubles());
  }
}

TEST(ColumnPaddingIntoProductsTest, NonZeroPaddingOrAProductReadElsewhereIsLeftAlone) {
  for (Graph graph : {PaddedLogits(true, /*zeros=*/false), PaddedLogits(true, true, /*product_also_output=*/true)}) {
    auto moved = MoveColumnPaddingIntoProducts(graph);
    ASSERT_TRUE(moved.ok());
    EXPECT_EQ(CountOps(*moved, OpCode::kConcat), 1);
    EXPECT_EQ(moved->node(moved->outputs()[0].node).op, OpCode::kConcat);
  }
}

}  // namespace
}  // namespace tilefuse

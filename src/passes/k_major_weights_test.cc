#include "passes/k_major_weights.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

TEST(KMajorWeightsTest, AnF32ConstantOperandIsStoredTransposedOnceAndTheProductsKeepTheirValues) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {3, 5, 8});
  Value w = b.Constant(Tensor::Random(DType::kF32, {8, 12}, 7));
  b.Output(b.MatMul(x, w), "y");
  b.Output(b.Unary(OpCode::kRelu, b.MatMul(b.Unary(OpCode::kNeg, x), w)), "z");  // a second reader of the same weight
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto stored = StoreF32WeightsKMajor(*graph);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(CountOps(*stored, OpCode::kTranspose), 1);  // one K-major copy for both products
  for (const Node& n : stored->nodes()) {
    if (n.op != OpCode::kMatMul) continue;
    const Node& operand = stored->node(n.inputs[1]);
    ASSERT_EQ(operand.op, OpCode::kTranspose);
    EXPECT_EQ(operand.attrs.perm, (std::vector<int64_t>{1, 0}));
    const Node& source = stored->node(operand.inputs[0]);
    EXPECT_EQ(source.op, OpCode::kConstant);
    EXPECT_EQ(source.shape, (Shape{12, 8}));  // [N][K]
  }
  const Tensor input = Tensor::Random(DType::kF32, {3, 5, 8}, 3);
  auto expected = RunReference(*graph, {input});
  auto actual = RunReference(*stored, {input});
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (size_t i = 0; i < expected->size(); ++i) EXPECT_EQ((*actual)[i].ToDoubles(), (*expected)[i].ToDoubles()) << i;
}

TEST(KMajorWeightsTest, HalfPrecisionComputedAndUnalignedOperandsAreLeftAlone) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {4, 6});
  Value h = b.Parameter("h", DType::kBF16, {4, 8});
  Value w = b.Parameter("w", DType::kF32, {8, 4});
  b.Output(b.MatMul(h, b.Constant(Tensor::Random(DType::kBF16, {8, 4}, 1))), "half");  // wgmma reads bf16 B MN-major
  b.Output(b.MatMul(b.Parameter("x8", DType::kF32, {4, 8}), w), "computed");            // no copy to make once
  b.Output(b.MatMul(x, b.Constant(Tensor::Random(DType::kF32, {6, 4}, 2))), "unaligned");  // K = 6: rows of 24 bytes
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto stored = StoreF32WeightsKMajor(*graph);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(CountOps(*stored, OpCode::kTranspose), 0);
}

}  // namespace
}  // namespace tilefuse

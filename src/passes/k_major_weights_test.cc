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
  auto stored = StoreWeightsKMajor(*graph, {.f32 = true});
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
  b.Output(b.MatMul(b.Parameter("x4", DType::kF32, {4, 4}), b.Constant(Tensor::Random(DType::kF32, {4, 6}, 3))),
           "unaligned_n");  // N = 6: padded first (pad_gemm_columns), taken then
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto stored = StoreWeightsKMajor(*graph, {.f32 = true});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(CountOps(*stored, OpCode::kTranspose), 0);
}

TEST(KMajorWeightsTest, HalfPrecisionOperandsWithUnalignedRowsOfNAreStoredKMajor) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {2, 3, 16});
  b.Output(b.MatMul(x, b.Constant(Tensor::Random(DType::kBF16, {16, 1029}, 1))), "vocab");     // rows of 2058 bytes
  b.Output(b.MatMul(x, b.Constant(Tensor::Random(DType::kBF16, {16, 64}, 2))), "aligned");     // rows of 128 bytes: as it is
  b.Output(b.MatMul(b.Parameter("x12", DType::kBF16, {3, 12}), b.Constant(Tensor::Random(DType::kBF16, {12, 1029}, 3))),
           "short_k");                                                                            // K rows of 24 bytes: TMA cannot read them
  b.Output(b.MatMul(b.Parameter("x32", DType::kF32, {3, 16}), b.Constant(Tensor::Random(DType::kF32, {16, 1029}, 4))),
           "f32");  // f32 only under TF32
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto stored = StoreWeightsKMajor(*graph, {.unaligned_half = true});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  ASSERT_EQ(CountOps(*stored, OpCode::kTranspose), 1);
  for (const Node& n : stored->nodes()) {
    if (n.op != OpCode::kTranspose) continue;
    const Node& source = stored->node(n.inputs[0]);
    EXPECT_EQ(source.op, OpCode::kConstant);
    EXPECT_EQ(source.dtype, DType::kBF16);
    EXPECT_EQ(source.shape, (Shape{1029, 16}));
  }
  const std::vector<Tensor> inputs = {Tensor::Random(DType::kBF16, {2, 3, 16}, 5), Tensor::Random(DType::kBF16, {3, 12}, 6),
                                      Tensor::Random(DType::kF32, {3, 16}, 7)};
  auto expected = RunReference(*graph, inputs);
  auto actual = RunReference(*stored, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (size_t i = 0; i < expected->size(); ++i) EXPECT_EQ((*actual)[i].ToDoubles(), (*expected)[i].ToDoubles()) << i;
}

}  // namespace
}  // namespace tilefuse

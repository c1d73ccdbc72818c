#include "passes/outer_products.h"

#include <gtest/gtest.h>

#include "passes/decompose.h"
#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;
using pass_testing::Product;

// The rewritten graph's output against the product's, both by the reference, on random inputs.
void ExpectSameValues(const Graph& graph, const Graph& rewritten, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int in : graph.inputs()) inputs.push_back(Tensor::Random(graph.node(in).dtype, graph.node(in).shape, seed++));
  auto expected = RunReference(graph, inputs);
  auto actual = RunReference(rewritten, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  EXPECT_EQ((*actual)[0].shape(), (*expected)[0].shape());
  EXPECT_EQ((*actual)[0].dtype(), (*expected)[0].dtype());
  EXPECT_EQ((*actual)[0].ToDoubles(), (*expected)[0].ToDoubles());
}

TEST(OuterProductsTest, ARotaryEmbeddingsAnglesAreAMultiply) {
  // transformers' LLaMA: inv_freq[1, 32, 1] (f32) · positions[1, 1, T].
  Graph graph = Product(DType::kF32, {1, 32, 1}, {1, 1, 7});
  auto rewritten = RewriteOuterProducts(graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 0);
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMul), 1);
  ExpectSameValues(graph, *rewritten, 1);
}

TEST(OuterProductsTest, BatchDimsBroadcastAsTheProductsDid) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32, DType::kI64}) {
    Graph graph = Product(dtype, {3, 1, 5, 1}, {4, 1, 6});
    auto rewritten = RewriteOuterProducts(graph);
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
    EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 0) << DTypeName(dtype);
    ExpectSameValues(graph, *rewritten, 11);
  }
}

TEST(OuterProductsTest, AttentionOverASingleKeyStaysForTheMatcher) {
  // A decode step's first token over a cache of one: P[1, 1] · V[1, 64] is an outer product.
  GraphBuilder b;
  Value q = b.Parameter("q", DType::kBF16, {1, 12, 1, 64});
  Value k = b.Parameter("k", DType::kBF16, {1, 12, 1, 64});
  Value v = b.Parameter("v", DType::kBF16, {1, 12, 1, 64});
  Value probs = b.Softmax(b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 0.125), -1);
  b.Output(b.MatMul(probs, v), "out");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto decomposed = DecomposeComposites(*graph);
  ASSERT_TRUE(decomposed.ok()) << decomposed.status().ToString();
  auto rewritten = RewriteOuterProducts(*decomposed);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 2);
}

TEST(OuterProductsTest, ProductsOverMoreThanOneElementStay) {
  Graph graph = Product(DType::kBF16, {4, 2}, {2, 8});
  auto rewritten = RewriteOuterProducts(graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 1);
}

}  // namespace
}  // namespace tilefuse

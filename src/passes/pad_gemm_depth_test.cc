#include "passes/pad_gemm_depth.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "passes/k_major_weights.h"
#include "passes/pass_test_util.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;
using pass_testing::Product;

// The MatMul of `g` (one).
const Node& TheProduct(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpCode::kMatMul) return n;
  ADD_FAILURE() << "no product";
  return g.node(0);
}

TEST(PadGemmDepthTest, AttentionsProductOfProbabilitiesIsNotPadded) {
  // BERT at 777 tokens: P·V's depth is the keys (777, not a multiple of 8) and it is large
  // enough to pad, but the attention template takes any number of keys, and a padded P is no
  // attention the matcher finds.
  GraphBuilder b;
  Value p = b.Parameter("scores", DType::kBF16, {8, 12, 777, 777});
  Value v = b.Parameter("v", DType::kBF16, {8, 12, 777, 64});
  Value x = b.Cast(p, DType::kF32);
  Value e = b.Unary(OpCode::kExp, b.Sub(x, b.BroadcastTo(b.Reduce(OpCode::kReduceMax, x, {3}, true), {8, 12, 777, 777})));
  Value probs = b.Div(e, b.BroadcastTo(b.Reduce(OpCode::kReduceSum, e, {3}, true), {8, 12, 777, 777}));
  b.Output(b.MatMul(b.Cast(probs, DType::kBF16), v), "o");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto padded = PadGemmDepth(*graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  EXPECT_EQ(CountOps(*padded, OpCode::kConcat), 0);
  EXPECT_EQ(padded->node(TheProduct(*padded).inputs[0]).shape.back(), 777);
  // The same product of another value is padded.
  Graph plain = Product(DType::kBF16, {8, 12, 777, 777}, {8, 12, 777, 64});
  auto padded_plain = PadGemmDepth(plain);
  ASSERT_TRUE(padded_plain.ok());
  EXPECT_EQ(CountOps(*padded_plain, OpCode::kConcat), 2);
}

TEST(PadGemmDepthTest, AnUnalignedDepthIsPaddedWithZerosAndTheProductKeepsItsValues) {
  // Large enough to be padded (2^30 multiply-adds), small enough for the reference: the
  // values are checked on a graph of the same form with the threshold's shapes scaled down
  // below; here the rewrite's shapes.
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    Graph graph = Product(dtype, {2, 1024, 4099}, {4099, 256});
    auto padded = PadGemmDepth(graph);
    ASSERT_TRUE(padded.ok()) << padded.status().ToString();
    const Node& product = TheProduct(*padded);
    const int64_t k = padded->node(product.inputs[0]).shape.back();
    EXPECT_EQ(k * DTypeSize(dtype) % 16, 0) << DTypeName(dtype);
    EXPECT_GT(k, 4099);
    EXPECT_LT(k - 4099, static_cast<int64_t>(16 / DTypeSize(dtype)));
    EXPECT_EQ(padded->node(product.inputs[1]).shape, (Shape{k, 256}));
    EXPECT_EQ(product.shape, (Shape{2, 1024, 256}));
    EXPECT_EQ(CountOps(*padded, OpCode::kConcat), 2);
  }
}

TEST(PadGemmDepthTest, PaddedProductsComputeTheSameValues) {
  // Batched operands on both sides; K = 4099 (bf16: 7 more). Computed by the reference.
  Graph graph = Product(DType::kBF16, {2, 64, 4099}, {2, 4099, 4096});
  auto padded = PadGemmDepth(graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  ASSERT_EQ(CountOps(*padded, OpCode::kConcat), 2) << "2 x 64 x 4096 x 4099 multiply-adds: padded";
  const std::vector<Tensor> inputs = {Tensor::Random(DType::kBF16, {2, 64, 4099}, 3),
                                      Tensor::Random(DType::kBF16, {2, 4099, 4096}, 4)};
  auto expected = RunReference(graph, inputs);
  auto actual = RunReference(*padded, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  EXPECT_EQ((*actual)[0].shape(), (*expected)[0].shape());
  EXPECT_EQ((*actual)[0].ToDoubles(), (*expected)[0].ToDoubles());
}

// dyᵀ·x with dy[K, M] (M unaligned) and dy·w: a weight gradient and an input gradient.
Graph BothGradients(DType dtype, int64_t k, int64_t m, int64_t n) {
  GraphBuilder b;
  Value dy = b.Parameter("dy", dtype, {k, m});
  Value x = b.Parameter("x", dtype, {k, n});
  Value w = b.Parameter("w", dtype, {m, n});
  b.Output(b.MatMul(b.Transpose(dy, {1, 0}), x), "dw");
  b.Output(b.MatMul(dy, w), "dx");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

TEST(PadGemmDepthTest, ATransposedLeftOperandIsPaddedAlongItsRowsOnceForBothProducts) {
  // GPT-2's LM-head gradients at a quarter of the rows: dlogits[1024, 50257].
  Graph graph = BothGradients(DType::kBF16, 1024, 50257, 768);
  auto padded = PadGemmDepth(graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  // One copy of dy (shared), one of w.
  EXPECT_EQ(CountOps(*padded, OpCode::kConcat), 2);
  int products = 0;
  for (const Node& n : padded->nodes()) {
    if (n.op != OpCode::kMatMul) continue;
    ++products;
    const Node& a = padded->node(n.inputs[0]);
    if (a.op == OpCode::kTranspose) {
      EXPECT_EQ(a.shape, (Shape{50264, 1024}));
      EXPECT_EQ(n.shape, (Shape{50264, 768}));
    } else {
      EXPECT_EQ(a.shape, (Shape{1024, 50264}));
    }
  }
  EXPECT_EQ(products, 2);
  EXPECT_EQ(padded->node(padded->outputs()[0].node).shape, (Shape{50257, 768}));
}

TEST(PadGemmDepthTest, PaddedTransposedProductsComputeTheSameValues) {
  // K = 128, M = 4099 (bf16: 5 more), N = 2048: 2^30 multiply-adds, the threshold.
  Graph graph = BothGradients(DType::kBF16, 128, 4099, 2048);
  auto padded = PadGemmDepth(graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  ASSERT_EQ(CountOps(*padded, OpCode::kSlice), 1) << "the weight gradient's product is padded";
  const std::vector<Tensor> inputs = {Tensor::Random(DType::kBF16, {128, 4099}, 5), Tensor::Random(DType::kBF16, {128, 2048}, 6),
                                      Tensor::Random(DType::kBF16, {4099, 2048}, 7)};
  auto expected = RunReference(graph, inputs);
  auto actual = RunReference(*padded, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ((*actual)[i].shape(), (*expected)[i].shape());
    EXPECT_EQ((*actual)[i].ToDoubles(), (*expected)[i].ToDoubles()) << "output " << i;
  }
}

TEST(PadGemmDepthTest, AlignedOrSmallProductsAreLeftAlone) {
  for (Graph graph : {Product(DType::kBF16, {4096, 4104}, {4104, 256}),  // aligned K
                      Product(DType::kBF16, {64, 4099}, {4099, 256}),     // 2^26 multiply-adds
                      Product(DType::kF32, {4096, 4100}, {4100, 256})}) {  // f32: 4100 x 4 bytes aligned
    auto padded = PadGemmDepth(graph);
    ASSERT_TRUE(padded.ok());
    EXPECT_EQ(CountOps(*padded, OpCode::kConcat), 0);
  }
}

TEST(PadGemmDepthTest, AConstantWeightIsPaddedAsAConstantThatGoesKMajor) {
  // ResNet's stem in f32: K = 3·7·7 = 147 (588 bytes a row), a constant [147][64] weight. Its
  // padded form must stay a constant for passes/k_major_weights.h to store it K-major (TF32
  // tensor cores read B K-major only); a concat of zeros is a computed B the template refused.
  GraphBuilder b;
  const int64_t rows = int64_t{1} << 17, k = 147, n = 64;
  Value x = b.Parameter("x", DType::kF32, {rows, k});
  const Tensor w = Tensor::Random(DType::kF32, {k, n}, 5);
  b.Output(b.MatMul(x, b.Constant(w), /*tf32=*/true), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto padded = PadGemmDepth(*graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  const Node& product = TheProduct(*padded);
  const Node& wide_b = padded->node(product.inputs[1]);
  ASSERT_EQ(wide_b.op, OpCode::kConstant);
  ASSERT_EQ(wide_b.shape, (Shape{148, n}));
  EXPECT_TRUE(product.attrs.tf32);
  const std::vector<double> values = wide_b.attrs.value->ToDoubles(), original = w.ToDoubles();
  EXPECT_TRUE(std::equal(original.begin(), original.end(), values.begin()));
  EXPECT_TRUE(std::all_of(values.begin() + k * n, values.end(), [](double v) { return v == 0.0; }));
  EXPECT_EQ(CountOps(*padded, OpCode::kConcat), 1) << "A's zeros only";
  auto k_major = StoreWeightsKMajor(*padded, KMajorWeightsOptions{.f32 = true});
  ASSERT_TRUE(k_major.ok()) << k_major.status().ToString();
  const Node& read_b = k_major->node(TheProduct(*k_major).inputs[1]);
  ASSERT_EQ(read_b.op, OpCode::kTranspose);
  EXPECT_EQ(k_major->node(read_b.inputs[0]).shape, (Shape{n, 148}));
}

// A stem convolution's product as the lowering writes it: the image's 3x3 windows (stride 2)
// transposed and reshaped into rows of K = 27 taps, times a constant [27][16] weight.
Graph StemProduct(int64_t batch, bool weight_constant) {
  GraphBuilder b;
  Value x = b.Parameter("image", DType::kBF16, {batch, 3, 17, 17});
  Value taps = b.Window(x, b.Scalar(0.0, DType::kBF16), PoolParams{{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}});  // [N,3,9,9,3,3]
  Value rows = b.Reshape(b.Transpose(taps, {0, 2, 3, 4, 5, 1}), {batch * 81, 27});
  Value w = weight_constant ? b.Constant(Tensor::Random(DType::kBF16, {27, 16}, 5)) : b.Parameter("w", DType::kBF16, {27, 16});
  b.Output(b.MatMul(rows, w), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(*graph);
}

TEST(PadGemmDepthTest, AConvolutionsIm2colIsPaddedWhateverItsSize) {
  // Far below kMinPaddedDepthMacs, but the im2col's gather writes the zero columns: padded,
  // its weight a constant of 32 rows, and the product's values kept.
  Graph graph = StemProduct(2, true);
  auto padded = PadGemmDepth(graph);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  const Node& product = TheProduct(*padded);
  EXPECT_EQ(padded->node(product.inputs[0]).shape, (Shape{162, 32}));
  EXPECT_EQ(padded->node(product.inputs[1]).op, OpCode::kConstant);
  EXPECT_EQ(padded->node(product.inputs[1]).shape, (Shape{32, 16}));
  const std::vector<Tensor> inputs = {Tensor::Random(DType::kBF16, {2, 3, 17, 17}, 7)};
  auto expected = RunReference(graph, inputs);
  auto actual = RunReference(*padded, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  EXPECT_EQ((*actual)[0].ToDoubles(), (*expected)[0].ToDoubles());
  // A computed weight would be a concat of its own: left to the size rule.
  auto computed = PadGemmDepth(StemProduct(2, false));
  ASSERT_TRUE(computed.ok());
  EXPECT_EQ(CountOps(*computed, OpCode::kConcat), 0);
}

}  // namespace
}  // namespace tilefuse

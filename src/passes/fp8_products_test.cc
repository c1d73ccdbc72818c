#include "passes/fp8_products.h"

#include <gtest/gtest.h>

#include <cmath>

#include "passes/pass_test_util.h"
#include "testing/fp8_linear.h"
#include "reference/interpreter.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

// DequantizeLinear as the importer writes it: cast(cast(q, f32) · scale, out).
Value Dequantize(GraphBuilder& b, Value q, Value scale, DType out = DType::kF32) {
  return b.Cast(b.Mul(b.Cast(q, DType::kF32), scale), out);
}

// The product nodes of `g` whose operands are 8-bit floats.
int Fp8Products(const Graph& g) {
  int count = 0;
  for (const Node& n : g.nodes())
    if (n.op == OpCode::kMatMul && IsFloat8(g.node(n.inputs[0]).dtype)) {
      EXPECT_EQ(n.dtype, DType::kF32) << "a product of 8-bit floats is f32";
      ++count;
    }
  return count;
}

// The rewritten graph computes what the original does, to f32 rounding (the scales move out
// of the sum; the reference sums in f64 either way).
void ExpectSameValues(const Graph& before, const Graph& after, const std::vector<Tensor>& inputs, double tolerance) {
  auto expected = RunReference(before, inputs);
  auto actual = RunReference(after, inputs);
  ASSERT_TRUE(expected.ok() && actual.ok()) << expected.status().ToString() << actual.status().ToString();
  ASSERT_EQ(expected->size(), actual->size());
  for (size_t o = 0; o < expected->size(); ++o) {
    const Tensor &e = (*expected)[o], &a = (*actual)[o];
    ASSERT_EQ(e.shape(), a.shape());
    ASSERT_EQ(e.dtype(), a.dtype());
    double scale = 0;
    for (int64_t i = 0; i < e.num_elements(); ++i) scale = std::max(scale, std::fabs(e.GetDouble(i)));
    ASSERT_GT(scale, 0.0);
    for (int64_t i = 0; i < e.num_elements(); ++i)
      ASSERT_LE(std::fabs(e.GetDouble(i) - a.GetDouble(i)), tolerance * scale) << "output " << o << " element " << i;
  }
}

TEST(Fp8ProductsTest, AConstantWeightWithPerColumnScalesBecomesOneFp8ProductScaledAfter) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E4M3, {2, 32, 64});
  Value sx = b.Parameter("sx", DType::kF32, {});
  Value w = b.Constant(Tensor::Random(DType::kF8E4M3, {64, 48}, 3));
  Value sw = b.Constant(Tensor::Random(DType::kF32, {1, 48}, 4));
  // In bf16, as a half-precision model casts the dequantized values.
  b.Output(b.MatMul(Dequantize(b, x, sx, DType::kBF16), Dequantize(b, w, sw, DType::kBF16)), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(Fp8Products(*rewritten), 1);
  for (const Node& n : rewritten->nodes())
    if (n.op == OpCode::kMatMul) {
      EXPECT_EQ(rewritten->node(n.inputs[0]).op, OpCode::kParameter);  // the e4m3 values themselves
      EXPECT_EQ(rewritten->node(n.inputs[1]).op, OpCode::kConstant);
    }
  EXPECT_EQ(rewritten->node(rewritten->outputs()[0].node).dtype, DType::kBF16);
  // bf16 outputs: the original rounds the dequantized operands and the sum to bf16 as well.
  ExpectSameValues(*graph, *rewritten,
                   {Tensor::Random(DType::kF8E4M3, {2, 32, 64}, 1), Tensor::Random(DType::kF32, {}, 2)}, 2e-2);
}

// x · wᵀ with w a computed [N][K] value and one scale per output channel (per row of w): the
// transposes of w and of its scales go to the FP8 product; x per row (a scale per token).
TEST(Fp8ProductsTest, ATransposedWeightKeepsItsRowScalesAsColumnScales) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E5M2, {16, 32});
  Value sx = b.Parameter("sx", DType::kF32, {16, 1});
  Value w = b.Parameter("w", DType::kF8E5M2, {24, 32});
  Value sw = b.Parameter("sw", DType::kF32, {24, 1});
  Value wd = Dequantize(b, w, sw);
  b.Output(b.MatMul(Dequantize(b, x, sx), b.Transpose(wd, {1, 0})), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(Fp8Products(*rewritten), 1);
  ExpectSameValues(*graph, *rewritten,
                   {Tensor::Random(DType::kF8E5M2, {16, 32}, 1), Tensor::Random(DType::kF32, {16, 1}, 2),
                    Tensor::Random(DType::kF8E5M2, {24, 32}, 3), Tensor::Random(DType::kF32, {24, 1}, 4)},
                   1e-6);
}

TEST(Fp8ProductsTest, ProductsTheTemplateCannotRunStayAsTheyAre) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E4M3, {16, 32});
  Value sx = b.Parameter("sx", DType::kF32, {});
  Value w = b.Constant(Tensor::Random(DType::kF8E4M3, {32, 16}, 3));
  Value sw = b.Parameter("sw", DType::kF32, {});
  Value xd = Dequantize(b, x, sx);
  // A scale per column of x varies along K: it cannot leave the sum.
  b.Output(b.MatMul(Dequantize(b, x, b.Parameter("sk", DType::kF32, {1, 32})), Dequantize(b, w, sw)), "scale_along_k");
  // A non-zero zero point.
  Value shifted = b.Mul(b.Sub(b.Cast(w, DType::kF32), b.Scalar(1.0, DType::kF32)), sw);
  b.Output(b.MatMul(xd, shifted), "zero_point");
  // A computed B read [K][N]: the FP8 tensor cores read B K-major only.
  b.Output(b.MatMul(xd, Dequantize(b, b.Parameter("wkn", DType::kF8E4M3, {32, 16}), sw)), "computed_kn");
  // Mixed 8-bit types, and K = 24 (rows of 24 bytes: TMA's strides are 16-byte multiples).
  b.Output(b.MatMul(xd, Dequantize(b, b.Constant(Tensor::Random(DType::kF8E5M2, {32, 16}, 5)), sw)), "mixed");
  b.Output(b.MatMul(Dequantize(b, b.Parameter("x24", DType::kF8E4M3, {16, 24}), sx),
                    Dequantize(b, b.Constant(Tensor::Random(DType::kF8E4M3, {24, 16}, 6)), sw)),
           "k24");
  // The FNUZ forms: no tensor core of Hopper's takes them.
  b.Output(b.MatMul(Dequantize(b, b.Parameter("xz", DType::kF8E4M3Fnuz, {16, 32}), sx),
                    Dequantize(b, b.Constant(Tensor::Random(DType::kF8E4M3Fnuz, {32, 16}, 7)), sw)),
           "fnuz");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(Fp8Products(*rewritten), 0);
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 6);
}

// Symmetric int8 (zero points 0): the product of the int8 values themselves, f32 (its exact
// sum rounded), scales after, as for 8-bit floats; with an explicit zero point of zeros too.
// Its sums are exact, so the rewritten graph agrees to f32's rounding of the sum; the
// original's f32 products and sums round each term (K = 64 here, values up to 127^2).
TEST(Fp8ProductsTest, SymmetricInt8ProductsBecomeInt8ProductsScaledAfter) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kI8, {16, 64});
  Value sx = b.Parameter("sx", DType::kF32, {});
  Value zero = b.Cast(b.Constant(Tensor::FromDoubles(DType::kI8, {}, {0.0})), DType::kF32);
  Value xd = b.Mul(b.Sub(b.Cast(x, DType::kF32), zero), sx);
  Value w = b.Parameter("w", DType::kI8, {24, 64});
  Value sw = b.Parameter("sw", DType::kF32, {24, 1});
  b.Output(b.MatMul(xd, b.Transpose(Dequantize(b, w, sw), {1, 0})), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph, Fp8ProductOptions{.int8 = true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  auto asked_not = MakeFp8Products(*graph);
  ASSERT_TRUE(asked_not.ok());
  for (const Node& n : asked_not->nodes())
    if (n.op == OpCode::kMatMul) {
      EXPECT_EQ(asked_not->node(n.inputs[0]).dtype, DType::kF32) << "int8 products only where asked for";
    }
  int int8_products = 0;
  for (const Node& n : rewritten->nodes())
    if (n.op == OpCode::kMatMul) {
      EXPECT_EQ(rewritten->node(n.inputs[0]).dtype, DType::kI8);
      EXPECT_EQ(n.dtype, DType::kF32) << "a product of int8 is f32 (its exact sum rounded)";
      ++int8_products;
    }
  EXPECT_EQ(int8_products, 1);
  ExpectSameValues(*graph, *rewritten,
                   {Tensor::Random(DType::kI8, {16, 64}, 1), Tensor::Random(DType::kF32, {}, 2), Tensor::Random(DType::kI8, {24, 64}, 3),
                    Tensor::Random(DType::kF32, {24, 1}, 4)},
                   1e-6);
}

// Asymmetric activations (onnxruntime's default: uint8 with a zero point), int8 with a zero
// point, and uint8 without one, against symmetric int8 weights: int8 products, uint8 shifted into
// int8 (q - 128), with z · Σ_k b_k taken off after the sum (z - 128 for uint8), then scaled. A zero
// point per row of A leaves the sum too. The values agree with the original's to f32 rounding.
TEST(Fp8ProductsTest, AsymmetricActivationsBecomeInt8ProductsWithTheirZeroPointAfter) {
  GraphBuilder b;
  Value w = b.Constant(Tensor::Random(DType::kI8, {256, 16}, 3));
  Value sw = b.Parameter("sw", DType::kF32, {16});
  auto zero_point = [&](DType type, double z) { return b.Cast(b.Constant(Tensor::FromDoubles(type, {}, {z})), DType::kF32); };
  Value u = b.Parameter("u", DType::kU8, {16, 256});
  b.Output(b.MatMul(b.Mul(b.Sub(b.Cast(u, DType::kF32), zero_point(DType::kU8, 131)), b.Scalar(0.1, DType::kF32)), Dequantize(b, w, sw)),
           "uint8");
  Value x = b.Parameter("x", DType::kI8, {4, 16, 256});
  b.Output(b.MatMul(b.Mul(b.Sub(b.Cast(x, DType::kF32), zero_point(DType::kI8, -7)), b.Scalar(0.2, DType::kF32)), Dequantize(b, w, sw)),
           "int8");
  b.Output(b.MatMul(Dequantize(b, u, b.Scalar(0.05, DType::kF32)), Dequantize(b, w, sw)), "uint8_no_zero_point");
  Value zr = b.Parameter("zr", DType::kF32, {16, 1});  // a zero point per row (as values of u8)
  b.Output(b.MatMul(b.Mul(b.Sub(b.Cast(u, DType::kF32), zr), b.Scalar(0.1, DType::kF32)), Dequantize(b, w, sw)), "per_row");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph, Fp8ProductOptions{.int8 = true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  int int8_products = 0;
  for (const Node& n : rewritten->nodes())
    if (n.op == OpCode::kMatMul) {
      EXPECT_EQ(rewritten->node(n.inputs[0]).dtype, DType::kI8);
      EXPECT_EQ(rewritten->node(n.inputs[1]).dtype, DType::kI8);
      ++int8_products;
    }
  EXPECT_EQ(int8_products, 4);
  std::vector<double> rows(16);
  for (size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<double>(100 + 9 * r);
  ExpectSameValues(*graph, *rewritten,
                   {Tensor::Random(DType::kF32, {16}, 1), Tensor::Random(DType::kU8, {16, 256}, 2), Tensor::Random(DType::kI8, {4, 16, 256}, 4),
                    Tensor::FromDoubles(DType::kF32, {16, 1}, rows)},
                   1e-6);
}

// MatMulInteger as the importer writes it (an exact f64 product of cast(q) - z, made int32,
// then f32 by its consumer): an int8 product too, its f32 sum taken as the f64 value. Against
// the original, to f32's rounding of sums up to 255 · 127 · 512.
TEST(Fp8ProductsTest, MatMulIntegerBecomesAnInt8Product) {
  GraphBuilder b;
  Value u = b.Parameter("u", DType::kU8, {3, 16, 512});
  Value w = b.Constant(Tensor::Random(DType::kI8, {512, 48}, 3));
  Value a = b.Sub(b.Cast(u, DType::kF64), b.Cast(b.Constant(Tensor::FromDoubles(DType::kU8, {}, {140})), DType::kF64));
  Value acc = b.Cast(b.MatMul(a, b.Cast(w, DType::kF64)), DType::kI32);
  b.Output(b.Mul(b.Cast(acc, DType::kF32), b.Scalar(1e-4, DType::kF32)), "y");
  // B with a zero point stays as written.
  Value wz = b.Sub(b.Cast(w, DType::kF64), b.Scalar(1.0, DType::kF64));
  b.Output(b.Cast(b.MatMul(a, wz), DType::kI32), "b_zero_point");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph, Fp8ProductOptions{.int8 = true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  int int8_products = 0, f64_products = 0;
  for (const Node& n : rewritten->nodes())
    if (n.op == OpCode::kMatMul) (rewritten->node(n.inputs[0]).dtype == DType::kI8 ? int8_products : f64_products) += 1;
  EXPECT_EQ(int8_products, 1);
  EXPECT_EQ(f64_products, 1);
  auto expected = RunReference(*graph, {Tensor::Random(DType::kU8, {3, 16, 512}, 1)});
  auto actual = RunReference(*rewritten, {Tensor::Random(DType::kU8, {3, 16, 512}, 1)});
  ASSERT_TRUE(expected.ok() && actual.ok());
  const std::vector<double> want = (*expected)[0].ToDoubles(), got = (*actual)[0].ToDoubles();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i]))) << i;
  EXPECT_EQ((*expected)[1].ToDoubles(), (*actual)[1].ToDoubles()) << "the f64 product is untouched";
}

// B with a zero point, uint8 B, a zero point varying along K, and int8 over K of 2^17 or more
// (int32 sums could overflow) stay as written: their products compute dequantized.
TEST(Fp8ProductsTest, AsymmetricWeightsOrLongInt8StayAsWritten) {
  GraphBuilder b;
  Value w = b.Constant(Tensor::Random(DType::kI8, {256, 16}, 3));
  Value sw = b.Scalar(0.01, DType::kF32);
  Value x = b.Parameter("x", DType::kI8, {16, 256});
  Value xd = Dequantize(b, x, b.Scalar(0.1, DType::kF32));
  Value w_shifted = b.Mul(b.Sub(b.Cast(w, DType::kF32), b.Scalar(3.0, DType::kF32)), sw);
  b.Output(b.MatMul(xd, w_shifted), "b_zero_point");
  b.Output(b.MatMul(xd, Dequantize(b, b.Constant(Tensor::Random(DType::kU8, {256, 16}, 5)), sw)), "b_uint8");
  Value along_k = b.Mul(b.Sub(b.Cast(x, DType::kF32), b.Parameter("zk", DType::kF32, {1, 256})), b.Scalar(0.1, DType::kF32));
  b.Output(b.MatMul(along_k, Dequantize(b, w, sw)), "zero_point_along_k");
  // K = 2^17: int32 sums of products up to 128² could overflow.
  Value long_x = b.Parameter("long_x", DType::kI8, {16, 1 << 17}), long_w = b.Parameter("long_w", DType::kI8, {16, 1 << 17});
  b.Output(b.MatMul(Dequantize(b, long_x, sw), b.Transpose(Dequantize(b, long_w, sw), {1, 0})), "long_k");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph, Fp8ProductOptions{.block_scales = true, .int8 = true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 4);
  for (const Node& n : rewritten->nodes())
    if (n.op == OpCode::kMatMul) {
      EXPECT_EQ(rewritten->node(n.inputs[0]).dtype, DType::kF32) << "dequantized, as written";
    }
}

// A zero point of zeros (QuantizeLinear's output type for 8-bit floats) is no obstacle.
TEST(Fp8ProductsTest, AZeroPointOfZerosIsTaken) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E4M3, {16, 32});
  Value zero = b.Cast(b.Constant(Tensor::FromDoubles(DType::kF8E4M3, {}, {0.0})), DType::kF32);
  Value xd = b.Mul(b.Sub(b.Cast(x, DType::kF32), zero), b.Scalar(0.5, DType::kF32));
  Value w = b.Constant(Tensor::Random(DType::kF8E4M3, {32, 16}, 3));
  b.Output(b.MatMul(xd, Dequantize(b, w, b.Scalar(0.25, DType::kF32))), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(Fp8Products(*rewritten), 1);
  ExpectSameValues(*graph, *rewritten, {Tensor::Random(DType::kF8E4M3, {16, 32}, 1)}, 1e-6);
}

// Scales in blocks of K, as the importer writes ONNX's blocked DequantizeLinear (each block's
// scale repeated to the operand's shape): x [M, K] with one scale per row and 128 columns of K
// (2 blocks), a constant weight [K, N] with one per 128 rows and column, or a weight given [N, K]
// and transposed with its scales [N, 2]; a per-tensor scale on the other side repeated to the
// blocks. The product becomes block_scaled_matmul and computes what the graph did.
TEST(Fp8ProductsTest, BlockScalesBecomeABlockScaledProduct) {
  for (int form = 0; form < 3; ++form) {
    SCOPED_TRACE(form);
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF8E4M3, {16, 256});
    Value sx = form == 1 ? b.Scalar(0.5, DType::kF32) : RepeatedBlocks(b, b.Parameter("sx", DType::kF32, {16, 2}), {16, 256}, 1);
    Value xd = b.Mul(b.Cast(x, DType::kF32), sx);
    Value w;
    if (form == 2) {  // a weight [N, K], blocked along its K, transposed
      Value wnk = b.Parameter("w", DType::kF8E4M3, {24, 256});
      Value wd = b.Mul(b.Cast(wnk, DType::kF32), RepeatedBlocks(b, b.Parameter("sw", DType::kF32, {24, 2}), {24, 256}, 1));
      w = b.Transpose(wd, {1, 0});
    } else {
      Value wkn = b.Constant(Tensor::Random(DType::kF8E4M3, {256, 24}, 3));
      w = b.Mul(b.Cast(wkn, DType::kF32), form == 0 ? b.Scalar(0.25, DType::kF32)
                                                   : RepeatedBlocks(b, b.Constant(Tensor::Random(DType::kF32, {2, 24}, 4)), {256, 24}, 0));
    }
    b.Output(b.MatMul(xd, w), "y");
    auto graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    // Off unless asked (the CUDA backend asks): the product stays as written.
    auto as_written = MakeFp8Products(*graph);
    ASSERT_TRUE(as_written.ok()) << as_written.status().ToString();
    EXPECT_EQ(CountOps(*as_written, OpCode::kBlockScaledMatMul), 0);
    auto rewritten = MakeFp8Products(*graph, {.block_scales = true});
    ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
    EXPECT_EQ(CountOps(*rewritten, OpCode::kBlockScaledMatMul), 1);
    EXPECT_EQ(CountOps(*rewritten, OpCode::kMatMul), 0);
    std::vector<Tensor> inputs = {Tensor::Random(DType::kF8E4M3, {16, 256}, 1)};
    if (form != 1) inputs.push_back(Tensor::Random(DType::kF32, {16, 2}, 2));
    if (form == 2) inputs = {inputs[0], inputs[1], Tensor::Random(DType::kF8E4M3, {24, 256}, 5), Tensor::Random(DType::kF32, {24, 2}, 6)};
    ExpectSameValues(*graph, *rewritten, inputs, 1e-6);
  }
}

// `product`, the output of the graph `b` holds, stays as written with block scales asked for.
void ExpectNoBlockScaledProduct(GraphBuilder& b, Value product) {
  b.Output(product, "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto rewritten = MakeFp8Products(*graph, {.block_scales = true});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kBlockScaledMatMul), 0);
  EXPECT_EQ(Fp8Products(*rewritten), 0);
}

// Blocks that do not divide K evenly (ONNX cuts the last one) stay as written.
TEST(Fp8ProductsTest, UnevenBlocksStayAsTheyAre) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E4M3, {16, 48});
  Value sx = b.Slice(RepeatedBlocks(b, b.Parameter("sx", DType::kF32, {16, 2}), {16, 64}, 1), {0}, {48}, {1}, {});
  Value w = b.Constant(Tensor::Random(DType::kF8E4M3, {48, 16}, 3));
  ExpectNoBlockScaledProduct(b, b.MatMul(b.Mul(b.Cast(x, DType::kF32), sx), Dequantize(b, w, b.Scalar(0.25, DType::kF32))));
}

// Blocks of fewer than 128 columns of K (the template's step) stay as written too.
TEST(Fp8ProductsTest, BlocksShorterThanAStepStayAsTheyAre) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF8E4M3, {16, 128});
  Value sx = RepeatedBlocks(b, b.Parameter("sx", DType::kF32, {16, 2}), {16, 128}, 1);
  Value w = b.Constant(Tensor::Random(DType::kF8E4M3, {128, 16}, 3));
  ExpectNoBlockScaledProduct(b, b.MatMul(b.Mul(b.Cast(x, DType::kF32), sx), Dequantize(b, w, b.Scalar(0.25, DType::kF32))));
}

}  // namespace
}  // namespace tilefuse

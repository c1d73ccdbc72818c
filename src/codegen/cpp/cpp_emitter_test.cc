// The C++ emitter's loop shapes, compiled and run against the f64 reference interpreter
// with poisoned outputs: vectorised reductions (NaN-propagating max/min, float sums
// over long rows, f64 kept in double) and the row buffer that keeps exp and the random
// generator from being evaluated twice per element.
#include "codegen/cpp/cpp_emitter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reference/interpreter.h"
#include "testing/cpp_emitter_test_util.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

using Compiled = emitter_test::CompiledModel;

Compiled CompileText(const std::string& text) { return emitter_test::CompileModelText(text); }

// Runs the one-input graph on `input`; expects the reference's output within `tol`.
void ExpectMatchesReference(Compiled& c, const Tensor& input, Tolerance tol) {
  auto expected = RunReference(c.graph, {input});
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = c.compiled->Run({input});
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  Comparison cmp = CompareTensors((*actual)[0], (*expected)[0], tol);
  EXPECT_TRUE(cmp.pass) << cmp.reason;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The generated function of the graph's one kernel (without the declarations ahead of it).
std::string Source(const Compiled& c) {
  EXPECT_EQ(c.compiled->kernels().size(), 1u);
  const std::string& source = c.compiled->kernels()[0].source;
  return source.substr(source.rfind("extern \"C\""));  // the function: the last extern "C" (declarations come first)
}

std::string ReduceModel(const std::string& op, const std::string& dtype, int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 18]>
g ({0}[{2},{3}] x) => ({0}[{2},1] y) {{
  axes = Constant <value = int64[1] {{-1}}> ()
  y = {1} <keepdims = 1> (x, axes)
}})", dtype, op, rows, cols);
}

// A NaN anywhere in a row (first element, a middle SIMD lane, the scalar tail) makes
// the row's max and min NaN, as in the reference and numpy.
TEST(CppEmitterTest, MaxAndMinPropagateNanFromEveryLane) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    Compiled c = CompileText(ReduceModel(op, "float", 5, 37));
    Tensor x = Tensor::Random(DType::kF32, {5, 37}, 7);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    x.SetDouble(0 * 37 + 0, nan);   // row 0: first element
    x.SetDouble(1 * 37 + 13, nan);  // row 1: a middle lane
    x.SetDouble(2 * 37 + 36, nan);  // row 2: the tail after the last full vector
    ExpectMatchesReference(c, x, {0, 0});
    auto out = c.compiled->Run({x});
    ASSERT_TRUE(out.ok());
    for (int row = 0; row < 5; ++row) EXPECT_EQ(std::isnan((*out)[0].GetDouble(row)), row < 3) << op << " row " << row;
  }
}

// Rows far longer than a sum block: float lanes, double total; the error stays at a
// few f32 ulps of the row's magnitude.
TEST(CppEmitterTest, LongFloatSumsStayAccurate) {
  Compiled c = CompileText(ReduceModel("ReduceSum", "float", 3, 300001));
  EXPECT_NE(Source(c).find("double acc0"), std::string::npos) << Source(c);
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {3, 300001}, 3), {1e-5, 1e-3});
}

TEST(CppEmitterTest, DoubleReductionsComputeInDouble) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
    Compiled c = CompileText(ReduceModel(op, "double", 4, 5000));
    EXPECT_EQ(Source(c).find("float"), std::string::npos) << Source(c);
    ExpectMatchesReference(c, Tensor::Random(DType::kF64, {4, 5000}, 5), {1e-12, 1e-12});
  }
}

TEST(CppEmitterTest, IntegerReductionsAreExact) {
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}) {
    Compiled c = CompileText(ReduceModel(op, "int64", 3, 15));
    ExpectMatchesReference(c, Tensor::Random(DType::kI64, {3, 15}, 11), {0, 0});
  }
}

// A gather's load is computed per element when its index is (the loss functions sum
// weights gathered by class); the emitter once treated it as per row and crashed.
TEST(CppEmitterTest, ReductionOverAGatherLoadsPerElement) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[3] w) => (float y) {
  idx = Constant <value = int64[4] {2, 0, 2, 1}> ()
  g = Gather(w, idx)
  y = ReduceSum <keepdims = 0> (g)
})");
  ASSERT_NE(c.compiled, nullptr);
  Tensor w = Tensor::FromDoubles(DType::kF32, {3}, {1, 10, 100});
  auto actual = c.compiled->Run({w});
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  EXPECT_EQ((*actual)[0].ToDoubles(), std::vector<double>{211});
}

// Softmax needs exp(x - max) in the sum pass and again in the store pass: the sum pass
// keeps it in a row buffer, so exp is called once per element.
TEST(CppEmitterTest, SoftmaxEvaluatesExpOncePerElement) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[6,1000] x) => (float[6,1000] y) {
  y = Softmax <axis = -1> (x)
})");
  std::string source = Source(c);
  EXPECT_EQ(Count(source, "tf_exp_f32(v"), 1) << source;
  EXPECT_EQ(Count(source, "row0[i1] ="), 1) << source;
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {6, 1000}, 2), {1e-5, 1e-7});
}

std::string DropoutResidualLayerNormModel(int rows, int cols) {
  return fmt::format(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[{0},{1}] x, float[{0},{1}] r, float[{1}] s) => (float[{0},{1}] y) {{
  ratio = Constant <value = float {{0.25}}> ()
  training = Constant <value = bool {{1}}> ()
  dropped = Dropout <seed = 7> (x, ratio, training)
  summed = Add (dropped, r)
  y = LayerNormalization <axis = -1, epsilon = 1e-5> (summed, s)
}})", rows, cols);
}

void ExpectDropoutMatchesReference(Compiled& c, int rows, int cols) {
  std::vector<Tensor> inputs = {Tensor::Random(DType::kF32, {rows, cols}, 1), Tensor::Random(DType::kF32, {rows, cols}, 2),
                                Tensor::Random(DType::kF32, {cols}, 3)};
  auto expected = RunReference(c.graph, inputs);
  ASSERT_TRUE(expected.ok());
  auto actual = c.compiled->Run(inputs);
  ASSERT_TRUE(actual.ok());
  // A mask bit that differed from the reference's would be off by a whole element.
  Comparison cmp = CompareTensors((*actual)[0], (*expected)[0], {1e-4, 1e-5});
  EXPECT_TRUE(cmp.pass) << cmp.reason;
}

// Dropout + residual + layer norm reads the dropped sum in three passes (mean, variance,
// store). With rows of a multiple of 4 the row's random values are prefilled, one Philox
// block per four elements, and every pass reads them; the dropped sum itself is cheap
// to recompute and gets no buffer.
TEST(CppEmitterTest, RandomValuesArePrefilledInPhiloxBlocks) {
  Compiled c = CompileText(DropoutResidualLayerNormModel(8, 300));
  std::string source = Source(c);
  EXPECT_EQ(Count(source, "tf_philox_uniform4("), 1) << source;
  EXPECT_EQ(Count(source, "tf_philox_uniform("), 0) << source;
  EXPECT_EQ(source.find("row1"), std::string::npos) << source;
  ExpectDropoutMatchesReference(c, 8, 300);
}

// Rows not a multiple of 4 split Philox blocks between rows: the generator runs once per
// element in the first pass, which keeps the dropped sum in a row buffer for the others.
TEST(CppEmitterTest, RandomValuesAreGeneratedOncePerElementOtherwise) {
  Compiled c = CompileText(DropoutResidualLayerNormModel(8, 301));
  std::string source = Source(c);
  EXPECT_EQ(Count(source, "tf_philox_uniform("), 1) << source;
  EXPECT_EQ(Count(source, "tf_philox_uniform4("), 0) << source;
  EXPECT_EQ(source.find("row1"), std::string::npos) << source;
  ExpectDropoutMatchesReference(c, 8, 301);
}

// Cheap values (loads, subtractions) are recomputed in each pass rather than cached:
// layer norm has no transcendental op and needs no row buffer.
TEST(CppEmitterTest, CheapValuesAreRecomputed) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,700] x) => (float[4,700] y) {
  mean = ReduceMean <axes = [-1], keepdims = 1> (x)
  centered = Sub (x, mean)
  squared = Mul (centered, centered)
  variance = ReduceMean <axes = [-1], keepdims = 1> (squared)
  y = Div (centered, variance)
})");
  EXPECT_EQ(Source(c).find("row0"), std::string::npos) << Source(c);
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {4, 700}, 4), {1e-4, 1e-5});
}

// A long computation without a transcendental (here 60 multiplies and adds; a depthwise
// convolution's 25 taps of an activation in MobileNet) is kept in a row buffer by the pass
// that first computes it, as an exp would be, instead of being computed again by the next.
TEST(CppEmitterTest, LongValuesAreComputedOncePerElement) {
  std::string chain = "  v0 = Mul (x, x)\n";
  for (int i = 1; i <= 60; ++i)
    chain += fmt::format("  v{} = {} (v{}, x)\n", i, i % 2 ? "Add" : "Mul", i - 1);
  Compiled c = CompileText(fmt::format(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,300] x) => (float[4,300] y) {{
{}  mean = ReduceMean <axes = [-1], keepdims = 1> (v60)
  y = Sub (v60, mean)
}})", chain));
  std::string source = Source(c);
  EXPECT_NE(source.find("row0[i1] ="), std::string::npos) << source;
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {4, 300}, 5), {1e-4, 1e-5});
}

// GELU's 1 + tanh(u) is lowered as 2 / (1 + exp(-2u)) for f32/f64 (libmvec's tanhf costs
// about twice its expf); a tanh with another user keeps tanh.
TEST(CppEmitterTest, OnePlusTanhIsComputedThroughExp) {
  Compiled gelu = CompileText(R"(<ir_version: 8, opset_import: ["" : 20]>
g (float[4,300] x) => (float[4,300] y) {
  y = Gelu <approximate = "tanh"> (x)
})");
  EXPECT_EQ(Count(Source(gelu), "tanh("), 0) << Source(gelu);
  EXPECT_EQ(Count(Source(gelu), "exp_f32("), 1) << Source(gelu);
  Tensor x = Tensor::Random(DType::kF32, {4, 300}, 12);
  for (int64_t i = 0; i < 300; ++i) x.SetDouble(i, -12.0 + 0.08 * static_cast<double>(i));  // tails: tanh near ±1
  ExpectMatchesReference(gelu, x, {1e-5, 1e-6});

  Compiled shared = CompileText(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[4,300] x) => (float[4,300] y, float[4,300] t) {
  one = Constant <value = float {1.0}> ()
  t = Tanh (x)
  y = Add (one, t)
})");
  EXPECT_EQ(Count(Source(shared), "tanh("), 1) << Source(shared);
  auto expected = RunReference(shared.graph, {x});
  auto actual = shared.compiled->Run({x});
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (int o = 0; o < 2; ++o) EXPECT_TRUE(CompareTensors((*actual)[o], (*expected)[o], {1e-5, 1e-6}).pass) << o;
}

// Float exp is the prelude's inline polynomial, not libm: checked element by element
// against double exp over its whole range, the specials and the edges of overflow and
// underflow. Within 3 ulp where the result is at least 2^-125, 0 below (flushed, as on
// the GPU); inf above ln(FLT_MAX); NaN stays NaN.
TEST(CppEmitterTest, FloatExpIsAccurateOverItsWholeRange) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[40000] x) => (float[40000] y, float[40000] s) {
  y = Exp (x)
  s = Sigmoid (x)
})");
  EXPECT_NE(c.compiled->kernels()[0].source.find("tf_exp_f32("), std::string::npos);
  Tensor x = Tensor::Random(DType::kF32, {40000}, 13);
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.7228f, 88.7229f, 88.73f, 89.0f, 1e30f,
                            -86.9f, -87.0f, -87.3f, -87.4f, -88.0f, -103.9f, -150.0f, -1e30f,
                            std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  const int n_specials = static_cast<int>(std::size(specials));
  for (int i = 0; i < 40000; ++i)
    x.SetDouble(i, i < n_specials ? specials[i] : -100.0 + 200.0 * (i - n_specials) / (40000 - n_specials));
  auto out = c.compiled->Run({x});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const double smallest_normal = std::numeric_limits<float>::min(), largest = std::numeric_limits<float>::max();
  for (int i = 0; i < 40000; ++i) {
    const double xi = x.GetDouble(i), got = (*out)[0].GetDouble(i), want = std::exp(xi);
    const double sig = (*out)[1].GetDouble(i), want_sig = 1 / (1 + std::exp(-xi));
    if (std::isnan(xi)) {
      EXPECT_TRUE(std::isnan(got) && std::isnan(sig)) << i;
    } else if (want > largest) {
      EXPECT_EQ(got, std::numeric_limits<double>::infinity()) << "exp(" << xi << ")";
    } else if (want < 2 * smallest_normal) {
      EXPECT_TRUE(got == 0 || std::fabs(got - want) <= 3 * std::ldexp(1.0, std::ilogb(want) - 23)) << "exp(" << xi << ") = " << got;
    } else {
      EXPECT_LE(std::fabs(got - want), 3 * std::ldexp(1.0, std::ilogb(want) - 23)) << "exp(" << xi << ") = " << got << " want " << want;
    }
    if (!std::isnan(xi)) {
      EXPECT_NEAR(sig, want_sig, 3e-7 * want_sig + 1e-38) << "sigmoid(" << xi << ")";
    }
  }
}

// A per-element value divided by a per-row one (softmax's sum) is multiplied by the
// reciprocal, computed once per row outside the inner loop (codegen/kernel_rewrites.h).
TEST(CppEmitterTest, RowInvariantDivisorBecomesReciprocal) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[6,1000] x) => (float[6,1000] y) {
  y = Softmax <axis = -1> (x)
})");
  const std::string source = Source(c);
  const size_t reciprocal = source.find("recip(v");
  ASSERT_NE(reciprocal, std::string::npos) << source;
  EXPECT_EQ(source.find(" / v"), std::string::npos) << source;
  // In the row loop's body (indented 4), not in an inner loop's.
  const size_t line = source.rfind('\n', reciprocal) + 1;
  EXPECT_EQ(source.substr(line, source.find_first_not_of(' ', line) - line), "    ") << source;
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {6, 1000}, 5), {1e-5, 1e-7});
}

// x^3 and x^2 are multiplied out (GELU's cube stays vectorisable); other exponents,
// 0.5 included (a GCC 12 crash when pow had a SIMD declaration), go through pow.
TEST(CppEmitterTest, PowersMatchReference) {
  Compiled c = CompileText(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[3,50] x) => (float[3,50] y) {
  two = Constant <value = float {2.0}> ()
  three = Constant <value = float {3.0}> ()
  half = Constant <value = float {0.5}> ()
  a = Abs (x)
  root = Pow (a, half)
  cube = Pow (x, three)
  square = Pow (x, two)
  s = Add (root, cube)
  y = Add (s, square)
})");
  EXPECT_NE(Source(c).find("* v"), std::string::npos) << Source(c);
  ExpectMatchesReference(c, Tensor::Random(DType::kF32, {3, 50}, 9), {1e-5, 1e-7});
}

}  // namespace
}  // namespace tilefuse

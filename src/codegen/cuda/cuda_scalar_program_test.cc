// A template's scalar program printed for one element: the powers multiplied out, the
// values the rewrite adds named apart from the ones the caller reads by their ids, the fast
// forms where a value is rounded to a half type.
#include "codegen/cuda/cuda_scalar_program.h"

#include <gtest/gtest.h>

#include "testing/lower_test_util.h"
#include "testing/file_check.h"

namespace tilefuse {
namespace {

TEST(CudaElementProgramTest, CubeIsMultipliedOutUnderItsCallersName) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {16});
  Value cube = b.Binary(OpCode::kPow, x, b.Scalar(3, DType::kF32));
  b.Output(b.Div(b.Add(x, cube), x), "y");
  Kernel k = LowerSingleGroup(b);
  ASSERT_EQ(k.values.size(), 5u);  // x, 3, x^3, x + x^3, (x + x^3) / x
  // The square is value 2 of the rewritten program: t2, beside the caller's v2 (the cube).
  std::string program = CudaElementProgram(k, {4}, {{0, "acc"}}, {"row", "col"}, "  ");
  EXPECT_TRUE(MatchesChecks(program, R"(
    CHECK:      const float v0 = acc;
    CHECK-NEXT: const float t2 = float(v0 * v0);
    CHECK-NEXT: const float v2 = float(t2 * v0);
    CHECK-NEXT: const float v3 = float(v0 + v2);
    CHECK-NEXT: const float v4 = float(v3 / v0);
  )")) << program;
}

// A quantizer's x / scale (a constant scale, the quotient rounded to e4m3) divides by the
// constant's reciprocal corrected once, not through IEEE division's subroutine. A divisor that
// is not a constant, or a constant too large for that form, takes the approximate quotient
// where the 8-bit cast rounds the quotient (it keeps 3 bits; the approximation's 2 ulp of f32
// move it across a rounding boundary as rarely as a bf16 cast's), and IEEE division where
// the quotient is stored as it is.
TEST(CudaElementProgramTest, DivisionByAConstantTakesTheCorrectedReciprocal) {
  auto program = [](Value (*divisor)(GraphBuilder&), bool quantized = true) {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF32, {16});
    Value q = b.Div(x, divisor(b));
    b.Output(quantized ? b.Cast(q, DType::kF8E4M3) : q, "q");
    Kernel k = LowerSingleGroup(b);
    std::vector<int> stored;
    for (const KernelStore& store : k.stores) stored.push_back(store.value);
    return CudaElementProgram(k, stored, {}, {"i"}, "");
  };
  auto scale = [](GraphBuilder& b) { return b.Scalar(0.005523681640625, DType::kF32); };
  auto per_element = [](GraphBuilder& b) { return b.Parameter("s", DType::kF32, {16}); };
  const std::string scaled = program(scale);
  EXPECT_TRUE(MatchesChecks(scaled, R"(
    CHECK: const float v1 = float(0.005523681640625);
    CHECK: tf_div_by_constant(v0, v1, float(181.038
  )")) << scaled;
  const std::string stored_scaled = program(scale, false);
  EXPECT_NE(stored_scaled.find("tf_div_by_constant(v0, v1"), std::string::npos) << stored_scaled;
  const std::string by_value = program(per_element);
  EXPECT_EQ(by_value.find("tf_div_by_constant"), std::string::npos) << by_value;
  EXPECT_NE(by_value.find("__fdividef(v0, v1)"), std::string::npos) << by_value;
  const std::string stored = program(per_element, false);
  EXPECT_NE(stored.find("v0 / v1"), std::string::npos) << stored;
  const std::string huge = program([](GraphBuilder& b) { return b.Scalar(1e30, DType::kF32); });
  EXPECT_EQ(huge.find("tf_div_by_constant"), std::string::npos) << huge;
  EXPECT_NE(huge.find("__fdividef(v0, v1)"), std::string::npos) << huge;
}

// SwiGLU as PyTorch traces it in bf16: silu on the f32 upcast of the gate, cast back to bf16
// before the product with up. The sigmoid only reaches that cast (through a product), so it
// takes the fast form; stored as f32 it stays exact, and so does a tanh whose next op is a
// sum (1 + tanh(u) cancels near -1) though a bf16 cast follows, and so does one the caller
// reads.
TEST(CudaElementProgramTest, AnF32SigmoidRoundedToBf16TakesTheFastFormOthersStayExact) {
  auto program = [](bool to_bf16, OpCode op, bool through_sum, bool caller_reads_it = false) {
    GraphBuilder b;
    Value gate = b.Parameter("gate", DType::kBF16, {16});
    Value up = b.Parameter("up", DType::kBF16, {16});
    Value g = b.Cast(gate, DType::kF32);
    Value act = b.Unary(op, g);
    Value silu = through_sum ? b.AddScalar(act, 1.0) : b.Mul(g, act);
    Value y = to_bf16 ? b.Mul(b.Cast(silu, DType::kBF16), up) : b.Mul(silu, b.Cast(up, DType::kF32));
    b.Output(y, "y");
    Kernel k = LowerSingleGroup(b);
    std::vector<int> stored;
    for (const KernelStore& store : k.stores) stored.push_back(store.value);
    for (size_t v = 0; v < k.values.size() && caller_reads_it; ++v)
      if (k.values[v].kind == ScalarValue::Kind::kOp && k.values[v].op == op) stored.push_back(static_cast<int>(v));
    return CudaElementProgram(k, stored, {}, {"i"}, "");
  };
  const std::string fast = program(true, OpCode::kSigmoid, false);
  EXPECT_NE(fast.find("tf_sigmoid_fast("), std::string::npos) << fast;
  const std::string exact = program(false, OpCode::kSigmoid, false);
  EXPECT_EQ(exact.find("tf_sigmoid_fast("), std::string::npos) << exact;
  EXPECT_NE(exact.find("sigmoid("), std::string::npos) << exact;
  const std::string tanh_product = program(true, OpCode::kTanh, false);
  EXPECT_NE(tanh_product.find("tf_tanh_approx("), std::string::npos) << tanh_product;
  const std::string tanh_sum = program(true, OpCode::kTanh, true);
  EXPECT_EQ(tanh_sum.find("tf_tanh_approx("), std::string::npos) << tanh_sum;
  // A value the caller reads itself (a root: attention's logits) is read as computed.
  const std::string read = program(true, OpCode::kSigmoid, false, true);
  EXPECT_EQ(read.find("tf_sigmoid_fast("), std::string::npos) << read;
}

// Erf GELU as the decomposition writes it, 0.5 x (1 + erf(x / sqrt 2)), on the f32 upcast of
// a bf16 value: rounded back to bf16, its 1 + erf(t) takes the fast form; stored as f32 it
// stays the exact erf and sum.
TEST(CudaElementProgramTest, ErfGeluRoundedToBf16TakesTheFastOnePlusErf) {
  auto program = [](DType out) {
    GraphBuilder b;
    Value x = b.Cast(b.Parameter("x", DType::kBF16, {16}), DType::kF32);
    Value erf = b.Unary(OpCode::kErf, b.MulScalar(x, 0.7071067811865476));
    b.Output(b.Cast(b.Mul(b.MulScalar(x, 0.5), b.AddScalar(erf, 1.0)), out), "y");
    Kernel k = LowerSingleGroup(b);
    std::vector<int> stored;
    for (const KernelStore& store : k.stores) stored.push_back(store.value);
    return CudaElementProgram(k, stored, {}, {"i"}, "");
  };
  const std::string fast = program(DType::kBF16);
  EXPECT_NE(fast.find("tf_one_plus_erf_fast(v"), std::string::npos) << fast;
  const std::string exact = program(DType::kF32);
  EXPECT_EQ(exact.find("tf_one_plus_erf_fast("), std::string::npos) << exact;
  EXPECT_NE(exact.find("erf("), std::string::npos) << exact;
}

}  // namespace
}  // namespace tilefuse

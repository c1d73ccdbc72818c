// Which gemm epilogues a library fuses: found by what the scalar program computes, so any
// spelling of a bias, ReLU or tanh GELU matches and nothing else does.
#include "codegen/gemm_library_epilogue.h"

#include <gtest/gtest.h>

#include "codegen/gemm_split.h"
#include "fusion/group_classifier.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

StatusOr<LibraryEpilogue> Match(const std::string& body, const std::string& signature) {
  PlannedText p = PlanOnnxText(signature, body);
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      ASSIGN_OR_RETURN(GemmTemplateKernel gemm,
                       LowerGemmProblem(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph)));
      return MatchLibraryEpilogue(gemm);
    }
  return Internal("no gemm group");
}

constexpr char kGeluTanhBf16[] =
    "  p = MatMul (x, w)\n  h = Add (p, b)\n"
    "  three = Constant <value = float {3.0}> ()\n"
    "  c_f = Constant <value = float {0.044715}> ()\n  c = Cast <to = 16> (c_f)\n"
    "  s_f = Constant <value = float {0.7978845608}> ()\n  s = Cast <to = 16> (s_f)\n"
    "  one_f = Constant <value = float {1.0}> ()\n  one = Cast <to = 16> (one_f)\n"
    "  half_f = Constant <value = float {0.5}> ()\n  half = Cast <to = 16> (half_f)\n"
    "  cube = Pow (h, three)\n  cc = Mul (cube, c)\n  in = Add (h, cc)\n  ins = Mul (in, s)\n  t = Tanh (ins)\n"
    "  opt = Add (t, one)\n  hh = Mul (h, half)\n  y = Mul (hh, opt)\n";
constexpr char kBf16Signature[] =
    "g (bfloat16[256,512] x, bfloat16[512,384] w, bfloat16[384] b) => (bfloat16[256,384] y)";

TEST(GemmLibraryEpilogueTest, BiasAndActivationsMatchWhateverSpellsThem) {
  auto relu = Match("  p = MatMul (x, w)\n  h = Add (p, b)\n  y = Relu (h)\n", kBf16Signature);
  ASSERT_TRUE(relu.ok()) << relu.status().ToString();
  EXPECT_EQ(relu->activation, LibraryActivation::kRelu);
  EXPECT_GE(relu->bias, 0);
  EXPECT_EQ(DescribeLibraryEpilogue(*relu), "bias + relu");
  // max(x, 0) with the bias added on the other side is the same epilogue.
  auto max = Match("  p = MatMul (x, w)\n  h = Add (b, p)\n  zero_f = Constant <value = float {0.0}> ()\n"
                   "  zero = Cast <to = 16> (zero_f)\n  y = Max (h, zero)\n",
                   kBf16Signature);
  ASSERT_TRUE(max.ok()) << max.status().ToString();
  EXPECT_EQ(max->activation, LibraryActivation::kRelu);
  // GELU's tanh form op by op, its constants rounded to bf16.
  auto gelu = Match(kGeluTanhBf16, kBf16Signature);
  ASSERT_TRUE(gelu.ok()) << gelu.status().ToString();
  EXPECT_EQ(DescribeLibraryEpilogue(*gelu), "bias + gelu_tanh");
  // No epilogue: the product itself.
  auto plain = Match("  y = MatMul (x, w)\n", "g (bfloat16[256,512] x, bfloat16[512,384] w) => (bfloat16[256,384] y)");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(DescribeLibraryEpilogue(*plain), "none");
}

TEST(GemmLibraryEpilogueTest, F32TanhGeluMatchesTightlyAndErfGeluDoesNot) {
  const std::string signature = "g (float[64,128] x, float[128,96] w, float[96] b) => (float[64,96] y)";
  auto tanh_form = Match(
      "  p = MatMul (x, w)\n  h = Add (p, b)\n  y = Gelu <approximate = \"tanh\"> (h)\n", signature);
  ASSERT_TRUE(tanh_form.ok()) << tanh_form.status().ToString();
  EXPECT_EQ(tanh_form->activation, LibraryActivation::kGeluTanh);
  // ONNX's default GELU is the erf form: up to 5e-4 away from cuBLASLt's tanh form.
  auto erf_form = Match("  p = MatMul (x, w)\n  h = Add (p, b)\n  y = Gelu (h)\n", signature);
  EXPECT_FALSE(erf_form.ok());
}

TEST(GemmLibraryEpilogueTest, WhatNoLibraryEpilogueComputesIsRefusedWithTheReason) {
  struct Case {
    std::string body, signature, reason;
  };
  const std::vector<Case> cases = {
      {"  p = MatMul (x, w)\n  y = Add (p, r)\n",
       "g (bfloat16[256,512] x, bfloat16[512,384] w, bfloat16[256,384] r) => (bfloat16[256,384] y)", "reads"},
      {"  p = MatMul (x, w)\n  two_f = Constant <value = float {2.0}> ()\n  two = Cast <to = 16> (two_f)\n  y = Mul (p, two)\n",
       "g (bfloat16[256,512] x, bfloat16[512,384] w) => (bfloat16[256,384] y)", "none of"},
      {"  p = MatMul (x, w)\n  y = Sigmoid (p)\n", "g (bfloat16[256,512] x, bfloat16[512,384] w) => (bfloat16[256,384] y)",
       "none of"},
      {"  p = MatMul (x, w)\n  h = Add (p, b)\n  y = Cast <to = 1> (h)\n",
       "g (bfloat16[256,512] x, bfloat16[512,384] w, bfloat16[384] b) => (float[256,384] y)", "the product bf16"},
      {"  p = MatMul (x, w)\n  h = Add (p, b)\n  y = Relu (h)\n",
       "g (bfloat16[256,512] x, bfloat16[512,384] w, bfloat16[384] b) => (bfloat16[256,384] y, bfloat16[256,384] h)",
       "writes 2"},
  };
  for (const Case& c : cases) {
    auto e = Match(c.body, c.signature);
    ASSERT_FALSE(e.ok()) << c.body;
    EXPECT_NE(e.status().message().find(c.reason), std::string::npos) << c.body << ": " << e.status().message();
  }
}

}  // namespace
}  // namespace tilefuse

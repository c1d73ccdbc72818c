#include "reference/conditioning.h"

#include <gtest/gtest.h>

#include "frontend/onnx/importer.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"

namespace tilefuse {
namespace {

// The sensitivity of a graph's outputs under f32's check (rtol 1e-3, atol scaled to the
// output: CompareWithReference), on inputs in [1, 2).
Sensitivity Measure(const char* text) {
  auto model = ImportOnnxText(text);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  const Graph& g = model->graph;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Node& p = g.node(g.inputs()[i]);
    std::vector<double> values;
    for (int64_t e = 0; e < NumElements(p.shape); ++e) values.push_back(1 + (e * 37 + i * 11) % 64 / 64.0);
    inputs.push_back(Tensor::FromDoubles(p.dtype, p.shape, values));
  }
  auto expected = RunReference(g, inputs);
  EXPECT_TRUE(expected.ok());
  auto measured = MeasureSensitivity(g, inputs, *expected, DType::kF32, [](size_t, const Tensor& got, const Tensor& e) {
    return RatioToTolerance(CompareWithReference(got, e));
  });
  EXPECT_TRUE(measured.ok()) << measured.status().ToString();
  return measured.ok() ? *measured : Sensitivity{};
}

// A sum of products in f32 is well-conditioned for f32's tolerance: no legitimate
// rounding comes near it, so a kernel that fails it is wrong.
TEST(ConditioningTest, WellConditionedOutputsStayWellInsideTheTolerance) {
  Sensitivity s = Measure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,16] a, float[16,8] b) => (float[4,8] y) { y = MatMul (a, b) })");
  ASSERT_EQ(s.ratios.size(), 1u);
  EXPECT_LT(s.ratios[0], 0.1) << s.summaries[0];
  EXPECT_NE(s.summaries[0].find("every rounded intermediate by up to 1 ulp"), std::string::npos);
  EXPECT_FALSE(ExplainedByConditioning(5, s.ratios[0])) << "a kernel 5x off the tolerance is a real mismatch here";
}

// (a + 2^24) - 2^24 in f32 keeps almost nothing of a: one ulp of the sum (2) moves the
// difference by 2 where its values are below 2 — legitimate roundings miss the check by
// far, so it cannot judge a kernel there, though the judge still refuses one that is off
// by far more than they are.
TEST(ConditioningTest, CancellationIsIllConditionedAndSaysSo) {
  Sensitivity s = Measure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64] a) => (float[64] y) {
  big = Constant <value = float[1] {16777216}> ()
  s = Add (a, big)
  y = Sub (s, big)
})");
  ASSERT_EQ(s.ratios.size(), 1u);
  EXPECT_GT(s.ratios[0], 1) << s.summaries[0];
  EXPECT_TRUE(ExplainedByConditioning(s.ratios[0], s.ratios[0]));
  EXPECT_FALSE(ExplainedByConditioning(11 * s.ratios[0], s.ratios[0]));
}

}  // namespace
}  // namespace tilefuse

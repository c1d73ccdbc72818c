#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// Each decomposition against the C library's own function.
TEST(OnnxMathFunctionsTest, TrigonometricAndHyperbolicMatchTheCLibrary) {
  Graph g = Import(WithOpset(13, R"(
    g (float[4] x, float[4] big, float[4] unit) => (float[4] tan, float[4] sinh, float[4] cosh, float[4] asinh,
                                                    float[4] acosh, float[4] atanh) {
      tan = Tan(x)
      sinh = Sinh(x)
      cosh = Cosh(x)
      asinh = Asinh(x)
      acosh = Acosh(big)
      atanh = Atanh(unit)
    })"));
  std::vector<double> x = {-2.5, -0.001, 0.5, 3}, big = {1, 1.5, 10, 1000}, unit = {-0.9, -0.1, 0, 0.75};
  std::vector<Tensor> in = {F32({4}, x), F32({4}, big), F32({4}, unit)};
  auto map = [](const std::vector<double>& v, double (*f)(double)) {
    std::vector<double> r;
    for (double e : v) r.push_back(f(static_cast<float>(e)));
    return r;
  };
  ExpectNear(RunGraph(g, in, 0), map(x, std::tan));
  ExpectNear(RunGraph(g, in, 1), map(x, std::sinh));
  ExpectNear(RunGraph(g, in, 2), map(x, std::cosh));
  ExpectNear(RunGraph(g, in, 3), map(x, std::asinh));
  ExpectNear(RunGraph(g, in, 4), map(big, std::acosh));
  ExpectNear(RunGraph(g, in, 5), map(unit, std::atanh));
}

TEST(OnnxMathFunctionsTest, AsinhOfLargeNegativeDoesNotCancel) {
  Graph g = Import(WithOpset(13, "g (double[1] x) => (double[1] y) { y = Asinh(x) }"));
  ExpectNear(RunGraph(g, {Tensor::FromDoubles(DType::kF64, {1}, {-1e9})}), {std::asinh(-1e9)}, 1e-12);
}

TEST(OnnxMathFunctionsTest, RoundHalfToEven) {
  Graph g = Import(WithOpset(11, "g (float[9] x) => (float[9] y) { y = Round(x) }"));
  double inf = std::numeric_limits<double>::infinity();
  std::vector<double> y = RunGraph(g, {F32({9}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 0.49999997, -inf})});
  ASSERT_EQ(y.size(), 9u);
  EXPECT_EQ(y[8], -inf);
  y.pop_back();
  ExpectNear(y, {0, 2, 2, 0, -2, 2, -3, 0});
}

TEST(OnnxMathFunctionsTest, IntegerInputIsRefusedWithTheOpNamed) {
  std::string error = ImportError(WithOpset(13, "g (int32[2] x) => (int32[2] y) { y = Sinh(x) }"));
  EXPECT_TRUE(Contains(error, "(Sinh, opset 13)")) << error;
  EXPECT_TRUE(Contains(error, "Sinh needs a floating-point input, got i32")) << error;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

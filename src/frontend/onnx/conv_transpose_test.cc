// ConvTranspose, imported as a direct convolution over a zero-dilated input, against an
// independent f64 reference in scatter form: out[n, co, i·s - p + t·d] += x[n, ci, i]·w[ci, co, t].
#include <fmt/format.h>

#include <random>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

struct Transposed {
  std::vector<int64_t> strides, dilations, pads_begin;  // pads_begin as the ONNX spec resolves them
  int64_t group = 1;
};

std::vector<int64_t> Unflatten(int64_t flat, const Shape& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t Flatten(const std::vector<int64_t>& index, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

std::vector<double> ScatterReference(const Shape& xs, const std::vector<double>& x, const Shape& ws,
                                     const std::vector<double>& w, const std::vector<double>& bias, const Shape& ys,
                                     const Transposed& t) {
  const size_t spatial = xs.size() - 2;
  const int64_t cig = xs[1] / t.group, cog = ws[1];
  const Shape kernel(ws.begin() + 2, ws.end());
  std::vector<double> y(NumElements(ys), 0.0);
  for (int64_t fx = 0; fx < NumElements(xs); ++fx) {
    std::vector<int64_t> xi = Unflatten(fx, xs);
    const int64_t ci = xi[1], group = ci / cig;
    for (int64_t co = 0; co < cog; ++co) {
      for (int64_t ft = 0; ft < NumElements(kernel); ++ft) {
        std::vector<int64_t> tap = Unflatten(ft, kernel);
        std::vector<int64_t> yi = {xi[0], group * cog + co}, wi = {ci, co};
        bool inside = true;
        for (size_t d = 0; d < spatial; ++d) {
          int64_t o = xi[2 + d] * t.strides[d] - t.pads_begin[d] + tap[d] * t.dilations[d];
          inside = inside && o >= 0 && o < ys[2 + d];
          yi.push_back(o);
          wi.push_back(tap[d]);
        }
        if (inside) y[Flatten(yi, ys)] += x[fx] * w[Flatten(wi, ws)];
      }
    }
  }
  for (int64_t fy = 0; !bias.empty() && fy < NumElements(ys); ++fy) y[fy] += bias[Unflatten(fy, ys)[1]];
  return y;
}

// Values in ±[0.25, 1], never zero, exact in f32.
std::vector<double> RandomValues(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> magnitude(0.25, 1.0);
  std::vector<double> v(count);
  for (double& e : v) e = static_cast<float>((rng() % 2 ? 1 : -1) * magnitude(rng));
  return v;
}

std::string Dims(const Shape& s) {
  std::string text;
  for (size_t d = 0; d < s.size(); ++d) text += (d ? ", " : "") + std::to_string(s[d]);
  return text;
}

// (Not a raw literal: the fuzz seed builder takes those for whole graphs.)
std::string ConvTransposeGraph(const Shape& xs, const Shape& ws, const Shape& ys, bool bias, const std::string& attrs,
                               int opset = 17) {
  std::string bias_decl = bias ? fmt::format(", float[{}] b", ys[1]) : "";
  return WithOpset(opset, fmt::format("g (float[{}] x, float[{}] w{}) => (float[{}] y) {{\n"
                                      "  y = ConvTranspose <{}> (x, w{})\n}}\n",
                                      Dims(xs), Dims(ws), bias_decl, Dims(ys), attrs, bias ? ", b" : ""));
}

// Imports ConvTranspose(attrs) and checks its output shape and values on random inputs.
void ExpectMatchesReference(const Shape& xs, const Shape& ws, const Shape& ys, bool bias, const std::string& attrs,
                            const Transposed& t, int convs = 1) {
  Graph g = Import(ConvTransposeGraph(xs, ws, ys, bias, attrs));
  ASSERT_GT(g.num_nodes(), 0);
  EXPECT_EQ(OutputNode(g).shape, ys);
  EXPECT_EQ(CountOps(g, OpCode::kConv), convs);
  std::vector<double> x = RandomValues(NumElements(xs), 1), w = RandomValues(NumElements(ws), 2);
  std::vector<double> b = bias ? RandomValues(ys[1], 3) : std::vector<double>{};
  std::vector<Tensor> inputs = {F32(xs, x), F32(ws, w)};
  if (bias) inputs.push_back(F32({ys[1]}, b));
  ExpectNear(RunGraph(g, inputs), ScatterReference(xs, x, ws, w, b, ys, t));
}

TEST(OnnxConvTransposeTest, ImportsAsAConvOverViews) {
  Graph g = Import(WithOpset(17, R"(
    g (float[1, 8, 4, 4] x, float[8, 4, 3, 3] w, float[4] b) => (float[1, 4, 8, 8] y) {
      y = ConvTranspose <strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]> (x, w, b)
    })"));
  const Node& conv = OutputNode(g);
  ASSERT_EQ(conv.op, OpCode::kConv);
  EXPECT_EQ(conv.attrs.strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv.attrs.pads, (std::vector<int64_t>{1, 1, 2, 2}));  // d·(k-1) - pad, + output_padding at the end
  EXPECT_EQ(g.node(conv.inputs[0]).shape, (Shape{1, 8, 7, 7}));   // 3 zeros between 4 elements
  EXPECT_EQ(CountOps(g, OpCode::kConcat), 2);  // the zeros, one axis at a time
}

TEST(OnnxConvTransposeTest, UNetUpsamplingStride2Kernel2) {
  ExpectMatchesReference({2, 4, 5, 6}, {4, 3, 2, 2}, {2, 3, 10, 12}, true, "strides = [2, 2]",
                         {{2, 2}, {1, 1}, {0, 0}});
}

TEST(OnnxConvTransposeTest, Stride2Kernel3Pad1OutputPadding1) {
  ExpectMatchesReference({1, 3, 4, 5}, {3, 2, 3, 3}, {1, 2, 8, 10}, true,
                         "strides = [2, 2], pads = [1, 1, 1, 1], output_padding = [1, 1]", {{2, 2}, {1, 1}, {1, 1}});
}

TEST(OnnxConvTransposeTest, Dilation2WithAsymmetricPads) {
  ExpectMatchesReference({1, 2, 4, 4}, {2, 3, 3, 3}, {1, 3, 10, 6}, false,
                         "strides = [2, 1], dilations = [2, 2], pads = [1, 0, 0, 2]", {{2, 1}, {2, 2}, {1, 0}});
}

TEST(OnnxConvTransposeTest, Groups2) {
  ExpectMatchesReference({2, 4, 5, 5}, {4, 3, 3, 3}, {2, 6, 9, 9}, true,
                         "group = 2, strides = [2, 2], pads = [1, 1, 1, 1]", {{2, 2}, {1, 1}, {1, 1}, 2});
}

TEST(OnnxConvTransposeTest, OneDimensional) {
  ExpectMatchesReference({2, 3, 7}, {3, 4, 5}, {2, 4, 21}, true, "strides = [3], pads = [2, 1], output_padding = [1]",
                         {{3}, {1}, {2}});
}

TEST(OnnxConvTransposeTest, OutputShapeSetsThePads) {
  // Full sizes 9 and 7: a total pad of 1 (the odd one at the begin) and of -1 (one
  // more element at the end, as the ONNX reference floors -1/2).
  ExpectMatchesReference({1, 2, 3, 3}, {2, 2, 3, 3}, {1, 2, 8, 8}, false, "strides = [3, 2], output_shape = [8, 8]",
                         {{3, 2}, {1, 1}, {1, 0}});
  // Explicit pads are ignored when output_shape is given, as the spec says.
  ExpectMatchesReference({1, 2, 3, 3}, {2, 2, 3, 3}, {1, 2, 8, 8}, false,
                         "strides = [3, 2], pads = [4, 4, 4, 4], output_shape = [8, 8]", {{3, 2}, {1, 1}, {1, 0}});
}

TEST(OnnxConvTransposeTest, AutoPadSameGivesInputTimesStride) {
  // Totals 1 and 2: SAME_UPPER puts the odd element at the end, SAME_LOWER at the begin.
  ExpectMatchesReference({1, 2, 3, 4}, {2, 2, 3, 4}, {1, 2, 6, 8}, true, "auto_pad = \"SAME_UPPER\", strides = [2, 2]",
                         {{2, 2}, {1, 1}, {0, 1}});
  ExpectMatchesReference({1, 2, 3, 4}, {2, 2, 3, 4}, {1, 2, 6, 8}, true, "auto_pad = \"SAME_LOWER\", strides = [2, 2]",
                         {{2, 2}, {1, 1}, {1, 1}});
}

TEST(OnnxConvTransposeTest, PadsLargerThanTheKernelSpanCrop) {
  // Kernel span 1, pads 2 and 3 at the begins, 2 at the second end: the dilated input
  // is cropped instead of padded negatively.
  ExpectMatchesReference({1, 2, 5, 5}, {2, 2, 2, 2}, {1, 2, 7, 5}, true, "strides = [2, 2], pads = [2, 3, 1, 2]",
                         {{2, 2}, {1, 1}, {2, 3}});
  ExpectMatchesReference({1, 2, 6}, {2, 2, 3}, {1, 2, 3}, false, "strides = [1], dilations = [2], pads = [5, 2]",
                         {{1}, {2}, {5}});
}

TEST(OnnxConvTransposeTest, PadsCroppingEveryInputLeaveTheBias) {
  // The one output element is output padding: x never reaches it.
  ExpectMatchesReference({1, 2, 1}, {2, 3, 1}, {1, 3, 1}, true, "strides = [3], output_padding = [2], pads = [2, 0]",
                         {{3}, {1}, {2}}, /*convs=*/0);
}

TEST(OnnxConvTransposeTest, InconsistentAttributesAreRefused) {
  auto error = [](const std::string& attrs, Shape ws = {2, 2, 3, 3}, int opset = 17) {
    return ImportError(ConvTransposeGraph({1, 2, 3, 3}, ws, {1, 2, 5, 5}, false, attrs, opset));
  };
  std::string e = error("kernel_shape = [2, 2]");
  EXPECT_TRUE(Contains(e, "node 'y' (ConvTranspose, opset 17)")) << e;
  EXPECT_TRUE(Contains(e, "kernel_shape [2, 2] disagrees with the weight")) << e;
  EXPECT_TRUE(Contains(error("strides = [2, 2], output_padding = [2, 0]"), "output_padding [2, 0] must be less than"));
  EXPECT_TRUE(Contains(error("group = 2", {2, 2, 3}), "same rank"));
  EXPECT_TRUE(Contains(error("group = 3"), "does not fit input"));
  EXPECT_TRUE(Contains(error("group = 0"), "does not fit input"));
  EXPECT_TRUE(Contains(error("pads = [3, 3, 3, 3]"), "leave no output"));
  EXPECT_TRUE(Contains(error("pads = [1, 1]"), "do not fit 2 spatial dims"));
  EXPECT_TRUE(Contains(error("strides = [0, 1]"), "must be positive"));
  EXPECT_TRUE(Contains(error("strides = [1099511627776, 1]"), "exceed"));
  EXPECT_TRUE(Contains(error("dilations = [1099511627776, 1]"), "exceed"));
  EXPECT_TRUE(Contains(error("auto_pad = \"SAME\""), "unknown auto_pad 'SAME'"));
  EXPECT_TRUE(Contains(error("output_shape = [5, 5, 5]"), "one size per spatial dim"));
  EXPECT_TRUE(Contains(error("output_shape = [0, 5]"), "must be positive"));
  EXPECT_TRUE(Contains(error("auto_pad = \"VALID\", output_shape = [6, 6]"), "auto_pad VALID excludes"));
  EXPECT_TRUE(Contains(error("output_shape = [5, 5]", {2, 2, 3, 3}, 10), "before opset 11"));
  // Pads that crop a huge zero-dilated input back to one element: refused before a view
  // of that size (2^80 elements) is built.
  std::string huge = ImportError(ConvTransposeGraph({1, 1, 1048576, 1048576}, {1, 1, 1, 1}, {1, 1, 1, 1}, false,
                                                    "strides = [1048576, 1048576], "
                                                    "pads = [1099510579200, 1099510579200, 0, 0]"));
  EXPECT_TRUE(Contains(huge, "the input with zeros between its elements")) << huge;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "frontend/onnx/onnx_test_util.h"

namespace tilefuse::onnx_testing {
namespace {

// Einsum by its definition, for letter-only equations with an explicit output: every
// assignment of values to the labels adds the product of the picked input elements to
// the picked output element.
std::vector<double> BruteForceEinsum(const std::vector<std::string>& terms, const std::string& out,
                                     const std::vector<Shape>& shapes, const std::vector<std::vector<double>>& inputs) {
  std::map<char, int64_t> sizes;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) sizes[terms[i][d]] = shapes[i][d];
  std::vector<char> labels;
  for (auto [label, size] : sizes) labels.push_back(label);
  auto flat = [&](const std::string& term, const std::map<char, int64_t>& at) {
    int64_t index = 0;
    for (char c : term) index = index * sizes[c] + at.at(c);
    return index;
  };
  int64_t out_size = 1;
  for (char c : out) out_size *= sizes[c];
  std::vector<double> result(out_size, 0);
  std::map<char, int64_t> at;
  for (char c : labels) at[c] = 0;
  while (true) {
    double product = 1;
    for (size_t i = 0; i < terms.size(); ++i) product *= inputs[i][flat(terms[i], at)];
    result[flat(out, at)] += product;
    size_t d = labels.size();
    while (d > 0 && ++at[labels[d - 1]] == sizes[labels[d - 1]]) at[labels[--d]] = 0;
    if (d == 0) break;
  }
  return result;
}

// Imports a one-node Einsum over float inputs of `shapes` and checks it against the
// brute force on random inputs.
void CheckEinsum(const std::string& equation, const std::vector<Shape>& shapes, const Shape& out_shape) {
  SCOPED_TRACE(equation);
  std::string params, names, output = out_shape.empty() ? "float y" : fmt::format("float[{}] y", fmt::join(out_shape, ", "));
  for (size_t i = 0; i < shapes.size(); ++i) {
    params += fmt::format("{}float[{}] x{}", i ? ", " : "", fmt::join(shapes[i], ", "), i);
    names += fmt::format("{}x{}", i ? ", " : "", i);
  }
  Graph g = Import(WithOpset(13, fmt::format("g ({}) => ({}) {{ y = Einsum <equation = \"{}\"> ({}) }}", params, output,
                                             equation, names)));
  std::vector<std::string> terms;
  std::string in = equation.substr(0, equation.find("->")), out = equation.substr(equation.find("->") + 2);
  for (size_t start = 0;;) {
    size_t comma = in.find(',', start);
    terms.push_back(in.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<std::vector<double>> values;
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < shapes.size(); ++i) {
    values.push_back(RandomNonZero(NumElements(shapes[i]), 10 + static_cast<unsigned>(i)));
    tensors.push_back(F32(shapes[i], values.back()));
  }
  ExpectNear(RunGraph(g, tensors), BruteForceEinsum(terms, out, shapes, values), 1e-5);
}

TEST(OnnxEinsumTest, MatMulLikeEquationsBecomeOneMatMul) {
  CheckEinsum("bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}, {2, 3, 5});
  CheckEinsum("bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5});
  CheckEinsum("ij,jk->ki", {{3, 4}, {4, 2}}, {2, 3});
  Graph g = Import(WithOpset(13, R"(
    g (float[2, 2, 3, 4] q, float[2, 2, 5, 4] k) => (float[2, 2, 3, 5] s) { s = Einsum <equation = "bhqd,bhkd->bhqk"> (q, k) })"));
  EXPECT_EQ(CountOps(g, OpCode::kMatMul), 1);
}

TEST(OnnxEinsumTest, TransposesReductionsAndOuterProducts) {
  CheckEinsum("ij->ji", {{3, 4}}, {4, 3});
  CheckEinsum("ij->i", {{3, 4}}, {3});
  CheckEinsum("ijk->", {{2, 3, 2}}, {});
  CheckEinsum("i,j->ij", {{3}, {4}}, {3, 4});
  CheckEinsum("i,i->", {{5}, {5}}, {});
  CheckEinsum("bi,bj->bij", {{2, 3}, {2, 4}}, {2, 3, 4});
  CheckEinsum("ij,kj->", {{2, 3}, {4, 3}}, {});
}

TEST(OnnxEinsumTest, ThreeOperandsAndDiagonals) {
  CheckEinsum("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {2, 2});
  CheckEinsum("ij,j,jk->ik", {{2, 3}, {3}, {3, 2}}, {2, 2});
  CheckEinsum("ii->i", {{4, 4}}, {4});
  CheckEinsum("ii->", {{3, 3}}, {});
  CheckEinsum("bii,bi->bi", {{2, 3, 3}, {2, 3}}, {2, 3});
  CheckEinsum("iji->j", {{3, 2, 3}}, {2});
}

TEST(OnnxEinsumTest, ImplicitOutputAndEllipsisBroadcast) {
  // Implicit output: the letters used once, in alphabetical order ("ik").
  Graph implicit = Import(WithOpset(13, R"(
    g (float[2, 3] a, float[3, 4] b) => (float[2, 4] y) { y = Einsum <equation = "ij,jk"> (a, b) })"));
  std::vector<double> a = RandomNonZero(6, 5), b = RandomNonZero(12, 6);
  ExpectNear(RunGraph(implicit, {F32({2, 3}, a), F32({3, 4}, b)}),
             BruteForceEinsum({"ij", "jk"}, "ik", {{2, 3}, {3, 4}}, {a, b}));

  // "...ij,...jk->...ik" with batch dims [2, 1] and [3] broadcasting to [2, 3].
  Graph ellipsis = Import(WithOpset(13, R"(
    g (float[2, 1, 2, 3] a, float[3, 3, 2] b) => (float[2, 3, 2, 2] y) { y = Einsum <equation = "...ij,...jk->...ik"> (a, b) })"));
  std::vector<double> x = RandomNonZero(12, 7), w = RandomNonZero(18, 8), expected;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 2; ++k) {
          double sum = 0;
          for (int j = 0; j < 3; ++j) sum += x[(p * 2 + i) * 3 + j] * w[(q * 3 + j) * 2 + k];
          expected.push_back(sum);
        }
  ExpectNear(RunGraph(ellipsis, {F32({2, 1, 2, 3}, x), F32({3, 3, 2}, w)}), expected);

  // Implicit output with an ellipsis: its dims first, then "j" (used once); "i" is summed.
  Graph batch_sum = Import(WithOpset(13, R"(
    g (float[2, 3, 4] a, float[2, 3] v) => (float[2, 4] y) { y = Einsum <equation = "...ij,...i"> (a, v) })"));
  std::vector<double> m = RandomNonZero(24, 9), v = RandomNonZero(6, 10), sums;
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      for (int i = 0; i < 3; ++i) sum += m[(p * 3 + i) * 4 + j] * v[p * 3 + i];
      sums.push_back(sum);
    }
  ExpectNear(RunGraph(batch_sum, {F32({2, 3, 4}, m), F32({2, 3}, v)}), sums);
}

TEST(OnnxEinsumTest, BadEquationsAreNamedErrors) {
  auto error = [](const std::string& equation, const std::string& inputs, const std::string& args) {
    return ImportError(WithOpset(13, "g (" + inputs + ") => (float[2] y) { y = Einsum <equation = \"" + equation +
                                         "\"> (" + args + ") }"));
  };
  std::string bad_char = error("i1->i", "float[2] a", "a");
  EXPECT_TRUE(Contains(bad_char, "node 'y' (Einsum, opset 13)")) << bad_char;
  EXPECT_TRUE(Contains(bad_char, "not a letter")) << bad_char;
  EXPECT_TRUE(Contains(error("i,i->i", "float[2] a", "a"), "2 input terms for 1 inputs"));
  EXPECT_TRUE(Contains(error("ij->i", "float[2] a", "a"), "term 0 has 2 labels for an input of rank 1"));
  EXPECT_TRUE(Contains(error("i,i->i", "float[2] a, float[3] b", "a, b"), "label 'i' has size 3 in input 1"));
  EXPECT_TRUE(Contains(error("i->j", "float[2] a", "a"), "each output label"));
  EXPECT_TRUE(Contains(error("i->ii", "float[2] a", "a"), "each output label"));
  EXPECT_TRUE(Contains(error("..i->i", "float[2] a", "a"), "ellipsis"));
  EXPECT_TRUE(Contains(error("ii->i", "float[2, 3] a", "a"), "label 'i' has size 3"));
  EXPECT_TRUE(Contains(error("i,i->i", "float[2] a, int64[2] b", "a, b"), "numeric dtype"));
  // 2^21 x 2^21 outer product: more elements than the importer lets a value hold.
  std::string huge = ImportError(WithOpset(13, R"(
    g (float[2097152] a, float[2097152] b) => (float[2097152, 2097152] y) { y = Einsum <equation = "i,j->ij"> (a, b) })"));
  EXPECT_TRUE(Contains(huge, "intermediate product")) << huge;
  EXPECT_TRUE(Contains(huge, "too large")) << huge;
  std::string missing = ImportError(WithOpset(13, "g (float[2] a) => (float[2] y) { y = Einsum(a) }"));
  EXPECT_TRUE(Contains(missing, "attribute 'equation' is missing")) << missing;
}

}  // namespace
}  // namespace tilefuse::onnx_testing

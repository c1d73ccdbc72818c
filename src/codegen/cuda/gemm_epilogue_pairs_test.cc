// The GEMM epilogue's Pair, run on the host: the template calls it for each column pair a
// thread holds, and it moves values at the product's position as one word per pair (f32 pairs
// as a float2). Whatever it writes must be what operator(), element by element, writes. Only
// the functor is compiled here (its helpers written for the host); the skeleton around it
// needs a GPU (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/gemm_template.h"
#include "codegen/gemm_split.h"
#include "fusion/group_classifier.h"
#include "testing/host_jit_test_util.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

constexpr int64_t kRows = 6, kN = 520;

// p = x·w, y = p + b + r, t = relu(y): the bias by column, the residual r read and y, t written
// at the product's position.
TEST(GemmEpiloguePairsTest, F32PairsWriteWhatElementByElementWrites) {
  PlannedText p = PlanOnnxText(
      fmt::format("g (float[{0},136] x, float[136,{1}] w, float[{1}] b, float[{0},{1}] r) => (float[{0},{1}] t, float[{0},{1}] y)", kRows, kN),
      "  p = MatMul (x, w)\n  s = Add (p, b)\n  y = Add (s, r)\n  t = Relu (y)\n");
  const FusionGroup* group = nullptr;
  for (const FusionGroup& g : p.plan.groups)
    if (g.kind == GroupKind::kGemm) group = &g;
  ASSERT_NE(group, nullptr);
  auto gemm = LowerGemmTemplate(p.graph, *group, SplitGemmGroup(p.graph, *group), FindInlinedGenerators(p.graph), /*tf32=*/false);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const std::string epilogue = GemmEpilogueStruct(*gemm, -1, -1, -1);
  ASSERT_NE(epilogue.find("float2"), std::string::npos) << "the pairs move as float2:\n" << epilogue;

  // Each passed buffer's member, bound to the host array of its node (by the model's names).
  std::map<std::string, std::vector<float>> arrays;
  const std::vector<double> residual_values = [] {
    std::vector<double> v(kRows * kN);
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) * 3;
    return v;
  }();
  arrays["b"].resize(kN);
  for (int64_t c = 0; c < kN; ++c) arrays["b"][c] = static_cast<float>(std::cos(0.11 * static_cast<double>(c)));
  arrays["r"].assign(residual_values.begin(), residual_values.end());
  std::string bind;
  std::vector<std::string> bound;
  for (size_t i = 0; i < gemm->epilogue.buffers.size(); ++i) {
    const KernelBuffer& buffer = gemm->epilogue.buffers[i];
    if (!GemmPassesBuffer(*gemm, buffer)) continue;
    const std::string& name = p.graph.node(buffer.node).name;
    ASSERT_TRUE(name == "b" || name == "r" || name == "y" || name == "t") << "buffer " << i << " of node '" << name << "'";
    bind += fmt::format("  e.b{} = (float*)buffers[{}];\n", i, bound.size());
    bound.push_back(name);
  }
  const std::string host = R"(
#include <cstdint>
#define __device__
#define __forceinline__
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
namespace tf {
inline float tf_cvt_f32(float x) { return x; }
template <typename T> inline float tf_pack_f32(T v) { return (float)v; }
template <typename T> inline T relu(T a) { return a < T(0) ? T(0) : a; }
)" + epilogue + R"(
}  // namespace tf
extern "C" void run(float* const* buffers, const float* acc, int rows, int n, int pairs) {
  tf::Epilogue e{};
)" + bind + R"(
  for (int row = 0; row < rows; ++row)
    for (int col = 0; col < n; col += 2) {
      const float a[2] = {acc[row * n + col], acc[row * n + col + 1]};
      const float loaded[2] = {0.0f, 0.0f};
      float result[2];
      if (pairs) {
        e.Pair(row, col, a, loaded, result);
      } else {
        e(row, col, a[0], 0.0f);
        e(row, col + 1, a[1], 0.0f);
      }
    }
}
)";
  auto library = CompileForHost(host);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  auto run = (*library)->Function<void(float* const*, const float*, int, int, int)>("run");
  ASSERT_TRUE(run.ok());

  std::vector<float> acc(kRows * kN);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(std::sin(1.3 * static_cast<double>(i) + 0.5) * 2);
  std::map<std::string, std::vector<float>> written[2];
  for (int pairs : {0, 1}) {
    std::map<std::string, std::vector<float>> run_arrays = arrays;
    run_arrays["y"].assign(kRows * kN, NAN);  // poisoned: an unwritten element fails
    run_arrays["t"].assign(kRows * kN, NAN);
    std::vector<float*> pointers;
    for (const std::string& name : bound) pointers.push_back(run_arrays[name].data());
    (*run)(pointers.data(), acc.data(), static_cast<int>(kRows), static_cast<int>(kN), pairs);
    written[pairs] = run_arrays;
  }
  for (int64_t row = 0; row < kRows; ++row)
    for (int64_t col = 0; col < kN; ++col) {
      const size_t i = static_cast<size_t>(row * kN + col);
      const float y = acc[i] + arrays["b"][col] + arrays["r"][i];
      ASSERT_EQ(written[1]["y"][i], y) << "y at (" << row << ", " << col << ") by pairs";
      ASSERT_EQ(written[1]["t"][i], y < 0 ? 0.0f : y) << "t at (" << row << ", " << col << ") by pairs";
      ASSERT_EQ(written[0]["y"][i], written[1]["y"][i]) << "element by element";
      ASSERT_EQ(written[0]["t"][i], written[1]["t"][i]) << "element by element";
    }
}

}  // namespace
}  // namespace tilefuse

// f32 MaxPool and AveragePool on the CPU through oneDNN's pooling (backend/cpu/onednn_pool.h):
// odd shapes (1-3 spatial dims, strides, dilations, asymmetric and ceil-mode pads, the
// padding counted or not), compiled fused and unfused with outputs poisoned, against the
// f64 reference interpreter on random inputs; the pool group said to run on oneDNN, and a
// pool the passes do not keep (a window of pads alone) still generated, not on the
// reference kernels.
#include "backend/cpu/onednn_pool.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "backend/cpu/onednn_conv.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct PoolCase {
  std::string name;
  std::function<Value(GraphBuilder&)> build;  // adds the graph's nodes, returns its output
  bool on_onednn;                             // the passes keep the pool for oneDNN
};

PoolParams Params(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                  std::vector<int64_t> dilations, bool count_include_pad = false) {
  return {std::move(kernel), std::move(strides), std::move(pads), std::move(dilations), 1, count_include_pad};
}

std::vector<PoolCase> Cases() {
  auto input = [](GraphBuilder& b, Shape shape) { return b.Parameter("x", DType::kF32, std::move(shape)); };
  return {
      // ResNet's stem pool after the ReLU.
      {"max_3x3_stride2_pad1_after_relu",
       [&](GraphBuilder& b) { return b.MaxPool(b.Unary(OpCode::kRelu, input(b, {2, 5, 17, 16})), Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1})); },
       true},
      // ceil_mode as the importer writes it: extra padding at the end.
      {"max_2x2_stride2_ceil_pads",
       [&](GraphBuilder& b) { return b.MaxPool(input(b, {1, 3, 7, 9}), Params({2, 2}, {2, 2}, {0, 0, 1, 1}, {1, 1})); },
       true},
      {"max_dilated_asymmetric_strides",
       [&](GraphBuilder& b) { return b.MaxPool(input(b, {1, 4, 13, 11}), Params({3, 2}, {1, 2}, {2, 0, 0, 1}, {2, 1})); },
       true},
      {"max_1d", [&](GraphBuilder& b) { return b.MaxPool(input(b, {2, 3, 19}), Params({4}, {3}, {1, 2}, {1})); }, true},
      {"average_exclude_pad",
       [&](GraphBuilder& b) { return b.AveragePool(input(b, {1, 6, 10, 10}), Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1})); },
       true},
      {"average_include_pad",
       [&](GraphBuilder& b) { return b.AveragePool(input(b, {1, 6, 10, 10}), Params({3, 3}, {1, 1}, {1, 2, 1, 0}, {1, 1}, true)); },
       true},
      {"average_3d",
       [&](GraphBuilder& b) { return b.AveragePool(input(b, {1, 2, 5, 6, 7}), Params({2, 3, 2}, {1, 2, 2}, {0, 1, 1, 1, 1, 0}, {1, 1, 1})); },
       true},
      // Pads as large as the window: windows of pads alone, which oneDNN refuses; rewritten.
      {"max_pads_as_large_as_the_window",
       [&](GraphBuilder& b) { return b.MaxPool(input(b, {1, 2, 5, 5}), Params({2, 2}, {1, 1}, {2, 0, 0, 2}, {1, 1})); },
       false},
  };
}

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name; }

class OnednnPoolTest : public testing::TestWithParam<std::tuple<PoolCase, bool>> {};

TEST_P(OnednnPoolTest, MatchesReference) {
  if (!OnednnConvAvailable()) GTEST_SKIP() << "built without oneDNN";
  const auto& [c, fuse] = GetParam();
  GraphBuilder b;
  b.Output(c.build(b), "y");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  PassOptions passes;
  passes.library_conv = true;
  StatusOr<Graph> graph = RunGraphPasses(*built, passes);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  bool kept = false;
  for (const Node& n : graph->nodes()) kept = kept || n.op == OpCode::kMaxPool || n.op == OpCode::kAveragePool;
  EXPECT_EQ(kept, c.on_onednn);
  CpuCompileOptions options;
  options.fuse = fuse;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  StatusOr<std::unique_ptr<CpuExecutable>> compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph->inputs().size(); ++i) {
    const Node& p = graph->node(graph->inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, 200 + i));
  }
  StatusOr<std::vector<Tensor>> expected = RunReference(*built, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (int run = 0; run < 2; ++run) {
    StatusOr<std::vector<Tensor>> actual = (*compiled)->Run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    Comparison cmp = CompareNormwise((*actual)[0], (*expected)[0], Tolerance{1e-5, 1e-6});
    EXPECT_TRUE(cmp.pass) << cmp.reason;
  }
  std::string libraries;
  for (const KernelInfo& k : (*compiled)->kernels()) {
    EXPECT_TRUE(k.generated) << k.name << ": " << k.why_not;
    EXPECT_EQ(k.num_reference_nodes, 0) << k.name << ": " << k.why_not;
    libraries += k.library + "\n";
  }
  EXPECT_EQ(libraries.find("oneDNN") != std::string::npos, c.on_onednn) << libraries;
}

INSTANTIATE_TEST_SUITE_P(Cases, OnednnPoolTest, testing::Combine(testing::ValuesIn(Cases()), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<PoolCase, bool>>& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_fused" : "_unfused");
                         });

// Without the library option every pool is still rewritten into window taps: the graph the
// CUDA backend compiles.
TEST(OnednnPoolPassTest, DefaultPassesRewritePools) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {1, 4, 6, 6});
  b.Output(b.MaxPool(x, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1})), "m");
  b.Output(b.AveragePool(x, Params({2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1})), "a");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok());
  for (bool library : {false, true}) {
    PassOptions passes;
    passes.library_conv = library;
    StatusOr<Graph> graph = RunGraphPasses(*built, passes);
    ASSERT_TRUE(graph.ok());
    int pools = 0;
    for (const Node& n : graph->nodes()) pools += n.op == OpCode::kMaxPool || n.op == OpCode::kAveragePool;
    EXPECT_EQ(pools, library ? 2 : 0);
  }
}

}  // namespace
}  // namespace tilefuse

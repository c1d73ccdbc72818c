// Convolution and pooling rewritten into window views, matmuls and reductions: the
// rewrite must compute what the opaque op computes (both evaluated by the f64 reference
// interpreter, the opaque op's own kernel being the oracle), and the CPU backend must
// compile the rewrite into generated kernels that match it, outputs poisoned first.
#include "driver/driver.h"
#include "passes/window_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>

#include "reference/interpreter.h"
#include "passes/pass_test_util.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"
#include "ir/printer.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

struct WindowCase {
  const char* name;
  OpCode op;
  Shape x;         // [N, C, in...]
  Shape w;         // conv weight [Co, C/g, k...]; empty for pools
  PoolParams p;    // kernel is taken from w for conv
  bool bias = false;
  DType dtype = DType::kF32;
  OpCode expect = OpCode::kMatMul;  // an op the rewrite must use
};

void PrintTo(const WindowCase& c, std::ostream* os) { *os << c.name; }

PoolParams Params(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                  std::vector<int64_t> dilations, int64_t group = 1, bool count_include_pad = false) {
  return {std::move(kernel), std::move(strides), std::move(pads), std::move(dilations), group, count_include_pad};
}

const WindowCase kCases[] = {
    {"conv_1x1", OpCode::kConv, {2, 8, 5, 6}, {12, 8, 1, 1}, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true},
    {"conv_1x1_stride2", OpCode::kConv, {1, 8, 7, 7}, {4, 8, 1, 1}, Params({1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1})},
    {"conv_3x3_pad1", OpCode::kConv, {1, 6, 9, 9}, {10, 6, 3, 3}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true},
    {"conv_7x7_stride2_pad3", OpCode::kConv, {2, 3, 20, 18}, {8, 3, 7, 7}, Params({7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}), true},
    {"conv_asymmetric_pads", OpCode::kConv, {1, 4, 8, 7}, {5, 4, 3, 2}, Params({3, 2}, {1, 2}, {0, 2, 1, 0}, {1, 1})},
    {"conv_dilation2", OpCode::kConv, {1, 4, 11, 11}, {6, 4, 3, 3}, Params({3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}), true},
    {"conv_groups2", OpCode::kConv, {2, 8, 6, 6}, {6, 4, 3, 3}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2), true},
    {"conv_depthwise", OpCode::kConv, {2, 6, 9, 8}, {6, 1, 3, 3}, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6), true,
     DType::kF32, OpCode::kAdd},
    {"conv_depthwise_multiplier2", OpCode::kConv, {1, 3, 7, 7}, {6, 1, 5, 5}, Params({5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 3),
     false, DType::kF32, OpCode::kAdd},
    // More than 49 taps: the depthwise conv and the pools reduce the window as a row.
    {"conv_depthwise_9x9", OpCode::kConv, {1, 4, 12, 12}, {4, 1, 9, 9}, Params({9, 9}, {1, 1}, {4, 4, 4, 4}, {1, 1}, 4), true,
     DType::kF32, OpCode::kReduceSum},
    {"max_pool_8x8", OpCode::kMaxPool, {1, 3, 16, 16}, {}, Params({8, 8}, {4, 4}, {2, 2, 2, 2}, {1, 1}), false, DType::kF32,
     OpCode::kReduceMax},
    {"average_pool_8x8_pad_excluded", OpCode::kAveragePool, {1, 3, 16, 16}, {}, Params({8, 8}, {4, 4}, {2, 2, 2, 2}, {1, 1}),
     false, DType::kF32, OpCode::kReduceSum},
    {"conv_one_input_channel", OpCode::kConv, {2, 1, 10, 10}, {4, 1, 3, 3}, Params({3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true,
     DType::kF32, OpCode::kAdd},
    {"conv_1d", OpCode::kConv, {2, 4, 17}, {6, 4, 5}, Params({5}, {2}, {2, 1}, {1}), true},
    {"conv_3d", OpCode::kConv, {1, 2, 5, 6, 4}, {3, 2, 3, 3, 2}, Params({3, 3, 2}, {1, 2, 1}, {1, 1, 0, 1, 0, 1}, {1, 1, 1})},
    {"conv_bf16", OpCode::kConv, {1, 8, 6, 6}, {8, 8, 3, 3}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, DType::kBF16},
    {"conv_depthwise_f16", OpCode::kConv, {1, 4, 6, 6}, {4, 1, 3, 3}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4), true,
     DType::kF16, OpCode::kAdd},
    {"max_pool_3x3_stride2_pad1", OpCode::kMaxPool, {2, 3, 9, 10}, {}, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}), false,
     DType::kF32, OpCode::kMax},
    // ceil_mode as the importer writes it: the end pads grow until the last window fits.
    {"max_pool_ceil_pads", OpCode::kMaxPool, {1, 2, 8, 8}, {}, Params({3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}), false,
     DType::kF32, OpCode::kMax},
    {"max_pool_dilation_1d", OpCode::kMaxPool, {2, 3, 12}, {}, Params({3}, {1}, {1, 1}, {2}), false, DType::kF32,
     OpCode::kMax},
    {"max_pool_i8", OpCode::kMaxPool, {1, 2, 5, 5}, {}, Params({2, 2}, {1, 1}, {1, 0, 0, 1}, {1, 1}), false, DType::kI8,
     OpCode::kMax},
    {"average_pool_pad_excluded", OpCode::kAveragePool, {2, 3, 7, 7}, {}, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}),
     false, DType::kF32, OpCode::kAdd},
    {"average_pool_pad_included", OpCode::kAveragePool, {1, 3, 7, 6}, {},
     Params({3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 1}, 1, true), false, DType::kF32, OpCode::kAdd},
    {"average_pool_no_pad", OpCode::kAveragePool, {1, 4, 8, 8}, {}, Params({2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}), false,
     DType::kBF16, OpCode::kAdd},
};

Graph BuildCase(const WindowCase& c) {
  GraphBuilder b;
  Value x = b.Parameter("x", c.dtype, c.x);
  Value y;
  b.SetLocation("", "window_op");
  if (c.op == OpCode::kConv) {
    PoolParams p = c.p;
    p.kernel.assign(c.w.begin() + 2, c.w.end());
    Value w = b.Parameter("w", c.dtype, c.w);
    Value bias = c.bias ? b.Parameter("bias", c.dtype, {c.w[0]}) : Value{};
    y = b.Conv(x, w, bias, p);
  } else {
    y = c.op == OpCode::kMaxPool ? b.MaxPool(x, c.p) : b.AveragePool(x, c.p);
  }
  b.Output(y, "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

// Random values in [-4, 4) (never zeros everywhere); integers in [-100, 100).
std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int id : graph.inputs()) {
    const Node& p = graph.node(id);
    Tensor u = Tensor::Random(DType::kF64, p.shape, seed++);  // [-1, 1)
    Tensor t = Tensor::Uninitialized(p.dtype, p.shape);
    for (int64_t i = 0; i < u.num_elements(); ++i)
      t.SetDouble(i, IsFloat(p.dtype) ? 4 * u.GetDouble(i) : std::floor(100 * u.GetDouble(i)));
    inputs.push_back(t);
  }
  return inputs;
}

class WindowOpsTest : public ::testing::TestWithParam<WindowCase> {};

void ExpectRewriteMatches(const WindowCase& c, const WindowOpsOptions& options) {
  Graph original = BuildCase(c);
  auto rewritten = RewriteWindowOps(original, options);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kConv) + CountOps(*rewritten, OpCode::kMaxPool) +
                CountOps(*rewritten, OpCode::kAveragePool),
            0);
  EXPECT_GE(CountOps(*rewritten, c.expect), 1) << "expected the rewrite to use " << OpName(c.expect);

  std::vector<Tensor> inputs = RandomInputs(original, 7);
  auto expected = RunReference(original, inputs);
  auto actual = RunReference(*rewritten, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  // Both in f64 but the rewrite rounds every node to the dtype: a sum of taps rounded
  // term by term in f32 errs by a few ulp of its largest terms, not of a result that
  // cancels to near zero, so the absolute part scales with the output; half types round
  // products the opaque kernel keeps in f64.
  Tolerance tol = c.dtype == DType::kF32 ? Tolerance{1e-5, 1e-5 * MaxFiniteMagnitude((*expected)[0])} : ToleranceFor(c.dtype);
  Comparison cmp = CompareTensors((*actual)[0], (*expected)[0], tol);
  EXPECT_TRUE(cmp.pass) << cmp.reason;
}

TEST_P(WindowOpsTest, RewriteMatchesTheOpaqueOp) { ExpectRewriteMatches(GetParam(), {}); }

// The channels-last forms (2-D convolutions of group 1, depthwise ones, pools; the rest
// as above) must compute the same, transposes and all.
TEST_P(WindowOpsTest, ChannelsLastRewriteMatchesTheOpaqueOp) {
  ExpectRewriteMatches(GetParam(), WindowOpsOptions{.channels_last = true});
}

void ExpectCpuKernelsMatch(const WindowCase& c, const PassOptions& passes) {
  Graph original = BuildCase(c);
  auto graph = RunGraphPasses(original, passes);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  for (const KernelInfo& k : (*compiled)->kernels()) EXPECT_TRUE(k.generated) << k.name << ": " << k.why_not;

  std::vector<Tensor> inputs = RandomInputs(original, 11);
  auto expected = RunReference(original, inputs);
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  Comparison cmp = CompareTensors((*actual)[0], (*expected)[0]);
  EXPECT_TRUE(cmp.pass) << cmp.reason;
}

TEST_P(WindowOpsTest, CpuKernelsMatchTheOpaqueOp) { ExpectCpuKernelsMatch(GetParam(), PassOptions{}); }

TEST_P(WindowOpsTest, ChannelsLastCpuKernelsMatchTheOpaqueOp) {
  PassOptions passes;
  passes.channels_last = true;
  ExpectCpuKernelsMatch(GetParam(), passes);
}

// The exact channels-last product the implicit-GEMM path matches: x's NHWC view (1×1) or
// the window moved channels-last, times the weights as [KH·KW·C, Co].
TEST(WindowOps, ChannelsLastConvIsOnePlainProduct) {
  for (int64_t k : {1, 3}) {
    WindowCase c{"conv", OpCode::kConv, {4, 8, 6, 6}, {16, 8, k, k}, Params({k, k}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true};
    auto g = RewriteWindowOps(BuildCase(c), WindowOpsOptions{.channels_last = true});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const int64_t out = 6 - k + 1;
    const Node* product = nullptr;
    for (const Node& n : g->nodes())
      if (n.op == OpCode::kMatMul) product = &n;
    ASSERT_NE(product, nullptr);
    EXPECT_EQ(product->shape, (Shape{4 * out * out, 16}));
    const Node& a = g->node(product->inputs[0]);
    const Node& a_in = g->node(a.inputs[0]);
    ASSERT_EQ(a.op, OpCode::kReshape);
    ASSERT_EQ(a_in.op, OpCode::kTranspose);
    EXPECT_EQ(a.shape, (Shape{4 * out * out, 8 * k * k}));
    if (k == 1) {
      EXPECT_EQ(a_in.attrs.perm, (std::vector<int64_t>{0, 2, 3, 1}));
    } else {
      EXPECT_EQ(a_in.attrs.perm, (std::vector<int64_t>{0, 2, 3, 4, 5, 1}));
      EXPECT_EQ(g->node(a_in.inputs[0]).op, OpCode::kWindow);
    }
    const Node& wt = g->node(product->inputs[1]);
    ASSERT_EQ(wt.op, OpCode::kReshape);
    EXPECT_EQ(g->node(wt.inputs[0]).attrs.perm, (std::vector<int64_t>{2, 3, 1, 0}));
  }
}

// A convolution PyTorch would run on TF32 tensor cores (cudnn.allow_tf32) hands that to its
// product, in either layout; one without does not.
TEST(WindowOps, TheProductKeepsTheConvolutionsTf32) {
  for (bool tf32 : {true, false})
    for (bool channels_last : {true, false}) {
      SCOPED_TRACE(fmt::format("tf32 {} channels_last {}", tf32, channels_last));
      PoolParams p = Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1});
      p.tf32 = tf32;
      WindowCase c{"conv", OpCode::kConv, {2, 8, 6, 6}, {16, 8, 3, 3}, p, true};
      const Graph before = BuildCase(c);
      for (const Node& n : before.nodes())
        if (n.op == OpCode::kConv) EXPECT_EQ(n.attrs.tf32, tf32);
      auto g = RewriteWindowOps(before, WindowOpsOptions{.channels_last = channels_last});
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      int products = 0;
      for (const Node& n : g->nodes())
        if (n.op == OpCode::kMatMul) {
          ++products;
          EXPECT_EQ(n.attrs.tf32, tf32);
          EXPECT_EQ(PrintNode(n).find("tf32") != std::string::npos, tf32) << PrintNode(n);
        }
      EXPECT_EQ(products, 1);
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, WindowOpsTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A hand-computed case, independent of both reference kernels: a 2x2 average pool with
// one pad on each side of a 1-D input [1, 2, 3] (divisor counts inside positions only).
TEST(WindowOps, AveragePoolDivisorsByHand) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {1, 1, 3});
  b.Output(b.AveragePool(x, Params({2}, {1}, {1, 1}, {1})), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok());
  auto rewritten = RewriteWindowOps(*graph);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  auto out = RunReference(*rewritten, {Tensor::FromDoubles(DType::kF64, {1, 1, 3}, {1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, 4}));
  EXPECT_DOUBLE_EQ(y.GetDouble(0), 1.0);  // [pad, 1]
  EXPECT_DOUBLE_EQ(y.GetDouble(1), 1.5);  // [1, 2]
  EXPECT_DOUBLE_EQ(y.GetDouble(2), 2.5);  // [2, 3]
  EXPECT_DOUBLE_EQ(y.GetDouble(3), 3.0);  // [3, pad]
}

}  // namespace
}  // namespace tilefuse

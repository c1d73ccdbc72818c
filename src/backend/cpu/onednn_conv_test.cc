// f32 convolutions on the CPU through oneDNN (backend/cpu/onednn_conv.h) with their
// epilogues as post-ops (backend/cpu/conv_epilogue.h): odd shapes and every post-op form,
// compiled fused and unfused with outputs poisoned, against the f64 reference interpreter
// on random inputs; and the groups said to run on oneDNN with the post-ops expected, or
// with the epilogue as a generated kernel where no post-op expresses it.
#include "backend/cpu/onednn_conv.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <functional>

#include "driver/driver.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct ConvCase {
  std::string name;
  std::function<Value(GraphBuilder&)> build;  // adds the graph's nodes, returns its output
  std::vector<std::string> expected;          // substrings of the conv groups' descriptions ("!s": s in none)
};

PoolParams Params(std::vector<int64_t> kernel, std::vector<int64_t> strides, std::vector<int64_t> pads,
                  std::vector<int64_t> dilations, int64_t group = 1) {
  return {std::move(kernel), std::move(strides), std::move(pads), std::move(dilations), group, false};
}

Value RandomConstant(GraphBuilder& b, Shape shape, uint64_t seed, double scale = 1) {
  return b.MulScalar(b.Constant(Tensor::Random(DType::kF32, std::move(shape), seed)), scale);
}

Value Conv(GraphBuilder& b, Value x, int64_t co, const PoolParams& p, bool bias, uint64_t seed) {
  const int64_t ci = b.shape(x)[1];
  Shape w = {co, ci / p.group};
  w.insert(w.end(), p.kernel.begin(), p.kernel.end());
  return b.Conv(x, RandomConstant(b, w, seed), bias ? RandomConstant(b, {co}, seed + 1) : Value{}, p);
}

Value Clip(GraphBuilder& b, Value x, double lo, double hi) {
  return b.Binary(OpCode::kMin, b.Binary(OpCode::kMax, x, b.Scalar(lo, DType::kF32)), b.Scalar(hi, DType::kF32));
}

Value HardSwish(GraphBuilder& b, Value x) { return b.Mul(x, Clip(b, b.AddScalar(b.MulScalar(x, 1.0 / 6), 0.5), 0, 1)); }

// Batch norm as exported and decomposed: (x - mean) / sqrt(var + eps) · gamma + beta, per channel.
Value BatchNorm(GraphBuilder& b, Value x, uint64_t seed) {
  const int64_t c = b.shape(x)[1];
  Shape per_channel = {c, 1, 1};
  Value mean = RandomConstant(b, per_channel, seed), gamma = RandomConstant(b, per_channel, seed + 1);
  Value beta = RandomConstant(b, per_channel, seed + 2);
  Value var = b.Unary(OpCode::kExp, RandomConstant(b, per_channel, seed + 3));
  Value norm = b.Div(b.Sub(x, mean), b.Unary(OpCode::kSqrt, b.AddScalar(var, 1e-5)));
  return b.Add(b.Mul(norm, gamma), beta);
}

std::vector<ConvCase> Cases() {
  auto input = [](GraphBuilder& b, Shape shape) { return b.Parameter("x", DType::kF32, std::move(shape)); };
  return {
      {"pointwise_1x1_relu",
       [&](GraphBuilder& b) { return b.Unary(OpCode::kRelu, Conv(b, input(b, {1, 16, 9, 9}), 8, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 1)); },
       {"post-ops: relu"}},
      {"stem_7x7_stride2_no_bias",
       [&](GraphBuilder& b) { return Conv(b, input(b, {2, 3, 23, 23}), 8, Params({7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}), false, 2); },
       {"oneDNN"}},
      {"asymmetric_pads_dilation_strides",
       [&](GraphBuilder& b) { return Conv(b, input(b, {1, 5, 13, 11}), 6, Params({3, 2}, {1, 2}, {0, 1, 2, 0}, {2, 1}), true, 3); },
       {"oneDNN"}},
      {"groups_relu6",
       [&](GraphBuilder& b) { return Clip(b, Conv(b, input(b, {1, 8, 10, 10}), 12, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4), true, 4), 0, 6); },
       {"clip(0, 6)"}},
      {"depthwise_stride2_hardswish",
       [&](GraphBuilder& b) { return HardSwish(b, Conv(b, input(b, {1, 16, 15, 15}), 16, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16), true, 5)); },
       {"hardswish"}},
      {"depthwise_multiplier2_5x5",
       [&](GraphBuilder& b) { return Conv(b, input(b, {1, 4, 12, 12}), 8, Params({5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 4), true, 6); },
       {"oneDNN"}},
      {"conv1d_dilated_sigmoid",
       [&](GraphBuilder& b) { return b.Unary(OpCode::kSigmoid, Conv(b, input(b, {2, 6, 17}), 4, Params({3}, {1}, {1, 2}, {2}), true, 7)); },
       {"sigmoid"}},
      {"hardsigmoid",
       [&](GraphBuilder& b) { return Clip(b, b.AddScalar(b.MulScalar(Conv(b, input(b, {1, 8, 6, 6}), 8, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 8), 0.2), 0.5), 0, 1); },
       {"clip(0, 1)"}},
      {"silu",
       [&](GraphBuilder& b) {
         Value c = Conv(b, input(b, {1, 8, 7, 7}), 8, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 9);
         return b.Mul(c, b.Unary(OpCode::kSigmoid, c));
       },
       {"swish"}},
      {"gelu_erf",
       [&](GraphBuilder& b) { return b.Gelu(Conv(b, input(b, {1, 8, 7, 7}), 8, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 10), false); },
       {"gelu_erf"}},
      // conv + BN + ReLU, conv + BN + residual + ReLU: the block of every ResNet.
      {"residual_block",
       [&](GraphBuilder& b) {
         Value x = input(b, {1, 8, 12, 12});
         PoolParams p = Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1});
         Value h = b.Unary(OpCode::kRelu, BatchNorm(b, Conv(b, x, 8, p, false, 11), 20));
         Value y = b.Add(BatchNorm(b, Conv(b, h, 8, p, false, 12), 30), x);
         return b.Unary(OpCode::kRelu, y);
       },
       {"scale/shift folded, relu", "scale/shift folded, add %", ", relu"}},
      // A value per spatial position is no post-op: the epilogue stays a generated kernel.
      {"positional_add_falls_back",
       [&](GraphBuilder& b) {
         Value c = Conv(b, input(b, {1, 4, 6, 6}), 4, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 13);
         return b.Unary(OpCode::kRelu, b.Add(c, RandomConstant(b, {1, 4, 6, 6}, 14)));
       },
       {"epilogue as a generated kernel"}},
      // Consecutive convolutions keep the blocked layout between them (no reorder out of the
      // first nor into the second).
      {"chain_conv_relu_conv",
       [&](GraphBuilder& b) {
         Value a = b.Unary(OpCode::kRelu, Conv(b, input(b, {1, 16, 10, 10}), 32, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 20));
         return Conv(b, a, 16, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 21);
       },
       {"relu, output kept blocked", "input kept blocked"}},
      // A bottleneck: the first convolution's output is read by the next one and added back
      // as the last one's residual (sum post-op), blocked on both paths.
      {"chain_bottleneck_residual",
       [&](GraphBuilder& b) {
         Value a = b.Unary(OpCode::kRelu, Conv(b, input(b, {1, 16, 9, 9}), 32, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 22));
         Value m = b.Unary(OpCode::kRelu, Conv(b, a, 16, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 23));
         return b.Unary(OpCode::kRelu, b.Add(Conv(b, m, 32, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 24), a));
       },
       {"residual kept blocked"}},
      // Channels that are no multiple of 16: chained only where oneDNN's layout is no larger
      // than the plain tensor (the value's buffer); the result the same either way.
      {"odd_channels_chain_or_not",
       [&](GraphBuilder& b) {
         Value a = b.Unary(OpCode::kRelu, Conv(b, input(b, {1, 8, 7, 7}), 20, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 25));
         return Conv(b, a, 8, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}), true, 26);
       },
       {"post-ops: relu"}},
      // A value read by a convolution and by a pointwise op stays NCHW.
      {"no_chain_other_reader",
       [&](GraphBuilder& b) {
         Value a = b.Unary(OpCode::kRelu, Conv(b, input(b, {1, 16, 8, 8}), 16, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}), true, 27));
         Value c = Conv(b, a, 16, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 28);
         return b.Add(c, b.Unary(OpCode::kExp, a));
       },
       {"oneDNN", "!output kept blocked"}},
      // Squeeze-excitation (MobileNetV3): a depthwise convolution's output read by a spatial
      // mean and by the product with the per-channel scale computed from it, which the next
      // convolution reads: the mean and the product on oneDNN on the blocked layout.
      {"squeeze_excitation_blocked",
       [&](GraphBuilder& b) {
         Value x = input(b, {1, 32, 9, 9});
         Value d = b.Unary(OpCode::kRelu, Conv(b, x, 32, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32), true, 40));
         Value m = b.Reduce(OpCode::kReduceMean, d, {2, 3}, true);
         Value f = b.Unary(OpCode::kRelu, Conv(b, m, 8, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 41));
         Value s = Clip(b, b.AddScalar(b.MulScalar(Conv(b, f, 32, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 42), 1.0 / 6), 0.5), 0, 1);
         return Conv(b, b.Mul(d, s), 16, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 43);
       },
       {"relu, output kept blocked", "oneDNN pooling", "output blocked for the next convolution", "input kept blocked"}},
      // The same with channels whose blocked layout is larger than the tensor: NCHW throughout.
      {"squeeze_excitation_odd_channels",
       [&](GraphBuilder& b) {
         Value x = input(b, {1, 24, 7, 7});
         Value d = Conv(b, x, 24, Params({3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 24), true, 44);
         Value m = b.Reduce(OpCode::kReduceMean, d, {2, 3}, true);
         Value s = b.Unary(OpCode::kSigmoid, Conv(b, m, 24, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 45));
         return Conv(b, b.Mul(s, d), 8, Params({1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}), true, 46);
       },
       {"oneDNN"}},
      // Weights that are an input: read at run time in the plain layout.
      {"runtime_weights",
       [&](GraphBuilder& b) {
         Value w = b.Parameter("w", DType::kF32, {6, 3, 3, 3});
         return b.Unary(OpCode::kRelu, b.Conv(input(b, {1, 3, 8, 8}), w, Value{}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1})));
       },
       {"post-ops: relu"}},
  };
}

class OnednnConvTest : public testing::TestWithParam<std::tuple<ConvCase, bool>> {};

void ExpectMatchesReference(const ConvCase& c, bool fuse) {
  GraphBuilder b;
  b.Output(c.build(b), "y");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  PassOptions passes;
  passes.library_conv = true;
  StatusOr<Graph> graph = RunGraphPasses(*built, passes);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.fuse = fuse;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  StatusOr<std::unique_ptr<CpuExecutable>> compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph->inputs().size(); ++i) {
    const Node& p = graph->node(graph->inputs()[i]);
    inputs.push_back(Tensor::Random(p.dtype, p.shape, 100 + i));
  }
  StatusOr<std::vector<Tensor>> expected = RunReference(*built, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  // Twice: the primitive holds no state between runs, and the second run keeps to the calling
  // thread (CpuExecutable::Run), on a primitive made for one thread.
  for (int run = 0; run < 2; ++run) {
    StatusOr<std::vector<Tensor>> actual = (*compiled)->Run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    Comparison cmp = CompareNormwise((*actual)[0], (*expected)[0], Tolerance{1e-4, 1e-5});
    EXPECT_TRUE(cmp.pass) << cmp.reason;
  }
  std::string libraries;
  for (const KernelInfo& k : (*compiled)->kernels()) {
    EXPECT_TRUE(k.generated) << k.name << ": " << k.why_not;
    libraries += k.library + "\n";
  }
  EXPECT_NE(libraries.find("oneDNN"), std::string::npos) << "no convolution ran on oneDNN";
  if (fuse) {
    for (const std::string& s : c.expected) {
      if (s.rfind("!", 0) == 0) EXPECT_EQ(libraries.find(s.substr(1)), std::string::npos) << "'" << s.substr(1) << "' in:\n" << libraries;
      else EXPECT_NE(libraries.find(s), std::string::npos) << "'" << s << "' not in:\n" << libraries;
    }
  }
}

TEST_P(OnednnConvTest, MatchesReference) {
  if (!OnednnConvAvailable()) GTEST_SKIP() << "built without oneDNN";
  const auto& [c, fuse] = GetParam();
  ExpectMatchesReference(c, fuse);
}

INSTANTIATE_TEST_SUITE_P(Cases, OnednnConvTest, testing::Combine(testing::ValuesIn(Cases()), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<ConvCase, bool>>& info) {
                           return std::get<0>(info.param).name + (std::get<1>(info.param) ? "_fused" : "_unfused");
                         });

// Made for a team of 16, oneDNN blocks this convolution's weights for 16 threads (Acdb16a where a
// team of 2 gets Acdb64a); the second run keeps to the calling thread, on a primitive made for
// one thread and held to those layouts (another implementation, jit instead of brgconv).
TEST(OnednnConvTeamTest, APrimitiveMadeForSixteenThreadsRunsAloneWithItsLayouts) {
  if (!OnednnConvAvailable()) GTEST_SKIP() << "built without oneDNN";
  const int before = omp_get_max_threads();
  omp_set_num_threads(16);
  ExpectMatchesReference({"vit_patch_8x8_stride8",
                          [](GraphBuilder& b) {
                            return Conv(b, b.Parameter("x", DType::kF32, {1, 3, 32, 32}), 64, Params({8, 8}, {8, 8}, {0, 0, 0, 0}, {1, 1}), true, 9);
                          },
                          {"oneDNN"}},
                         true);
  omp_set_num_threads(before);
}

// Without the library option every Conv is still rewritten into a window view and a matmul:
// the graph the CUDA backend compiles.
TEST(OnednnConvPassTest, DefaultPassesRewriteConv) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {1, 4, 6, 6});
  b.Output(b.Conv(x, b.Constant(Tensor::Random(DType::kF32, {4, 4, 3, 3}, 1)), Value{}, Params({3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1})), "y");
  StatusOr<Graph> built = b.Build();
  ASSERT_TRUE(built.ok());
  for (bool library : {false, true}) {
    PassOptions passes;
    passes.library_conv = library;
    StatusOr<Graph> graph = RunGraphPasses(*built, passes);
    ASSERT_TRUE(graph.ok());
    bool has_conv = false;
    for (const Node& n : graph->nodes()) has_conv = has_conv || n.op == OpCode::kConv;
    EXPECT_EQ(has_conv, library);
  }
}

}  // namespace
}  // namespace tilefuse

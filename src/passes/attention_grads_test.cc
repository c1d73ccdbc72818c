// Attention's gradients rewritten into primitives: the rewrite must compute what the ops
// compute (both run by the f64 reference interpreter, whose attention gradient kernel is
// checked against finite differences in reference/interpreter_attention_grads_test.cc), and
// the pipeline rewrites them unless the CUDA template's shapes ask to keep them.
#include "passes/attention_grads.h"

#include <gtest/gtest.h>

#include "passes/pass_test_util.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "testing/tensor_compare.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using pass_testing::CountOps;

struct AttentionCase {
  const char* name;
  int64_t batch, heads, kv_heads, queries, keys, d, dv;
  bool causal;
  DType dtype = DType::kF64;
  DType lse_dtype = DType::kF64;
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

const OpCode kGradOps[] = {OpCode::kAttentionGradQ, OpCode::kAttentionGradK, OpCode::kAttentionGradV};

int CountAttentionGrads(const Graph& graph) {
  int count = 0;
  for (OpCode op : kGradOps) count += CountOps(graph, op);
  return count;
}

// dout, q, k, v, out, logsumexp → dQ, dK, dV (named grad_q, grad_k, grad_v).
Graph BuildCase(const AttentionCase& c) {
  GraphBuilder b;
  Value dout = b.Parameter("dout", c.dtype, {c.batch, c.heads, c.queries, c.dv});
  Value q = b.Parameter("q", c.dtype, {c.batch, c.heads, c.queries, c.d});
  Value k = b.Parameter("k", c.dtype, {c.batch, c.kv_heads, c.keys, c.d});
  Value v = b.Parameter("v", c.dtype, {c.batch, c.kv_heads, c.keys, c.dv});
  Value out = b.Parameter("out", c.dtype, {c.batch, c.heads, c.queries, c.dv});
  Value lse = b.Parameter("logsumexp", c.lse_dtype, {c.batch, c.heads, c.queries});
  const char* names[] = {"grad_q", "grad_k", "grad_v"};
  for (int i = 0; i < 3; ++i) {
    b.SetLocation("", names[i]);
    b.Output(b.AttentionGrad(kGradOps[i], dout, q, k, v, out, lse, 0.6, c.causal), names[i]);
  }
  StatusOr<Graph> graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(graph).value();
}

// Uniform in [-1, 1) (never all zeros); logsumexp in [0.5, 1.5), about what the scores give.
std::vector<Tensor> RandomInputs(const Graph& graph, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int id : graph.inputs()) {
    const Node& p = graph.node(id);
    Tensor t = Tensor::Random(p.dtype, p.shape, seed++);
    if (p.name == "logsumexp")
      for (int64_t i = 0; i < t.num_elements(); ++i) t.SetDouble(i, 1.0 + 0.5 * t.GetDouble(i));
    inputs.push_back(t);
  }
  return inputs;
}

class AttentionGradsRewriteTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionGradsRewriteTest, MatchesTheOps) {
  const AttentionCase& c = GetParam();
  Graph original = BuildCase(c);
  StatusOr<Graph> rewritten = RewriteAttentionGrads(original);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountAttentionGrads(*rewritten), 0);
  EXPECT_GE(CountOps(*rewritten, OpCode::kMatMul), 3);

  std::vector<Tensor> inputs = RandomInputs(original, 3);
  auto expected = RunReference(original, inputs);
  auto actual = RunReference(*rewritten, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (int i = 0; i < 3; ++i) {
    const Graph::Output& output = rewritten->outputs()[i];
    EXPECT_EQ(rewritten->node(output.node).name, original.node(original.outputs()[i].node).name);
    // f64: the same sums in another order. Half types: the rewrite rounds every step to
    // f32 before the one rounding to the dtype the op does, so the two may round apart.
    Tolerance tol = c.dtype == DType::kF64 ? Tolerance{1e-12, 1e-12 * MaxFiniteMagnitude((*expected)[i])}
                                           : ToleranceFor(c.dtype);
    Comparison cmp = CompareTensors((*actual)[i], (*expected)[i], tol);
    EXPECT_TRUE(cmp.pass) << output.name << ": " << cmp.reason;
  }
}

const AttentionCase kCases[] = {
    {"plain", 2, 2, 2, 4, 4, 8, 8, false},
    {"causal_fewer_queries", 1, 2, 2, 3, 5, 8, 8, true},
    {"causal_more_queries", 1, 2, 2, 5, 3, 8, 8, true},
    {"grouped_query", 2, 4, 2, 4, 6, 8, 8, false},
    {"grouped_query_causal", 1, 4, 1, 6, 6, 4, 4, true},
    {"dv_differs_from_d", 1, 2, 2, 4, 5, 4, 6, true},
    {"bf16", 2, 4, 2, 5, 7, 16, 16, true, DType::kBF16, DType::kF32},
    {"f16_dv_differs", 1, 2, 1, 6, 4, 8, 12, false, DType::kF16, DType::kF32},
    {"f32_half_logsumexp", 1, 2, 2, 4, 4, 8, 8, true, DType::kF32, DType::kBF16},
};

INSTANTIATE_TEST_SUITE_P(Cases, AttentionGradsRewriteTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<AttentionCase>& info) { return std::string(info.param.name); });

TEST(AttentionGradsRewrite, KeepLeavesTheNodeInPlace) {
  Graph original = BuildCase({"", 1, 2, 2, 4, 4, 8, 8, true});
  auto keep_k = [](const Graph&, const Node& node) { return node.op == OpCode::kAttentionGradK; };
  StatusOr<Graph> rewritten = RewriteAttentionGrads(original, keep_k);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(CountOps(*rewritten, OpCode::kAttentionGradQ), 0);
  EXPECT_EQ(CountOps(*rewritten, OpCode::kAttentionGradK), 1);
  EXPECT_EQ(CountOps(*rewritten, OpCode::kAttentionGradV), 0);
  const Node& kept = rewritten->node(rewritten->outputs()[1].node);
  EXPECT_EQ(kept.op, OpCode::kAttentionGradK);
  EXPECT_EQ(kept.attrs.scale, 0.6);
  EXPECT_TRUE(kept.attrs.causal);
}

// The pipeline rewrites all three, and CSE merges the probabilities they each recompute.
TEST(AttentionGradsRewrite, PipelineRewritesAndMergesTheSharedParts) {
  StatusOr<Graph> result = RunGraphPasses(BuildCase({"", 1, 2, 2, 4, 4, 8, 8, true}), {});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(CountAttentionGrads(*result), 0);
  EXPECT_EQ(CountOps(*result, OpCode::kExp), 1);
}

// keep_attention_grads keeps what the CUDA template takes: bf16/f16, head dim 64 or 128, d == dv.
TEST(AttentionGradsRewrite, PipelineKeepsWhatTheAttentionBackwardTemplateTakes) {
  PassOptions options;
  options.keep_attention_grads = true;
  struct Expectation {
    AttentionCase c;
    int kept;
  };
  const Expectation expectations[] = {
      {{"bf16_d64", 1, 2, 2, 4, 4, 64, 64, true, DType::kBF16, DType::kF32}, 3},
      {{"f16_d128_gqa", 1, 4, 2, 4, 4, 128, 128, false, DType::kF16, DType::kF32}, 3},
      {{"f32_d64", 1, 2, 2, 4, 4, 64, 64, true, DType::kF32, DType::kF32}, 0},
      {{"bf16_d32", 1, 2, 2, 4, 4, 32, 32, true, DType::kBF16, DType::kF32}, 0},
      {{"bf16_dv_differs", 1, 2, 2, 4, 4, 64, 128, true, DType::kBF16, DType::kF32}, 0},
  };
  for (const Expectation& e : expectations) {
    StatusOr<Graph> result = RunGraphPasses(BuildCase(e.c), options);
    ASSERT_TRUE(result.ok()) << e.c.name << ": " << result.status().ToString();
    EXPECT_EQ(CountAttentionGrads(*result), e.kept) << e.c.name;
  }
}

}  // namespace
}  // namespace tilefuse

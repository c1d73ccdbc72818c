// The flash-attention kernel vs the f64 reference on random Q, K, V at odd sizes (query
// and key lengths not multiples of the 32 × 64 tiles, unequal head dims), causal and
// not, with additive masks, views on the operands, f32/f64/f16, kernel outputs poisoned.
// Each case first checks that the attention group really became a generated kernel.
#include "codegen/attention_lower.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "reference/interpreter.h"
#include "driver/driver.h"
#include "passes/pipeline.h"
#include "backend/cpu/cpu_executable.h"
#include "testing/tensor_compare.h"
#include "testing/random_inputs.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct AttentionCase {
  DType dtype = DType::kF32;
  int64_t batch = 2, heads = 3, nq = 37, nk = 83, d = 24, dv = 40;
  bool causal = false;
  double masked_value = -INFINITY;  // what the causal mask writes
  bool additive_mask = false;       // a [batch, 1, 1, nk] input added to the scores
  bool key_view = false;            // K as [batch, nk, heads*d], split into heads by views
  bool shared_keys = false;         // K and V as [batch, 1, nk, ..]: one head for all (multi-query)
  bool dropout = false;             // dropout on the probabilities: not a template shape
};

Graph BuildAttention(const AttentionCase& c) {
  GraphBuilder b;
  Value q = b.Parameter("q", c.dtype, {c.batch, c.heads, c.nq, c.d});
  Value k;
  if (c.key_view) {
    Value packed = b.Parameter("k", c.dtype, {c.batch, c.nk, c.heads * c.d});
    k = b.Transpose(b.Reshape(packed, {c.batch, c.nk, c.heads, c.d}), {0, 2, 1, 3});
  } else {
    k = b.Parameter("k", c.dtype, {c.batch, c.shared_keys ? 1 : c.heads, c.nk, c.d});
  }
  Value v = b.Parameter("v", c.dtype, {c.batch, c.shared_keys ? 1 : c.heads, c.nk, c.dv});
  Value scores = b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 1 / std::sqrt(static_cast<double>(c.d)));
  if (c.additive_mask) scores = b.Add(scores, b.Parameter("mask", c.dtype, {c.batch, 1, 1, c.nk}));
  if (c.causal) {
    Value row = b.Iota({c.nq, c.nk}, 0, DType::kI64), column = b.Iota({c.nq, c.nk}, 1, DType::kI64);
    scores = b.Where(b.Binary(OpCode::kGreaterEqual, row, column), scores, b.Scalar(c.masked_value, c.dtype));
  }
  Value probs = b.Softmax(scores, -1);
  if (c.dropout) {
    Value keep = b.Binary(OpCode::kGreaterEqual, b.RandomUniform(b.shape(probs), DType::kF32, 7), b.Scalar(0.25, DType::kF32));
    probs = b.Where(keep, b.MulScalar(probs, 1 / 0.75), b.Scalar(0, c.dtype));
  }
  b.Output(b.MatMul(probs, v), "out");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto passed = RunGraphPasses(std::move(graph).value(), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(passed).value();
}

// Fused, outputs poisoned.
StatusOr<std::unique_ptr<CpuExecutable>> CompileFused(const Graph& graph) {
  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string();
  return CompileForCpu(graph, options);
}

// Compiles fused, runs on random inputs and compares with the reference; returns the
// attention kernel's KernelInfo.
KernelInfo CompileRunAndCompare(const AttentionCase& c) {
  Graph graph = BuildAttention(c);
  auto compiled = CompileFused(graph);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return {};
  std::vector<Tensor> inputs = RandomInputs(graph, 500);
  auto expected = RunReference(graph, inputs);
  auto actual = (*compiled)->Run(inputs);
  EXPECT_TRUE(expected.ok() && actual.ok());
  if (!expected.ok() || !actual.ok()) return {};
  Tolerance tol{1e-4, 1e-5};
  if (c.dtype == DType::kF64) tol = {1e-9, 1e-12};
  if (c.dtype == DType::kF16) tol = {2e-2, 2e-2};
  Comparison cmp = CompareNormwise((*actual)[0], (*expected)[0], tol);
  EXPECT_TRUE(cmp.pass) << cmp.reason;
  KernelInfo attention;
  int attention_groups = 0;
  for (const KernelInfo& k : (*compiled)->kernels()) {
    if (k.kind != GroupKind::kAttention) continue;
    attention = k;
    ++attention_groups;
  }
  EXPECT_EQ(attention_groups, 1) << "the planner did not make one attention group";
  return attention;
}

void ExpectGenerated(const AttentionCase& c) {
  KernelInfo k = CompileRunAndCompare(c);
  EXPECT_TRUE(k.generated) << k.why_not;
  EXPECT_NE(k.source.find("running_max"), std::string::npos);
}

TEST(AttentionKernelTest, PlainAtOddSizes) { ExpectGenerated({}); }

TEST(AttentionKernelTest, CausalWithMinusInfinity) {
  AttentionCase c;
  c.nq = c.nk = 77;
  c.causal = true;
  ExpectGenerated(c);
}

TEST(AttentionKernelTest, CausalWithLargeNegativeFillAndMoreQueriesThanKeys) {
  AttentionCase c;
  c.nq = 70;
  c.nk = 65;  // one full key block and one of a single key
  c.causal = true;
  c.masked_value = -1e9;
  ExpectGenerated(c);
}

TEST(AttentionKernelTest, AdditiveMaskAndHeadsSplitByViews) {
  AttentionCase c;
  c.additive_mask = true;
  c.key_view = true;
  c.causal = true;
  c.nq = c.nk = 100;
  ExpectGenerated(c);
}

// Every head reads the same K and V (broadcast by the matmuls): the kernel packs them per
// operand batch, which several output batches share.
TEST(AttentionKernelTest, KeysAndValuesSharedByHeads) {
  AttentionCase c;
  c.shared_keys = true;
  c.heads = 5;
  c.nq = 100;
  c.causal = true;
  ExpectGenerated(c);
}

TEST(AttentionKernelTest, SingleKeyAndSingleQuery) {
  AttentionCase c;
  c.nq = 1;
  c.nk = 1;
  ExpectGenerated(c);
}

TEST(AttentionKernelTest, DoubleComputesInDouble) {
  AttentionCase c;
  c.dtype = DType::kF64;
  c.causal = true;
  c.additive_mask = true;
  c.nq = 45;
  c.nk = 130;
  KernelInfo k = CompileRunAndCompare(c);
  EXPECT_TRUE(k.generated) << k.why_not;
  EXPECT_NE(k.source.find("double running_max"), std::string::npos);
}

TEST(AttentionKernelTest, HalfLoadsAndStoresHalf) {
  AttentionCase c;
  c.dtype = DType::kF16;
  c.key_view = true;
  ExpectGenerated(c);
}

// A NaN in one query row makes that row NaN and no other; a NaN in one key makes every row
// of its (batch, head) NaN, as in the reference: the block max ignores NaN logits, their exp
// carries it into the sum and the output.
TEST(AttentionKernelTest, NaNLogitsMakeTheirRowsNaN) {
  const AttentionCase c;
  Graph graph = BuildAttention(c);
  auto compiled = CompileFused(graph);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  for (int poisoned_input : {0, 1}) {  // q, k
    std::vector<Tensor> inputs = RandomInputs(graph, 700);
    const Node& poisoned = graph.node(graph.inputs()[poisoned_input]);
    std::vector<double> values = inputs[poisoned_input].ToDoubles();
    values[values.size() / 2] = NAN;
    inputs[poisoned_input] = Tensor::FromDoubles(poisoned.dtype, poisoned.shape, values);
    auto expected = RunReference(graph, inputs);
    auto actual = (*compiled)->Run(inputs);
    ASSERT_TRUE(expected.ok() && actual.ok());
    const std::vector<double> e = (*expected)[0].ToDoubles(), a = (*actual)[0].ToDoubles();
    int64_t nan_outputs = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      ASSERT_EQ(std::isnan(a[i]), std::isnan(e[i])) << "input " << poisoned_input << " element " << i << ": " << a[i] << " vs " << e[i];
      nan_outputs += std::isnan(e[i]);
      if (!std::isnan(e[i])) ASSERT_NEAR(a[i], e[i], 1e-4 * (1 + std::abs(e[i]))) << "element " << i;
    }
    EXPECT_EQ(nan_outputs, poisoned_input == 0 ? c.dv : c.nq * c.dv) << "input " << poisoned_input;
  }
}

TEST(AttentionKernelTest, DropoutOnTheProbabilitiesFallsBackWithAReason) {
  AttentionCase c;
  c.dropout = true;
  KernelInfo k = CompileRunAndCompare(c);
  EXPECT_FALSE(k.generated);
  EXPECT_NE(k.why_not.find("softmax"), std::string::npos) << k.why_not;
}

}  // namespace
}  // namespace tilefuse

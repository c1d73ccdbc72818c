// The flash-attention kernel vs the f64 reference on random Q, K, V at odd sizes (query
// and key lengths not multiples of the 32 × 64 tiles, unequal head dims), causal and
// not, with additive masks, views on the operands, f32/f64/f16, kernel outputs poisoned,
// the safe softmax's where(isnan(p), 0, p) with fully masked rows. Each case first checks
// that the attention group really became a generated kernel (or, for forms the kernel does
// not take, that its parts did).
#include "codegen/attention_lower.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "codegen/attention_template.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
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
  int64_t masked_rows = 0;          // causal: row r keeps keys <= r - masked_rows (the first rows none)
  bool softmax_in_f32 = false;      // half types: the softmax computed in f32, cast back (as exporters do)
  // The softmax written out in f32 (f64 for f64) and the rows' logsumexp, max + log(sum) of its
  // own reductions, a second output (a training forward's, as tilefuse.fx writes it).
  bool logsumexp = false;
  bool key_view_is_output = false;  // key_view: the split heads also a graph output (a training forward saves them)
  // The safe softmax of torch.onnx's dynamo exporter between the softmax and P·V.
  enum class Guard { kNone, kIsNaN, kNotIsNaN, kIsNaNOfAnother } guard = Guard::kNone;
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
    if (c.masked_rows) row = b.Sub(row, b.Scalar(static_cast<double>(c.masked_rows), DType::kI64));
    scores = b.Where(b.Binary(OpCode::kGreaterEqual, row, column), scores, b.Scalar(c.masked_value, c.dtype));
  }
  Value probs = c.softmax_in_f32 ? b.Cast(b.Softmax(b.Cast(scores, DType::kF32), -1), c.dtype) : b.Softmax(scores, -1);
  Value logsumexp;
  if (c.logsumexp) {
    Value wide = c.dtype == DType::kF64 || c.dtype == DType::kF32 ? scores : b.Cast(scores, DType::kF32);
    Value max = b.Reduce(OpCode::kReduceMax, wide, {3}, /*keepdims=*/true);
    Value e = b.Unary(OpCode::kExp, b.Sub(wide, max));
    Value sum = b.Reduce(OpCode::kReduceSum, e, {3}, /*keepdims=*/true);
    probs = b.Div(e, sum);
    if (b.dtype(probs) != c.dtype) probs = b.Cast(probs, c.dtype);
    logsumexp = b.Add(max, b.Unary(OpCode::kLog, sum));
  }
  if (c.guard != AttentionCase::Guard::kNone) {
    Value zero = b.Scalar(0, c.dtype);
    Value tested = c.guard == AttentionCase::Guard::kIsNaNOfAnother ? b.MulScalar(probs, 2) : probs;
    Value nan = b.Unary(OpCode::kIsNaN, tested);
    probs = c.guard == AttentionCase::Guard::kNotIsNaN ? b.Where(b.Unary(OpCode::kNot, nan), probs, zero) : b.Where(nan, zero, probs);
  }
  if (c.dropout) {
    Value keep = b.Binary(OpCode::kGreaterEqual, b.RandomUniform(b.shape(probs), DType::kF32, 7), b.Scalar(0.25, DType::kF32));
    probs = b.Where(keep, b.MulScalar(probs, 1 / 0.75), b.Scalar(0, c.dtype));
  }
  b.Output(b.MatMul(probs, v), "out");
  if (c.logsumexp) b.Output(logsumexp, "lse");
  if (c.key_view_is_output) b.Output(k, "k_heads");
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
  if (IsHalf(c.dtype)) tol = {2e-2, 2e-2};
  EXPECT_EQ(actual->size(), expected->size());
  for (size_t i = 0; i < std::min(actual->size(), expected->size()); ++i) {
    // The logsumexp is f32 (f64) whatever the operands' type: the graph's rounded scores (the
    // kernel's are not) are its only error in half precision, 2^-11 (f16) or 2^-8 (bf16) of a score.
    const Tolerance lse = c.dtype == DType::kF32 ? Tolerance{1e-5, 1e-6}
                          : c.dtype == DType::kBF16 ? Tolerance{1e-2, 1e-4} : Tolerance{2e-3, 1e-5};
    Comparison cmp = CompareNormwise((*actual)[i], (*expected)[i], i == 0 || c.dtype == DType::kF64 ? tol : lse);
    EXPECT_TRUE(cmp.pass) << "output " << i << ": " << cmp.reason;
  }
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

// Forms the flash kernel does not take are planned again as their parts, every one a
// generated kernel, the reason in the plan notes (never the reference kernels).
void ExpectSplitIntoGeneratedParts(const AttentionCase& c, const std::string& reason) {
  Graph graph = BuildAttention(c);
  auto compiled = CompileFused(graph);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  for (const KernelInfo& k : (*compiled)->kernels()) {
    EXPECT_NE(k.kind, GroupKind::kAttention) << k.name;
    EXPECT_TRUE(k.generated) << k.name << ": " << k.why_not;
  }
  ASSERT_EQ((*compiled)->plan_notes().size(), 1u);
  EXPECT_NE((*compiled)->plan_notes()[0].find(reason), std::string::npos) << (*compiled)->plan_notes()[0];
  EXPECT_EQ((*compiled)->plan().missed_attention.back(), (*compiled)->plan_notes()[0]);
  if (c.dropout) return;  // random bits: the reference draws its own
  std::vector<Tensor> inputs = RandomInputs(graph, 500);
  auto expected = RunReference(graph, inputs);
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(expected.ok() && actual.ok());
  Comparison cmp = CompareNormwise((*actual)[0], (*expected)[0], Tolerance{1e-4, 1e-5});
  EXPECT_TRUE(cmp.pass) << cmp.reason;
}

TEST(AttentionKernelTest, DropoutOnTheProbabilitiesIsSplitWithAReason) {
  AttentionCase c;
  c.dropout = true;
  ExpectSplitIntoGeneratedParts(c, "softmax");
}

// torch.onnx's dynamo exporter guards SDPA's softmax with where(isnan(p), 0, p): rows whose
// every key is masked (-inf) give 0, as the reference computes them (softmax NaN, then the
// where). The flash kernel takes the guard: those rows are 0, the others as without it.
std::vector<double> RunSafeSoftmax(const AttentionCase& c, int64_t nan_in_q_row = -1) {
  Graph graph = BuildAttention(c);
  auto compiled = CompileFused(graph);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  if (!compiled.ok()) return {};
  int attention = 0;
  for (const KernelInfo& k : (*compiled)->kernels()) {
    EXPECT_TRUE(k.generated) << k.name << ": " << k.why_not;
    if (k.kind != GroupKind::kAttention) continue;
    ++attention;
    EXPECT_NE(k.source.find("running_sum[r] > 0 ?"), std::string::npos);
  }
  EXPECT_EQ(attention, 1);
  std::vector<Tensor> inputs = RandomInputs(graph, 600);
  if (nan_in_q_row >= 0) {  // batch 0, head 0, that row
    std::vector<double> q = inputs[0].ToDoubles();
    q[nan_in_q_row * c.d] = NAN;
    inputs[0] = Tensor::FromDoubles(inputs[0].dtype(), inputs[0].shape(), q);
  }
  auto expected = RunReference(graph, inputs);
  auto actual = (*compiled)->Run(inputs);
  EXPECT_TRUE(expected.ok() && actual.ok());
  if (!expected.ok() || !actual.ok()) return {};
  Tolerance tol = c.dtype == DType::kF16 ? Tolerance{2e-2, 2e-2} : Tolerance{1e-4, 1e-5};
  Comparison cmp = CompareNormwise((*actual)[0], (*expected)[0], tol);
  EXPECT_TRUE(cmp.pass) << cmp.reason;
  return (*actual)[0].ToDoubles();
}

// How many leading rows of each (batch, head) of `out` are all 0, at least (the smallest).
int64_t ZeroRows(const std::vector<double>& out, const AttentionCase& c) {
  int64_t fewest = c.nq;
  for (int64_t head = 0; head < c.batch * c.heads; ++head) {
    int64_t rows = 0;
    while (rows < c.nq && std::all_of(out.begin() + (head * c.nq + rows) * c.dv, out.begin() + (head * c.nq + rows + 1) * c.dv,
                                      [](double x) { return x == 0; }))
      ++rows;
    fewest = std::min(fewest, rows);
  }
  return fewest;
}

TEST(AttentionKernelTest, SafeSoftmaxGivesZeroForFullyMaskedRows) {
  AttentionCase c;
  c.causal = true;
  c.masked_rows = 40;  // past the first query block (32 rows): whole blocks and a part of one
  c.nq = 77;
  c.nk = 150;
  c.guard = AttentionCase::Guard::kIsNaN;
  std::vector<double> out = RunSafeSoftmax(c);
  EXPECT_EQ(ZeroRows(out, c), 40);
}

TEST(AttentionKernelTest, SafeSoftmaxAsNotIsNaNWithCastsInHalf) {
  AttentionCase c;
  c.dtype = DType::kF16;
  c.causal = true;
  c.masked_rows = 70;
  c.nq = 100;
  c.nk = 100;
  c.softmax_in_f32 = true;
  c.guard = AttentionCase::Guard::kNotIsNaN;
  std::vector<double> out = RunSafeSoftmax(c);
  EXPECT_EQ(ZeroRows(out, c), 70);
}

// Under the guard a NaN logit makes its row's probabilities NaN, then 0: the row is 0.
TEST(AttentionKernelTest, SafeSoftmaxZeroesRowsWithNaNLogits) {
  AttentionCase c;
  c.guard = AttentionCase::Guard::kIsNaN;
  std::vector<double> out = RunSafeSoftmax(c, /*nan_in_q_row=*/0);
  EXPECT_EQ(ZeroRows(out, c), 0);  // other heads' first rows are not 0
  EXPECT_TRUE(std::all_of(out.begin(), out.begin() + c.dv, [](double x) { return x == 0; }));
}

// A where that tests another value for NaN than the one it keeps is no safe softmax.
TEST(AttentionKernelTest, GuardTestingAnotherValueIsSplitWithAReason) {
  AttentionCase c;
  c.guard = AttentionCase::Guard::kIsNaNOfAnother;
  ExpectSplitIntoGeneratedParts(c, "is NaN");
}

// The GPU template takes the safe softmax too: its skeleton writes zeros for a row whose sum
// of probabilities is not positive (kZeroNanRows), as the CPU kernel does.
// The rows' logsumexp beside the output (a training forward's): one kernel writes both, at
// odd sizes, causal or not, with heads shared (the scores per query head all the same).
TEST(AttentionKernelTest, LogSumExpOfTheRowsIsASecondOutput) {
  AttentionCase c;
  c.logsumexp = true;
  ExpectGenerated(c);
  c.causal = true;
  c.shared_keys = true;
  ExpectGenerated(c);
}

TEST(AttentionKernelTest, LogSumExpInHalfAndDouble) {
  for (DType dtype : {DType::kF16, DType::kF64}) {
    AttentionCase c;
    c.dtype = dtype;
    c.causal = true;
    c.logsumexp = true;
    ExpectGenerated(c);
  }
}

// What the GPU template takes: the logsumexp buffer f32, an output of the group; K's heads,
// split from its rows by views, also a graph output (a training forward saves them for the
// backward): the template reads K where that output is stored, the views are not its members.
TEST(AttentionKernelTest, GpuTemplateWritesTheLogSumExp) {
  AttentionCase c;
  c.dtype = DType::kBF16;
  c.nq = c.nk = 128;
  c.d = c.dv = 64;
  c.causal = true;
  c.logsumexp = true;
  c.key_view = c.key_view_is_output = true;
  ExpectGenerated(c);
  Graph graph = BuildAttention(c);
  auto plan = PlanFusion(graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<bool> inlined = FindInlinedGenerators(graph);
  int attention = 0;
  for (const FusionGroup& group : plan->groups) {
    if (group.kind != GroupKind::kAttention) continue;
    ++attention;
    EXPECT_EQ(group.outputs.size(), 2u);
    auto templ = LowerAttentionTemplate(graph, group, inlined);
    ASSERT_TRUE(templ.ok()) << templ.status().ToString();
    ASSERT_GE(templ->logsumexp, 0);
    EXPECT_EQ(templ->buffers[templ->logsumexp].node, graph.outputs()[1].node);
    EXPECT_EQ(templ->k.node, graph.outputs()[2].node);
    EXPECT_EQ(templ->buffers[templ->logsumexp].elements, 2 * 3 * 128);
  }
  EXPECT_EQ(attention, 1);
}

TEST(AttentionKernelTest, GpuTemplateTakesTheSafeSoftmax) {
  AttentionCase c;
  c.dtype = DType::kBF16;
  c.nq = c.nk = 128;
  c.d = c.dv = 64;
  c.guard = AttentionCase::Guard::kIsNaN;
  Graph graph = BuildAttention(c);
  auto plan = PlanFusion(graph, PlannerOptions{});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<bool> inlined = FindInlinedGenerators(graph);
  int attention = 0;
  for (const FusionGroup& group : plan->groups) {
    if (group.kind != GroupKind::kAttention) continue;
    ++attention;
    ASSERT_TRUE(LowerAttention(graph, group, inlined).ok());
    auto templ = LowerAttentionTemplate(graph, group, inlined);
    ASSERT_TRUE(templ.ok()) << templ.status().ToString();
    EXPECT_TRUE(templ->zero_nan_rows);
  }
  EXPECT_EQ(attention, 1);
}

}  // namespace
}  // namespace tilefuse

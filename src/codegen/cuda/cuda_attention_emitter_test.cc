// The attention template on the CPU side: which attention groups it takes (and why not),
// how it reads Q, Kᵀ and V through views (strides, offsets, GQA head division), the kernel
// it prints and the launch it asks for. Running the kernels needs a GPU:
// scripts/gpu-check.sh (tests/attention); CudaProgramTest compiles them for sm_90a.
#include "codegen/cuda/cuda_attention_emitter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "fusion/group_classifier.h"
#include "testing/file_check.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

StatusOr<AttentionTemplateKernel> LowerText(const PlannedText& p) {
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kAttention) return LowerAttentionTemplate(p.graph, group, FindInlinedGenerators(p.graph));
  ADD_FAILURE() << "no attention group";
  return Internal("no attention group");
}

const char* kPlain =
    "  c = Constant <value = float {0.125}> ()\n  scale = Cast <to = 16> (c)\n  k_t = Transpose <perm = [0, 1, 3, 2]> (k)\n"
    "  s = MatMul (q, k_t)\n  scaled = Mul (s, scale)\n  p = Softmax <axis = -1> (scaled)\n  out = MatMul (p, v)\n";

StatusOr<AttentionTemplateKernel> LowerText(const std::string& body, const std::string& signature) {
  return LowerText(PlanOnnxText(signature, body));
}

// kPlain over 1100 tokens (nine 128-row query blocks) under a causal mask, as exports write it.
PlannedText CausalPlan() {
  return PlanOnnxText(
      "g (bfloat16[1,2,1100,64] q, bfloat16[1,2,1100,64] k, bfloat16[1,2,1100,64] v) => (bfloat16[1,2,1100,64] out)",
      "  mask_shape = Constant <value = int64[2] {1100, 1100}> ()\n  ones = ConstantOfShape <value = float[1] {1.0}> (mask_shape)\n"
      "  lower = Trilu <upper = 0> (ones)\n  zero = Constant <value = float {0.0}> ()\n  future = Equal (lower, zero)\n"
      "  big = Constant <value = float {-1e9}> ()\n  neg_big = Cast <to = 16> (big)\n" + std::string(kPlain).substr(0, std::string(kPlain).find("  p = ")) +
          "  masked = Where (future, neg_big, scaled)\n  p = Softmax <axis = -1> (masked)\n  out = MatMul (p, v)\n");
}

TEST(CudaAttentionEmitterTest, RaggedHeadsAreViewsOfTheInputsAndTheLastKeyBlockIsMasked) {
  auto a = LowerText(kPlain, "g (bfloat16[2,4,200,64] q, bfloat16[2,4,200,64] k, bfloat16[2,4,200,64] v) => (bfloat16[2,4,200,64] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->nq, 200);
  EXPECT_EQ(a->nk, 200);
  EXPECT_EQ(a->d, 64);
  // Kᵀ is the transpose of k: its rows (the head dim) are contiguous, a K-major operand.
  EXPECT_TRUE(a->k.RowsContiguous());
  EXPECT_EQ(a->k.column_stride, 64);
  EXPECT_FALSE(a->v.RowsContiguous());
  EXPECT_EQ(a->v.row_stride, 64);
  ASSERT_EQ(a->q.batch.size(), 2u);
  a->name = "att";
  CudaAttentionConfig serial;
  serial.loop = AttentionLoop::kSerial;
  auto source = EmitCudaAttention(*a, serial);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.grid[0], 2 * 4 * 2);  // two 128-row query blocks per head
  EXPECT_EQ(source->launch.block[0], 384);
  ASSERT_EQ(source->launch.args.size(), 4u);  // Q, K, V maps and the output
  EXPECT_EQ(source->launch.args[0].map.box[1], 128);
  EXPECT_EQ(source->launch.args[1].map.dims[0], 64);   // Kᵀ's contiguous dim: the head dim
  EXPECT_EQ(source->launch.args[1].map.dims[1], 200);  // then the keys (TMA zero-fills past them)
  EXPECT_EQ(source->includes, std::vector<std::string>{"attention_fwd_sm90.cuh"});
  // The kernel is the skeleton's Config, its hooks and one call. The logit is the score
  // times 0.125: folded into the softmax's multiplier, 0.125 · log2 e, with no program per
  // score (the skeleton masks the keys past 200 itself).
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __launch_bounds__(384, 1) att(const __grid_constant__ tf::TensorMap map_q,
    CHECK-SAME: uint16_t* __restrict__ b3) {
    CHECK-NEXT: tf::tf_await_prior_grid();
    CHECK-NEXT: struct Config {
    CHECK-NEXT: using Element = tf::Bf16;
    CHECK-NEXT: using Index = int;
    CHECK-NEXT: enum : int { kBM = 128, kBN = 128, kD = 64, kDV = 64, kStages = 3, kConsumers = 2, kTiles = 1, kQSlots = 1 };
    CHECK-NEXT: enum : int { kWholeKeyBlocks = 0, kKMnMajor = 0, kVMnMajor = 1 };
    CHECK-NEXT: enum : int { kOverlap = 0, kPingPong = 0, kPolyExpEvery = 0, kZeroNanRows = 0 };
    CHECK-NEXT: enum : int { kSkipsKeyBlocks = 0, kInterior = tf::kNoInterior };
    CHECK-NEXT: enum : int { kProducerRegisters = 24, kConsumerRegisters = 240 };
    CHECK-NEXT: LazyMargin() { return -1.0f; }
    CHECK-NEXT: OutputScale() { return 1.000000000e+00f; }
    CHECK: struct Batch {
    CHECK: const int o0 = batch / 4 % 2;
    CHECK-NEXT: const int o1 = batch / 1 % 4;
    CHECK-NEXT: return {{o0, o1, 0}, {o0, o1, 0}, {o0, o1, 0}};
    CHECK: LogitsEntry(int batch) const { return (Config::Index)(batch); }
    CHECK: struct Logits {
    CHECK-NEXT: enum : int { kScoreTimesMultiplier = 1 };
    CHECK-NEXT: Multiplier() { return 1.803368777e-01f; }
    CHECK-NEXT: };
    CHECK-NOT: score
    CHECK-NEXT: tf::AttentionFwdSm90<Config>({&map_q, &map_k, &map_v}, tf::AttentionBlockTables{nullptr, nullptr, nullptr, nullptr, nullptr}, tf::AttentionLengths{(int)200, (int)200, 0, 0}, Batch{}, Logits{}, tf::NoLogits{}, b3, nullptr);
  )"));
}

TEST(CudaAttentionEmitterTest, FusedQkvSlicesBecomeOffsetsAndStrides) {
  auto a = LowerText(
      "  q0 = Constant <value = int64[1] {0}> ()\n  k0 = Constant <value = int64[1] {256}> ()\n"
      "  v0 = Constant <value = int64[1] {512}> ()\n  v1 = Constant <value = int64[1] {768}> ()\n"
      "  axis = Constant <value = int64[1] {2}> ()\n  heads = Constant <value = int64[4] {2, 150, 4, 64}> ()\n"
      "  c = Constant <value = float {0.125}> ()\n  scale = Cast <to = 16> (c)\n"
      "  qf = Slice (qkv, q0, k0, axis)\n  kf = Slice (qkv, k0, v0, axis)\n  vf = Slice (qkv, v0, v1, axis)\n"
      "  q4 = Reshape (qf, heads)\n  k4 = Reshape (kf, heads)\n  v4 = Reshape (vf, heads)\n"
      "  q = Transpose <perm = [0, 2, 1, 3]> (q4)\n  k_t = Transpose <perm = [0, 2, 3, 1]> (k4)\n"
      "  v = Transpose <perm = [0, 2, 1, 3]> (v4)\n  s = MatMul (q, k_t)\n  scaled = Mul (s, scale)\n"
      "  p = Softmax <axis = -1> (scaled)\n  out = MatMul (p, v)\n",
      "g (bfloat16[2,150,768] qkv) => (bfloat16[2,4,150,64] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->q.node, a->k.node);  // all three read the projection itself
  EXPECT_EQ(a->q.offset, 0);
  EXPECT_EQ(a->k.offset, 256);
  EXPECT_EQ(a->v.offset, 512);
  EXPECT_EQ(a->q.row_stride, 768);   // a token's row of the projection
  EXPECT_EQ(a->k.column_stride, 768);
  ASSERT_EQ(a->q.batch.size(), 2u);
  for (const StridedOperand::BatchTerm& t : a->q.batch) EXPECT_EQ(t.stride, t.dim == 0 ? 150 * 768 : 64);
  a->name = "att";
  auto source = EmitCudaAttention(*a);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.args[1].map.offset_bytes, 512);
  EXPECT_EQ(source->launch.args[2].map.offset_bytes, 1024);
  EXPECT_EQ(source->launch.args[0].map.strides_bytes[0], 768 * 2);
}

TEST(CudaAttentionEmitterTest, GroupedQueryHeadsReadTheirSharedKvHeadThroughTheExpand) {
  auto a = LowerText(
      "  axis = Constant <value = int64[1] {2}> ()\n  e = Constant <value = int64[5] {1, 2, 4, 130, 64}> ()\n"
      "  heads = Constant <value = int64[4] {1, 8, 130, 64}> ()\n  c = Constant <value = float {0.125}> ()\n"
      "  scale = Cast <to = 16> (c)\n  k5 = Unsqueeze (k, axis)\n  v5 = Unsqueeze (v, axis)\n  ke = Expand (k5, e)\n"
      "  ve = Expand (v5, e)\n  ka = Reshape (ke, heads)\n  va = Reshape (ve, heads)\n  k_t = Transpose <perm = [0, 1, 3, 2]> (ka)\n"
      "  s = MatMul (q, k_t)\n  scaled = Mul (s, scale)\n  p = Softmax <axis = -1> (scaled)\n  out = MatMul (p, va)\n",
      "g (bfloat16[1,8,130,64] q, bfloat16[1,2,130,64] k, bfloat16[1,2,130,64] v) => (bfloat16[1,8,130,64] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // K and V are the [1, 2, 130, 64] inputs themselves: query head h reads K/V head h / 4.
  ASSERT_EQ(a->k.batch.size(), 1u);
  EXPECT_EQ(a->k.batch[0].dim, 1);
  EXPECT_EQ(a->k.batch[0].divisor, 4);
  EXPECT_EQ(a->k.batch[0].extent, 2);
  EXPECT_EQ(a->k.batch[0].stride, 130 * 64);
  ASSERT_EQ(a->v.batch.size(), 1u);
  EXPECT_EQ(a->v.batch[0].divisor, 4);
  a->name = "att";
  auto source = EmitCudaAttention(*a);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("return {{o1, 0, 0}, {o1 / 4, 0, 0}, {o1 / 4, 0, 0}};"), std::string::npos) << source->function;
}

TEST(CudaAttentionEmitterTest, ScalarScalesOnQAndKFoldIntoTheScore) {
  // torch.export's SDPA: sqrt(scale) on Q and on Kᵀ. Both are read in place; the score is
  // scaled by their product (bf16 0.296875², as the graph rounds the constant).
  auto a = LowerText(
      "  c = Constant <value = float {0.29730177875068026}> ()\n  root = Cast <to = 16> (c)\n  qs = Mul (q, root)\n"
      "  k_t = Transpose <perm = [0, 1, 3, 2]> (k)\n  ks = Mul (k_t, root)\n  s = MatMul (qs, ks)\n"
      "  p = Softmax <axis = -1> (s)\n  out = MatMul (p, v)\n",
      "g (bfloat16[1,2,160,128] q, bfloat16[1,2,160,128] k, bfloat16[1,2,160,128] v) => (bfloat16[1,2,160,128] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_DOUBLE_EQ(a->score_scale, 0.296875 * 0.296875);
  EXPECT_EQ(a->output_scale, 1);
  EXPECT_TRUE(a->k.RowsContiguous());  // k itself, through the transpose
  a->name = "att";
  auto source = EmitCudaAttention(*a);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  // The logit is the score itself: the scales and log2 e become the exponent's multiplier,
  // 0.296875² · 1.4426950 (no multiply per score).
  EXPECT_NE(source->function.find("Multiplier() { return 1.271515936e-01f; }"), std::string::npos) << source->function;
  EXPECT_EQ(source->function.find("score *"), std::string::npos) << source->function;
  // Lazy rescaling (by default wherever a CTA has two consumers, and at head dims above 64).
  EXPECT_NE(source->function.find("LazyMargin() { return 8.0f; }"), std::string::npos) << source->function;
}

// torch.onnx's dynamo exporter guards SDPA's softmax with where(isnan(p), 0, p): the
// template's Config asks the skeleton to write zeros for rows without probabilities (every
// key masked), and an unguarded attention does not ask it.
TEST(CudaAttentionEmitterTest, TheSafeSoftmaxZeroesRowsWithoutProbabilities) {
  const std::string signature = "g (bfloat16[1,2,256,64] q, bfloat16[1,2,256,64] k, bfloat16[1,2,256,64] v) => (bfloat16[1,2,256,64] out)";
  const std::string softmax = std::string(kPlain).substr(0, std::string(kPlain).find("  out = "));
  auto guarded = LowerText(softmax + "  nan = IsNaN (p)\n  zero_f = Constant <value = float {0.0}> ()\n  zero = Cast <to = 16> (zero_f)\n"
                                     "  safe = Where (nan, zero, p)\n  out = MatMul (safe, v)\n",
                           signature);
  ASSERT_TRUE(guarded.ok()) << guarded.status().ToString();
  EXPECT_TRUE(guarded->zero_nan_rows);
  guarded->name = "att";
  auto source = EmitCudaAttention(*guarded);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("kZeroNanRows = 1 }"), std::string::npos) << source->function;
  EXPECT_NE(source->strategy.find("rows without probabilities zeroed"), std::string::npos) << source->strategy;
  auto plain = LowerText(kPlain, signature);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->zero_nan_rows);
  plain->name = "att";
  auto plain_source = EmitCudaAttention(*plain);
  ASSERT_TRUE(plain_source.ok());
  EXPECT_NE(plain_source->function.find("kZeroNanRows = 0 }"), std::string::npos);
}

// A training forward's attention also returns each row's logsumexp (the softmax in f32, and
// max + log(sum) of its reductions): the kernel gets the f32 buffer and writes it.
TEST(CudaAttentionEmitterTest, TheRowsLogSumExpIsASecondOutput) {
  const std::string signature =
      "g (bfloat16[1,2,256,64] q, bfloat16[1,2,256,64] k, bfloat16[1,2,256,64] v) => (bfloat16[1,2,256,64] out, float[1,2,256,1] lse)";
  const std::string scores = std::string(kPlain).substr(0, std::string(kPlain).find("  p = "));
  auto a = LowerText(scores + "  wide = Cast <to = 1> (scaled)\n  m = ReduceMax <axes = [-1], keepdims = 1> (wide)\n"
                              "  shifted = Sub (wide, m)\n  e = Exp (shifted)\n  axes = Constant <value = int64[1] {-1}> ()\n"
                              "  total = ReduceSum <keepdims = 1> (e, axes)\n  pw = Div (e, total)\n  p = Cast <to = 16> (pw)\n"
                              "  out = MatMul (p, v)\n  log_total = Log (total)\n  lse = Add (m, log_total)\n",
                     signature);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_GE(a->logsumexp, 0);
  EXPECT_EQ(a->buffers[a->logsumexp].dtype, DType::kF32);
  EXPECT_EQ(a->buffers[a->logsumexp].elements, 2 * 256);
  a->name = "att";
  auto source = EmitCudaAttention(*a);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string lse = fmt::format("b{}", a->logsumexp);
  EXPECT_NE(source->function.find("float* __restrict__ " + lse + ")"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find(fmt::format("b{}, {});", a->output, lse)), std::string::npos) << source->function;
  EXPECT_NE(source->strategy.find("the rows' logsumexp written"), std::string::npos) << source->strategy;
  EXPECT_EQ(source->launch.args.size(), 5u);  // Q, K and V maps, the output and the logsumexp
}

// A decode step's attention (one query row a head) takes the decode form, a CTA per row; over
// a long cache it splits the keys so that the CTAs fill the GPU, its ranges' partials in the
// scratch memory after the counters. A query block of 128 rows keeps the tiled kernel.
TEST(CudaAttentionEmitterTest, OneQueryRowTakesTheDecodeFormSplitOverLongCaches) {
  for (auto [keys, split] : {std::pair<int, int>{200, 1}, {4000, 16}}) {
    SCOPED_TRACE(fmt::format("{} keys", keys));
    auto a = LowerText(kPlain, fmt::format("g (bfloat16[1,12,1,64] q, bfloat16[1,12,{0},64] k, bfloat16[1,12,{0},64] v) => "
                                           "(bfloat16[1,12,1,64] out)",
                                           keys));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_TRUE(UsesDecodeForm(*a));
    a->name = "att";
    auto source = EmitCudaDecodeAttention(*a);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    // The CTA's keys and values prefetched to L2, then the wait for the grid ahead, then the work.
    const size_t prefetch = source->function.find("tf::AttentionDecodePrefetch<Config>(k, v, operands");
    const size_t await = source->function.find("tf::tf_await_prior_grid();");
    ASSERT_NE(prefetch, std::string::npos) << source->function;
    EXPECT_LT(prefetch, await) << source->function;
    EXPECT_LT(await, source->function.find("tf::AttentionDecode<Config>")) << source->function;
    EXPECT_EQ(source->function.find("tf::tf_await_prior_grid();", await + 1), std::string::npos) << "one wait:\n" << source->function;
    CudaAttentionConfig without_prefetch;
    without_prefetch.decode_prefetch = false;
    auto plain = EmitCudaDecodeAttention(*a, without_prefetch);
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    EXPECT_EQ(plain->function.find("Prefetch"), std::string::npos) << plain->function;
    EXPECT_NE(plain->function.find("tf::AttentionDecode<Config>"), std::string::npos) << plain->function;
    EXPECT_NE(plain->function.find("tf::tf_await_prior_grid();"), std::string::npos) << plain->function;
    EXPECT_EQ(source->launch.grid[0], 12 * split);
    EXPECT_EQ(source->launch.block[0], 256);
    EXPECT_NE(source->function.find(fmt::format("kSplit = {}", split > 1 ? 1 : 0)), std::string::npos) << source->function;
    if (split > 1) {
      EXPECT_NE(source->strategy.find("split over the keys x16"), std::string::npos) << source->strategy;
      EXPECT_EQ(source->launch.scratch_bytes, kScratchCounterBytes + 12 * split * (2 + 64) * 4);
    } else {
      EXPECT_EQ(source->launch.scratch_bytes, 0);
    }
  }
  auto tiled = LowerText(kPlain, "g (bfloat16[1,12,128,64] q, bfloat16[1,12,200,64] k, bfloat16[1,12,200,64] v) => (bfloat16[1,12,128,64] out)");
  ASSERT_TRUE(tiled.ok()) << tiled.status().ToString();
  EXPECT_FALSE(UsesDecodeForm(*tiled));
}

// The decode form reads V's rows 16 bytes a lane, a few keys at a time, where a row is
// contiguous and splits evenly over a warp's lanes (64 columns: 8 lanes a row; 128: 16). A V
// whose columns are strided (an input stored transposed) keeps a column pair a lane, read key
// by key.
TEST(CudaAttentionEmitterTest, TheDecodeFormReadsValueRowsInVectorsWhereTheyAreContiguous) {
  const std::string transposed_v = std::string(kPlain).substr(0, std::string(kPlain).find("  out = ")) +
                                   "  v = Transpose <perm = [0, 1, 3, 2]> (v_stored)\n  out = MatMul (p, v)\n";
  struct Case {
    int dv;
    bool stored_transposed, vectors;
  };
  for (const Case& c : {Case{64, false, true}, Case{128, false, true}, Case{64, true, false}}) {
    SCOPED_TRACE(fmt::format("dv {}{}", c.dv, c.stored_transposed ? ", V stored transposed" : ""));
    const std::string v = c.stored_transposed ? fmt::format("bfloat16[1,12,{},304] v_stored", c.dv) : fmt::format("bfloat16[1,12,304,{}] v", c.dv);
    auto a = LowerText(c.stored_transposed ? transposed_v : kPlain,
                       fmt::format("g (bfloat16[1,12,1,{0}] q, bfloat16[1,12,304,{0}] k, {1}) => (bfloat16[1,12,1,{0}] out)", c.dv, v));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    a->name = "att";
    auto source = EmitCudaDecodeAttention(*a);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_NE(source->function.find(fmt::format("kVColumnsContiguous = {}", c.vectors ? 1 : 0)), std::string::npos) << source->function;
    EXPECT_EQ(source->strategy.find("values too") != std::string::npos, c.vectors) << source->strategy;
  }
}

// The default loop: FlashAttention-3's, the consumers taking turns at the tensor cores.
TEST(CudaAttentionEmitterTest, ConsumersTakeTurnsIssuingTheirMatmuls) {
  auto a = LowerText(kPlain, "g (bfloat16[2,4,256,64] q, bfloat16[2,4,256,64] k, bfloat16[2,4,256,64] v) => (bfloat16[2,4,256,64] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  a->name = "att";
  CudaAttentionConfig two;  // (head dim 64 without a mask would take three consumers)
  two.consumers = 2;
  auto source = EmitCudaAttention(*a, two);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->strategy.find("ping-pong consumers"), std::string::npos) << source->strategy;
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: enum : int { kBM = 128, kBN = 128, kD = 64, kDV = 64, kStages = 3, kConsumers = 2,
    CHECK: enum : int { kOverlap = 1, kPingPong = 1, kPolyExpEvery = 0, kZeroNanRows = 0 };
    CHECK: enum : int { kProducerRegisters = 24, kConsumerRegisters = 240 };
  )"));
}

// Three consumers: 192 query rows per CTA, every consumer releasing each K/V slot, no turns.
TEST(CudaAttentionEmitterTest, ThreeConsumersShareEachKvTile) {
  auto a = LowerText(kPlain, "g (bfloat16[2,4,256,64] q, bfloat16[2,4,256,64] k, bfloat16[2,4,256,64] v) => (bfloat16[2,4,256,64] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  a->name = "att";
  CudaAttentionConfig three;
  three.consumers = 3;
  auto source = EmitCudaAttention(*a, three);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.block[0], 512);
  EXPECT_EQ(source->launch.grid[0], 2 * 4 * 2);  // 256 queries: two blocks of 192 per head
  EXPECT_EQ(source->launch.args[0].map.box[1], 192);
  EXPECT_EQ(source->strategy.find("ping-pong"), std::string::npos) << source->strategy;
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __launch_bounds__(512, 1) att(
    CHECK: enum : int { kBM = 192, kBN = 128, kD = 64, kDV = 64, kStages = 3, kConsumers = 3, kTiles = 1, kQSlots = 1 };
    CHECK: enum : int { kOverlap = 1, kPingPong = 0, kPolyExpEvery = 0, kZeroNanRows = 0 };
    CHECK: enum : int { kProducerRegisters = 24, kConsumerRegisters = 160 };
  )")) << source->function;
}

// With interior key blocks (causal attention below the diagonal), those run the logits
// without the mask; the diagonal blocks run the whole program.
TEST(CudaAttentionEmitterTest, InteriorBlocksSkipTheMask) {
  PlannedText p = CausalPlan();
  auto a = LowerText(p);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  a->name = "att";
  auto source = EmitCudaAttention(*a, ResolveAttentionConfigForMask(p.graph, *a, {}));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->strategy.find("mask on edge blocks only"), std::string::npos) << source->strategy;
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: att_first_inner_block[] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK: att_last_inner_block[] = {-1, 0, 1, 2, 3, 4, 5, 6, 7};
    CHECK: enum : int { kSkipsKeyBlocks = 1, kInterior = tf::kInteriorTables };
    CHECK: struct Logits {
    CHECK-NEXT: typedef int tf_index_t;
    CHECK-NEXT: enum : int { kScoreTimesMultiplier = 0 };
    CHECK-NEXT: Multiplier() { return 1.0f; }
    CHECK-NEXT: float operator()(const tf_index_t& row, const int& key, float score) const {
    CHECK: (row % 1100)
    CHECK: select(
    CHECK: return (float)v
    CHECK: struct InteriorLogits {
    CHECK-NEXT: enum : int { kScoreTimesMultiplier = 1 };
    CHECK-NEXT: Multiplier() { return 1.803368777e-01f; }
    CHECK: tf::AttentionBlockTables{att_query_block_order, att_first_key_block, att_last_key_block, att_first_inner_block, att_last_inner_block}, tf::AttentionLengths{(int)1100, (int)1100, 0, 0}, Batch{}, Logits{}, InteriorLogits{}, b
  )")) << source->function;
}

// Several query blocks per CTA: a causal mask's blocks are paired heaviest with lightest (nine
// blocks: 9 + 1, 8 + 2, ... key blocks, the odd one alone), and the producer loads a tile's Q
// into a slot only once both consumers have released the slot's last one: with one slot the
// previous tile's, with two (the rule where they fit) the one before that.
TEST(CudaAttentionEmitterTest, CtasRunPairsOfQueryBlocks) {
  PlannedText p = CausalPlan();
  auto a = LowerText(p);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  a->name = "att";
  auto with_tiles = [](int tiles) {
    CudaAttentionConfig config;
    config.tiles = tiles;
    return config;
  };
  for (int tiles : {1, 2, 4}) {
    auto source = EmitCudaAttention(*a, ResolveAttentionConfigForMask(p.graph, *a, with_tiles(tiles)));
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ(source->launch.grid[0], 2 * ((9 + tiles - 1) / tiles)) << tiles;
    const char* order = tiles == 1 ? "att_query_block_order[] = {8, 7, 6, 5, 4, 3, 2, 1, 0};"
                        : tiles == 2 ? "att_query_block_order[] = {8, 0, 7, 1, 6, 2, 5, 3, 4, -1};"
                                     : "att_query_block_order[] = {8, 0, 7, 1, 6, 2, 5, 3, 4, -1, -1, -1};";
    EXPECT_NE(source->function.find(order), std::string::npos) << source->function;
  }
  CudaAttentionConfig config = ResolveAttentionConfigForMask(p.graph, *a, with_tiles(2));
  for (int q_slots : {0, 1}) {
    config.q_slots = q_slots;
    auto source = EmitCudaAttention(*a, config);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_NE(source->strategy.find("2 query blocks per CTA"), std::string::npos) << source->strategy;
    EXPECT_EQ(source->strategy.find("Q double-buffered") != std::string::npos, q_slots == 0) << source->strategy;
    // Q tiles, three K/V stages, their barriers (the skeleton lays shared memory out so).
    const int q_tiles = q_slots == 0 ? 2 : 1;
    EXPECT_TRUE(MatchesChecks(source->function, fmt::format(R"(
      CHECK: enum : int {{ kBM = 128, kBN = 128, kD = 64, kDV = 64, kStages = 3, kConsumers = 2, kTiles = 2, kQSlots = {} }};
    )", q_tiles))) << source->function;
    EXPECT_EQ(source->launch.dynamic_shared_bytes, 1024 + q_tiles * 128 * 64 * 2 + 3 * 128 * (64 + 64) * 2 + 8 * (2 * q_tiles + 4 * 3));
  }
  config.tiles = 3;
  EXPECT_FALSE(EmitCudaAttention(*a, config).ok());
  config.tiles = 2;
  config.q_slots = 3;
  EXPECT_FALSE(EmitCudaAttention(*a, config).ok());
}

TEST(CudaAttentionEmitterTest, MaterialisedKTransposeIsReadMnMajor) {
  auto a = LowerText(
      "  c = Constant <value = float {0.125}> ()\n  scale = Cast <to = 16> (c)\n  s = MatMul (q, k_t)\n"
      "  scaled = Mul (s, scale)\n  p = Softmax <axis = -1> (scaled)\n  out = MatMul (p, v)\n",
      "g (bfloat16[2,90,128] q, bfloat16[2,128,136] k_t, bfloat16[2,136,128] v) => (bfloat16[2,90,128] out)");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->k.RowsContiguous());
  a->name = "att";
  auto source = EmitCudaAttention(*a);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("kKMnMajor = 1, kVMnMajor = 1"), std::string::npos) << source->function;
}

TEST(CudaAttentionEmitterTest, RefusesWhatTheKernelDoesNotTakeWithTheReason) {
  std::string f32_body = kPlain;
  f32_body.replace(f32_body.find("Cast <to = 16>"), 14, "Identity");
  auto f32 = LowerText(f32_body, "g (float[1,2,64,64] q, float[1,2,64,64] k, float[1,2,64,64] v) => (float[1,2,64,64] out)");
  ASSERT_FALSE(f32.ok());
  EXPECT_NE(f32.status().message().find("bf16 and f16"), std::string::npos) << f32.status().ToString();
  auto d32 = LowerText(kPlain, "g (bfloat16[1,2,64,32] q, bfloat16[1,2,64,32] k, bfloat16[1,2,64,32] v) => (bfloat16[1,2,64,32] out)");
  ASSERT_FALSE(d32.ok());
  EXPECT_NE(d32.status().message().find("head dims 32"), std::string::npos) << d32.status().ToString();
}

}  // namespace
}  // namespace tilefuse

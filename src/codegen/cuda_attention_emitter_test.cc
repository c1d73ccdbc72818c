// The attention template on the CPU side: which attention groups it takes (and why not),
// how it reads Q, Kᵀ and V through views (strides, offsets, GQA head division), the kernel
// it prints and the launch it asks for. Running the kernels needs a GPU:
// scripts/gpu-check.sh (tests/attention); CudaProgramTest compiles them for sm_90a.
#include "codegen/cuda_attention_emitter.h"

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
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
    CHECK: {%32, %33, %34, %35}
    CHECK: __launch_bounds__(384, 1) att(
    CHECK: constexpr int kPolyExpEvery = 0;
    CHECK-NEXT: constexpr float kLazyMargin = -1.0f;
    CHECK: if (warpgroup == 0) {
    CHECK: tf::TmaLoad5d(tile_q
    CHECK: k_empty[ring.stage].Wait(ring.phase ^ 1);
    CHECK: GrowRegisters<240>
    CHECK: auto issue_qk
    CHECK-NEXT: tile_k + stage
    CHECK: att_qk(s,
    CHECK: auto issue_pv
    CHECK: att_pv(o, p[kk]
    CHECK: auto online_softmax
    CHECK: tf::QuadMax
    CHECK: __any_sync(0xffffffffu, block_max[0] > row_max[0] + kLazyMargin
    CHECK: const float x = fmaf(s[j * 4 + h * 2 + e], mult, -shift);
    CHECK-NEXT: j % kPolyExpEvery == kPolyExpEvery - 1 ? tf::Exp2Poly(x) : tf::Exp2(x);
    CHECK: auto softmax_edge
    CHECK: if (key >= kNK) {
    CHECK-NOT: srow
    CHECK: online_softmax(1.803368777e-01f);
    CHECK: auto rescale_and_pack
    CHECK-NEXT: if (rescaled)
    CHECK: tf::PackBf16x2
    CHECK: for (int kb = kb_first; kb <= kb_last; ++kb, ring.Advance()) {
    CHECK-NEXT: k_full[ring.stage].Wait(ring.phase);
    CHECK-NEXT: issue_qk(ring.stage);
    CHECK-NOT: issue_pv
    CHECK: softmax(kb);
    CHECK: issue_pv(ring.stage);
    CHECK: if (row >= kNQ) continue;
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
  EXPECT_NE(source->function.find("key0, o1 / 4, 0, 0, k_full"), std::string::npos) << source->function;
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
  EXPECT_NE(source->function.find("online_softmax(1.271515936e-01f)"), std::string::npos) << source->function;
  EXPECT_EQ(source->function.find("score *"), std::string::npos) << source->function;
  // Lazy rescaling (by default wherever a CTA has two consumers, and at head dims above 64).
  EXPECT_NE(source->function.find("constexpr float kLazyMargin = 8.0f;"), std::string::npos);
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
    CHECK: if (consumer == 1) tf::NamedBarrierArrive(1, 256);
    CHECK-NEXT: for (int t = 0; t < kTiles && tile(t, m_block, kb_first, kb_last); ++t) {
    CHECK: const bool last_tile = !(t + 1 < kTiles && tile(t + 1,
    CHECK: tf::NamedBarrierSync(1 + consumer, 256);
    CHECK-NEXT: issue_qk(ring.stage);
    CHECK-NEXT: if (consumer == 0 || !(last_tile && kb_first == kb_last)) tf::NamedBarrierArrive(2 - consumer, 256);
    CHECK: for (int kb = kb_first + 1; kb <= kb_last; ++kb, ring.Advance()) {
    CHECK: tf::NamedBarrierSync(1 + consumer, 256);
    CHECK-NEXT: issue_qk(ring.stage);
    CHECK: issue_pv(pending.stage);
    CHECK-NEXT: if (consumer == 0 || !(last_tile && kb == kb_last)) tf::NamedBarrierArrive(2 - consumer, 256);
    CHECK-NEXT: tf::Warpgroup::Wait<1>();
    CHECK: softmax(kb);
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
    CHECK: constexpr int kBM = 192, kBN = 128, kD = 64, kDV = 64, kStages = 3, kConsumers = 3;
    CHECK: k_empty[s].Init(kConsumers);
    CHECK: GrowRegisters<160>
    CHECK-NOT: NamedBarrier
    CHECK: softmax(kb);
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
    CHECK: auto softmax_edge
    CHECK: if (key >= kNK) {
    CHECK: select(
    CHECK: online_softmax(1.0f);
    CHECK: auto softmax_inner
    CHECK-NEXT: online_softmax(1.803368777e-01f);
    CHECK: if (kb >= inner_first && kb <= inner_last) softmax_inner(kb * kBN);
    CHECK: inner_first = att_first_inner_block[m_block]
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
    EXPECT_TRUE(MatchesChecks(source->function, fmt::format(R"(
      CHECK: constexpr int kQSlots = {};
      CHECK: q_empty[s].Init(kConsumers);
      CHECK: for (int t = 0; t < kTiles && tile(t, m_block, kb_first, kb_last); ++t) {{
      CHECK-NEXT: const int q_slot = t % kQSlots;
      CHECK-NEXT: if (t >= kQSlots) q_empty[q_slot].Wait((t / kQSlots - 1) & 1);
      CHECK: tf::TmaLoad5d(tile_q + q_slot * kBM * kD + box * kBM * 64, map_q,
      CHECK: for (int t = 0; t < kTiles && tile(t, m_block, kb_first, kb_last); ++t) {{
      CHECK: q = tile_q + q_slot * kBM * kD + consumer * 64 * 64;
      CHECK-NEXT: q_full[q_slot].Wait(t / kQSlots & 1);
      CHECK: if (local == 0) q_empty[q_slot].Arrive();
      CHECK-NEXT: v_full[pending.stage].Wait(pending.phase);
    )", q_slots == 0 ? 2 : 1))) << source->function;
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
  EXPECT_NE(source->function.find("MnMajor(k + kk * 16 * 64, kD * 128)"), std::string::npos) << source->function;
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

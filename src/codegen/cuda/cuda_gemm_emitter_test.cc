// The GEMM template on the CPU side: which gemm groups it takes (and why not), what it hands
// the skeleton (configuration, A loader, the epilogue it prints over (row, col)), the launch it
// asks for. Running the kernels needs a
// GPU: scripts/gpu-check.sh (tests/gemm); CudaProgramTest compiles them for sm_90a.
#include <algorithm>
#include "codegen/cuda/cuda_gemm_emitter.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "api/backend_setup.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/kernel_fingerprint.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "testing/file_check.h"
#include "testing/fp8_linear.h"
#include "testing/onnx_text_plan.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

using Planned = PlannedText;

Planned PlanText(const std::string& body, const std::string& signature) { return PlanOnnxText(signature, body); }

StatusOr<GemmTemplateKernel> LowerOnlyGemm(const Planned& p, bool tf32 = false) {
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      auto t = LowerGemmTemplate(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph), tf32);
      if (t.ok()) t->name = "gemm";
      return t;
    }
  ADD_FAILURE() << "no gemm group";
  return Internal("no gemm group");
}

// The template's kernel source for the only gemm group of p.
StatusOr<CudaKernelSource> EmitOnlyGemm(const Planned& p) {
  ASSIGN_OR_RETURN(GemmTemplateKernel gemm, LowerOnlyGemm(p));
  return EmitCudaGemm(gemm);
}

TEST(CudaGemmEmitterTest, BiasReluEpilogueReadsTheBiasByColumnAndStoresThroughTma) {
  Planned p = PlanText("  p = MatMul (x, w)\n  s = Add (p, b)\n  y = Relu (s)\n",
                       "g (bfloat16[4,512,1024] x, bfloat16[1024,768] w, bfloat16[768] b) => (bfloat16[4,512,768] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_EQ(gemm->rows, 2048);  // the shared weight folds the batch into the rows
  EXPECT_EQ(gemm->batch, 1);
  EXPECT_EQ(gemm->n, 768);
  EXPECT_EQ(gemm->k, 1024);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string& f = source->function;
  EXPECT_NE(f.find("using Element = tf::Bf16;"), std::string::npos) << f;
  EXPECT_NE(f.find("tf_cvt_bf16(b1[col])"), std::string::npos) << f;  // no division by N left
  EXPECT_NE(f.find("relu("), std::string::npos);
  EXPECT_NE(f.find("kPingPong = 0"), std::string::npos);  // a cheap epilogue: cooperative consumers
  EXPECT_NE(f.find("kStagedStore = 1,"), std::string::npos);  // the output through shared memory and TMA
  // ...and nothing else written: the epilogue runs on the edge tiles' pairs unbranched.
  EXPECT_NE(f.find("kEpilogueWrites = 0 }"), std::string::npos) << f;
  EXPECT_NE(f.find("{&map_a, &map_b, &map_out, nullptr, nullptr, nullptr}"), std::string::npos);
  // A, B and the output as tensor maps, then the bias and output buffers; the product is
  // never a buffer of its own.
  ASSERT_EQ(source->launch.args.size(), 5u);
  EXPECT_EQ(source->launch.args[0].kind, LaunchArg::Kind::kTensorMap);
  EXPECT_EQ(source->launch.args[2].kind, LaunchArg::Kind::kTensorMap);
  EXPECT_EQ(source->launch.args[3].kind, LaunchArg::Kind::kBuffer);
  EXPECT_EQ(source->launch.args[0].map.dims[1], 2048);
  EXPECT_GT(source->launch.dynamic_shared_bytes, 48 * 1024);
  EXPECT_LE(source->launch.dynamic_shared_bytes, 227 * 1024);
  EXPECT_EQ(source->launch.block[0], 384);
}

// What the kernel hands the skeleton (codegen/cuda/device/gemm_sm90.cuh), on ping-pong
// consumers (the tuner's form; the rule's overlapped one is below): the maps of the staged
// store and load, the configuration, and the epilogue, which reads the residual from the
// staged tile (`loaded`) and leaves the output (b3) to the staged store, never writing it.
TEST(CudaGemmEmitterTest, GeluResidualKernelReadsAsTheTemplateSays) {
  Planned p = PlanText(
      "  p = MatMul (x, w)\n  s = Add (p, b)\n  t = Tanh (s)\n  y = Add (t, r)\n",
      "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[4096] b, bfloat16[2048,4096] r) => (bfloat16[2048,4096] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  CudaGemmConfig pingpong;
  pingpong.pingpong = true;
  auto source = EmitCudaGemm(*gemm, pingpong);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->includes, std::vector<std::string>{"gemm_sm90.cuh"});
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: __launch_bounds__(384, 1) gemm(
    CHECK-SAME: map_a
    CHECK-SAME: map_b
    CHECK-SAME: map_out
    CHECK-SAME: map_in
    CHECK-SAME: , uint16_t* __restrict__ b3) {
    CHECK: struct Config {
    CHECK-NEXT: using Element = tf::Bf16;
    CHECK-NEXT: using Index = int;
    CHECK-NEXT: using StoreElement = tf::Bf16;
    CHECK-NEXT: using LoadElement = tf::Bf16;
    CHECK-NEXT: enum : int { kBM = 128, kBN = 128,
    CHECK: kPingPong = 1, kOverlap = 0
    CHECK: kStagedStore = 1, kStoreByThreads = 0, kStagedLoad = 1, kRingedLoad = 0
    CHECK: kProducerRegisters = 40, kConsumerRegisters = 232
    CHECK: struct Epilogue {
    CHECK: uint16_t* __restrict__ b3;
    CHECK: operator()(tf_index_t row, int col, float acc, float loaded) const {
    CHECK-NOT: b3[
    CHECK: = acc;
    CHECK: tf_cvt_bf16(b1[col])
    CHECK: tf_tanh_approx(
    CHECK: = loaded;
    CHECK: return v
    CHECK: tf::GemmMaps maps{&map_a, &map_b, &map_out, &map_in, nullptr, nullptr};
    CHECK-NEXT: maps.rows = (int)(2048);
    CHECK-NEXT: tf::GemmSm90<Config, tf::MatrixA>(maps, Epilogue{
    CHECK-SAME: b3}, nullptr, nullptr);
  )"));
}

// The overlapped epilogue (cooperative consumers, the rule's default there): a tile's
// products wait as packed bf16 pairs while the next tile's first kChunks steps each run one
// chunk of their epilogue after issuing the step's wgmma and retiring the one before; a
// last pass without a tile finishes the last one held. A residual keeps the epilogue in the
// main loop's tail (it could cancel the rounded product).
TEST(CudaGemmEmitterTest, OverlappedEpilogueRunsInChunksDuringTheNextMainLoop) {
  Planned p = PlanText("  p = MatMul (x, w)\n  s = Add (p, b)\n  y = Tanh (s)\n",
                       "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[4096] b) => (bfloat16[2048,4096] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  const CudaGemmConfig rule = ResolveGemmConfig(*gemm, {});
  EXPECT_FALSE(*rule.pingpong);
  EXPECT_TRUE(*rule.overlap_epilogue);
  EXPECT_EQ(rule.block_n, 256);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->strategy.find("epilogue overlapping the next main loop"), std::string::npos) << source->strategy;
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: kPingPong = 0, kOverlap = 1, kChunks = 16,
    CHECK: kStagedStore = 1, kStoreByThreads = 0, kStagedLoad = 0, kRingedLoad = 0
    CHECK: tf_cvt_bf16(b1[col])
    CHECK: tf_tanh_approx(
    CHECK: return v
    CHECK: tf::GemmMaps maps{&map_a, &map_b, &map_out, nullptr, nullptr, nullptr}
  )"));

  // Narrower tiles split their column groups into fewer chunks.
  CudaGemmConfig narrow;
  narrow.block_n = 64;
  EXPECT_EQ(gemm_layout::EpilogueChunks(ResolveGemmConfig(*gemm, narrow)), 8);

  // Ping-pong consumers and split-K keep their own epilogues.
  CudaGemmConfig pingpong;
  pingpong.pingpong = true;
  EXPECT_FALSE(*ResolveGemmConfig(*gemm, pingpong).overlap_epilogue);
  pingpong.overlap_epilogue = true;
  EXPECT_EQ(EmitCudaGemm(*gemm, pingpong).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig split;
  split.splits = 2;
  EXPECT_FALSE(*ResolveGemmConfig(*gemm, split).overlap_epilogue);
  split.overlap_epilogue = true;
  EXPECT_EQ(EmitCudaGemm(*gemm, split).status().code(), StatusCode::kInvalidArgument);

  // A residual tile is overlapped by the rule (its ring brings it); a residual TMA cannot bring
  // (f32) keeps the epilogue in the main loop's tail (ProductMayBeHeld).
  Planned residual = PlanText("  p = MatMul (x, w)\n  y = Add (p, r)\n",
                              "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[2048,4096] r) => (bfloat16[2048,4096] y)");
  auto with_residual = LowerOnlyGemm(residual);
  ASSERT_TRUE(with_residual.ok());
  const CudaGemmConfig residual_rule = ResolveGemmConfig(*with_residual, {});
  EXPECT_FALSE(*residual_rule.pingpong);
  EXPECT_TRUE(*residual_rule.overlap_epilogue);
  EXPECT_GE(gemm_layout::RingedLoad(*with_residual, residual_rule), 0);
  Planned wide = PlanText("  p = MatMul (x, w)\n  pf = Cast <to = 1> (p)\n  y = Add (pf, r)\n",
                          "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, float[2048,4096] r) => (float[2048,4096] y)");
  auto with_f32_residual = LowerOnlyGemm(wide);
  ASSERT_TRUE(with_f32_residual.ok()) << with_f32_residual.status().ToString();
  EXPECT_FALSE(*ResolveGemmConfig(*with_f32_residual, {}).overlap_epilogue);
}

// Asked for, an overlapped epilogue with a residual reads it from a ring of its own (the
// staging tile still holds the previous tile's output then): the producer brings chunk c of
// the held tile's residual by TMA just before the next tile's step c, and after its last
// tile the last one's chunks; each chunk waits for its slot, reads its column pairs there
// and hands the slot back warp by warp.
TEST(CudaGemmEmitterTest, OverlappedEpilogueReadsTheResidualFromItsRing) {
  Planned residual = PlanText("  p = MatMul (x, w)\n  y = Add (p, r)\n",
                              "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w, bfloat16[2048,4096] r) => (bfloat16[2048,4096] y)");
  auto gemm = LowerOnlyGemm(residual);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  CudaGemmConfig asked;
  asked.overlap_epilogue = true;
  const CudaGemmConfig c = ResolveGemmConfig(*gemm, asked);
  EXPECT_FALSE(*c.pingpong) << "the rule's ping-pong tiles for a residual at K <= 1024 give way to the overlap asked for";
  EXPECT_EQ(c.block_n, 256);
  EXPECT_EQ(gemm_layout::StagedLoad(*gemm, c), -1);
  EXPECT_GE(gemm_layout::RingedLoad(*gemm, c), 0);
  EXPECT_EQ(gemm_layout::ResidualRingBytes(c, true), 4 * 128 * 16 * 2);
  EXPECT_LE(gemm_layout::SharedBytes(c, *gemm, true, true), gemm_layout::kSharedLimit);
  auto source = EmitCudaGemm(*gemm, asked);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->function.find("map_in"), std::string::npos) << "no staged load";
  EXPECT_NE(source->function.find("kStagedLoad = 0, kRingedLoad = 1"), std::string::npos);
  ASSERT_GE(source->launch.args.size(), 4u);
  ASSERT_EQ(source->launch.args[3].kind, LaunchArg::Kind::kTensorMap) << "A, B, the output, then the residual";
  const TensorMapArg& map = source->launch.args[3].map;
  EXPECT_EQ(map.box[0], 16) << "one chunk's columns";
  EXPECT_EQ(map.box[1], 128);
  EXPECT_FALSE(map.swizzle_128b);
  EXPECT_EQ(source->launch.dynamic_shared_bytes, gemm_layout::SharedBytes(c, *gemm, true, true));
  EXPECT_NE(source->strategy.find("residual by TMA into its ring"), std::string::npos) << source->strategy;
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: const __grid_constant__ tf::TensorMap map_residual
    CHECK: using LoadElement = tf::Bf16;
    CHECK: kOverlap = 1, kChunks = 16,
    CHECK: = loaded;
    CHECK: {&map_a, &map_b, &map_out, nullptr, &map_residual, nullptr}
  )"));
}

TEST(CudaGemmEmitterTest, BatchedOperandsWalkBatchEntries) {
  Planned p = PlanText("  y = MatMul (a, b)\n", "g (float16[6,100,64] a, float16[6,64,72] b) => (float16[6,100,72] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_EQ(gemm->rows, 100);
  EXPECT_EQ(gemm->batch, 6);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok());
  EXPECT_NE(source->function.find("using Element = tf::F16;"), std::string::npos);
  EXPECT_NE(source->function.find("kBatch = 6 }"), std::string::npos);
  EXPECT_EQ(source->launch.args[1].map.dims[2], 6);  // B's batch dimension
}

// Under --precision high an f32 product runs as TF32: operands of 4 bytes, 32 of K a step
// (one 128-byte swizzle row), B read K-major from the [N][K] value its prologue transposes.
TEST(CudaGemmEmitterTest, F32ProductsTakeTheTemplateAsTf32WithBReadKMajor) {
  Planned p = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n",
                       "g (float[256,512] x, float[1024,512] w) => (float[256,1024] y)");
  auto gemm = LowerOnlyGemm(p, /*tf32=*/true);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_GE(gemm->b_k_major, 0);
  EXPECT_EQ(gemm_layout::KSteps(*gemm), 512 / 32);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("using Element = tf::Tf32;"), std::string::npos);
  EXPECT_NE(source->strategy.find("TF32"), std::string::npos) << source->strategy;
  EXPECT_EQ(source->strategy.find("overlapping"), std::string::npos) << "an f32 product is not held: " << source->strategy;
  const TensorMapArg &a = source->launch.args[0].map, &b = source->launch.args[1].map;
  EXPECT_EQ(a.box[0], 32);                    // A: 32 of K a box row (128 bytes)
  EXPECT_EQ(a.strides_bytes[0], 512 * 4);     // a row of A: K f32 values
  EXPECT_EQ(b.dims[0], 512);                  // B K-major: [N][K], K innermost
  EXPECT_EQ(b.box[0], 32);
  EXPECT_EQ(b.strides_bytes[0], 512 * 4);
  EXPECT_TRUE(a.tf32 && b.tf32) << "the copies round the operands to TF32";
  EXPECT_FALSE(gemm->split_f32);
  EXPECT_NE(source->function.find("kSplitTf32 = 0"), std::string::npos);
  CudaGemmConfig overlapped;
  overlapped.overlap_epilogue = true;
  EXPECT_FALSE(EmitCudaGemm(*gemm, overlapped).ok());

  // B as [K][N]: the TF32 tensor cores cannot read it (passes/k_major_weights.h stores
  // constant weights K-major; a computed B stays with cuBLASLt).
  Planned mn = PlanText("  y = MatMul (x, w)\n", "g (float[256,512] x, float[512,1024] w) => (float[256,1024] y)");
  auto refused = LowerOnlyGemm(mn, /*tf32=*/true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("K-major"), std::string::npos) << refused.status().message();
}

// Without TF32 (--precision highest) the same product runs as 3xTF32: the copies bring the f32
// operands whole (no rounding), the producer's idle warps split B (kSplitTf32), its small parts
// taking B's share of a stage beside each stage, and the consumers split A in their registers;
// cooperative consumers only. B may be MN-major there.
TEST(CudaGemmEmitterTest, ExactF32ProductsTakeTheTemplateAs3xTf32) {
  Planned p = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n",
                       "g (float[4096,512] x, float[1024,512] w) => (float[4096,1024] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_TRUE(gemm->split_f32);
  const CudaGemmConfig rule = ResolveGemmConfig(*gemm, {});
  EXPECT_FALSE(*rule.pingpong) << "TF32's ping-pong rule for a short K is not 3xTF32's";
  EXPECT_TRUE(*rule.promote) << "3xTF32 adds each step's sums into the accumulators";
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("using Element = tf::Tf32;"), std::string::npos);
  EXPECT_NE(source->function.find("kSplitTf32 = 1"), std::string::npos);
  EXPECT_NE(source->strategy.find("3xTF32"), std::string::npos) << source->strategy;
  const TensorMapArg &a = source->launch.args[0].map, &b = source->launch.args[1].map;
  EXPECT_FALSE(a.tf32 || b.tf32) << "3xTF32 splits the whole f32 values";
  EXPECT_EQ(source->launch.dynamic_shared_bytes, gemm_layout::SharedBytes(rule, *gemm, false, false));
  // B's small parts beside each stage, and their barriers; none of A's.
  GemmTemplateKernel unsplit = *gemm;
  unsplit.split_f32 = false;
  const int64_t split_bytes = gemm_layout::SharedBytes(rule, *gemm, false, false) - gemm_layout::SharedBytes(rule, unsplit, false, false);
  EXPECT_GE(split_bytes, rule.stages * rule.block_n * 128);
  EXPECT_LT(split_bytes, rule.stages * gemm_layout::StageBytes(rule));
  EXPECT_NE(source->function.find("kPromote = 1"), std::string::npos) << "A's registers are rewritten only after a step is waited on";
  EXPECT_LE(rule.block_n, 128);
  EXPECT_GE(rule.stages, 3);
  EXPECT_LE(gemm_layout::SharedBytes(rule, *gemm, false, false), gemm_layout::kSharedLimit);
  EXPECT_NE(GemmFingerprint(*gemm), GemmFingerprint(unsplit)) << "TF32's tuned forms are not 3xTF32's";
  CudaGemmConfig pingpong;
  pingpong.pingpong = true;
  auto refused = EmitCudaGemm(*gemm, pingpong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cooperative"), std::string::npos) << refused.status().message();

  // B as [K][N] (a weight given as [in][out]): TF32 refuses it, 3xTF32 writes B's big parts
  // K-major beside the small ones; its boxes are 32 columns of N (128 bytes).
  Planned mn = PlanText("  y = MatMul (x, w)\n", "g (float[4096,512] x, float[512,1024] w) => (float[4096,1024] y)");
  EXPECT_FALSE(LowerOnlyGemm(mn, /*tf32=*/true).ok());
  auto mn_gemm = LowerOnlyGemm(mn);
  ASSERT_TRUE(mn_gemm.ok()) << mn_gemm.status().ToString();
  EXPECT_LT(mn_gemm->b_k_major, 0);
  const CudaGemmConfig mn_rule = ResolveGemmConfig(*mn_gemm, {});
  auto mn_source = EmitCudaGemm(*mn_gemm);
  ASSERT_TRUE(mn_source.ok()) << mn_source.status().ToString();
  EXPECT_NE(mn_source->function.find("kBKMajor = 0"), std::string::npos);
  const TensorMapArg& mn_b = mn_source->launch.args[1].map;
  EXPECT_EQ(mn_b.box[0], 32) << "B's box: 32 columns of N";
  EXPECT_EQ(mn_b.box[1], 32) << "B's box: 32 rows of K";
  EXPECT_EQ(gemm_layout::SplitBufferBytes(mn_rule, *mn_gemm) - gemm_layout::SplitBufferBytes(mn_rule, *gemm),
            mn_rule.stages * mn_rule.block_n * 128);
  EXPECT_LE(mn_source->launch.dynamic_shared_bytes, gemm_layout::kSharedLimit);
}

// A quantized linear layer (passes/fp8_products.h) runs on the FP8 tensor cores: e4m3
// operands of a byte, 128 of K a step, B read K-major from the weight stored so at compile
// time, the sums promoted into f32 a step at a time (twice the accumulators: at most 128
// columns a tile) unless --precision high asks for the tensor cores' own accumulation.
// Clusters of two asked of a product no pair can split (3xTF32 keeps 128 columns at most, and
// N = 72 leaves 64, one box of B): the single CTA's width, the pair refused with its reason
// (the probe for --gemm-cluster 2 had divided by a width of 0).
TEST(CudaGemmEmitterTest, APairThatNoWidthSplitsKeepsTheSingleCtasWidth) {
  Planned p = PlanText("  q = MatMul (x, w)\n  y = Add (q, b)\n", "g (float[200,136] x, float[136,72] w, float[72] b) => (float[200,72] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->split_f32);
  CudaGemmConfig paired;
  paired.cluster_m = 2;
  const CudaGemmConfig resolved = ResolveGemmConfig(*gemm, paired);
  EXPECT_EQ(resolved.block_n, 64);
  EXPECT_FALSE(gemm_layout::ClustersFit(*gemm, resolved, 2));
  auto refused = EmitCudaGemm(*gemm, paired);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("64-column boxes"), std::string::npos) << refused.status().message();
}

TEST(CudaGemmEmitterTest, Fp8ProductsTakeTheTemplateWithPromotedSums) {
  const PlannedText p = PlanFp8Linear(8192, 1024, 2048, DType::kF8E4M3, CudaPassOptions());
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_EQ(gemm->dtype, DType::kF32);
  EXPECT_EQ(gemm->operand_dtype, DType::kF8E4M3);
  EXPECT_GE(gemm->b_k_major, 0);
  EXPECT_EQ(gemm_layout::KSteps(*gemm), 1024 / 128);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("using Element = tf::E4m3;"), std::string::npos);
  EXPECT_NE(source->function.find("kPromote = 1"), std::string::npos);
  EXPECT_NE(source->strategy.find("FP8 f8e4m3, promoted"), std::string::npos) << source->strategy;
  EXPECT_LE(ResolveGemmConfig(*gemm, {}).block_n, 128);
  const TensorMapArg &a = source->launch.args[0].map, &b = source->launch.args[1].map;
  EXPECT_EQ(a.dtype, DType::kF8E4M3);
  EXPECT_EQ(a.box[0], 128);                // 128 of K a box row (128 bytes)
  EXPECT_EQ(a.strides_bytes[0], 1024);     // a row of A: K bytes
  EXPECT_EQ(b.dims[0], 1024);              // B K-major: [N][K], K innermost
  EXPECT_EQ(b.dims[1], 2048);
  EXPECT_FALSE(a.tf32 || b.tf32);
  CudaGemmConfig fast;
  fast.promote = false;
  auto unpromoted = EmitCudaGemm(*gemm, fast);
  ASSERT_TRUE(unpromoted.ok()) << unpromoted.status().ToString();
  EXPECT_NE(unpromoted->function.find("kPromote = 0"), std::string::npos);
  EXPECT_EQ(ResolveGemmConfig(*gemm, fast).block_n, 256) << "without promotion the widest tile fits again";
  // The epilogue in the main loop's tail by the rule; asked for, overlapped, the promoted f32
  // sums held beside 128 columns at most; not without promotion, nor on wider tiles.
  EXPECT_FALSE(*ResolveGemmConfig(*gemm, {}).overlap_epilogue);
  CudaGemmConfig overlapped;
  overlapped.overlap_epilogue = true;
  auto held = EmitCudaGemm(*gemm, overlapped);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_NE(held->strategy.find("128x128x128 FP8 f8e4m3, promoted"), std::string::npos) << held->strategy;
  EXPECT_NE(held->strategy.find("epilogue overlapping the next main loop"), std::string::npos) << held->strategy;
  EXPECT_NE(held->function.find("kHeldF32 = 1"), std::string::npos);
  EXPECT_EQ(held->function.find("HeldElement"), std::string::npos) << "f32 sums, not 16-bit pairs";
  fast.overlap_epilogue = true;
  EXPECT_FALSE(*ResolveGemmConfig(*gemm, fast).overlap_epilogue);
  fast.overlap_epilogue.reset();
  CudaGemmConfig wide;
  wide.overlap_epilogue = true, wide.block_n = 192;
  EXPECT_FALSE(*ResolveGemmConfig(*gemm, wide).overlap_epilogue);
  auto tail = EmitCudaGemm(*gemm, wide);
  ASSERT_TRUE(tail.ok()) << tail.status().ToString();
  EXPECT_EQ(tail->strategy.find("overlapping"), std::string::npos) << tail->strategy;

  // Without the CUDA passes the product stays a bf16 one of dequantized values.
  const PlannedText unquantized = PlanFp8Linear(8192, 1024, 2048, DType::kF8E4M3, PassOptions{});
  auto bf16 = LowerOnlyGemm(unquantized);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->operand_dtype, DType::kBF16);
}

// An 8-bit weight of an odd vocabulary (1030 columns: rows of 1030 bytes) is stored K-major
// like every 8-bit weight, not padded to 1040 columns: padded, the product's slice, scales and
// bias were a kernel of their own (GPT-2's LM head at 8x512: 841 + 444 µs, H200, 2026-12-04).
// Block scales whose weight side is one scale per 128x128 block (DeepGEMM's weights, written
// repeated over each block's columns) are found value by value and read once a tile and step;
// a scale per column keeps a scale per column.
TEST(CudaGemmEmitterTest, WeightScalesSharedBy128ColumnsAreReadOnceATile) {
  PassOptions passes = CudaPassOptions();
  passes.fp8_block_scales = true;
  for (bool weight_blocks : {true, false}) {
    SCOPED_TRACE(weight_blocks ? "weight blocks" : "a scale per column");
    const PlannedText p = PlanFp8Linear(4096, 1024, 2048, DType::kF8E4M3, passes, /*block_scales=*/true, weight_blocks);
    auto gemm = LowerOnlyGemm(p);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    ASSERT_EQ(gemm->scale_blocks, 8);
    EXPECT_EQ(gemm->b_scale_columns, weight_blocks ? 128 : 0);
    auto source = EmitCudaGemm(*gemm);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_NE(source->function.find(weight_blocks ? "kBScaleColumns = 128" : "kBScaleColumns = 0"), std::string::npos);
    EXPECT_EQ(source->strategy.find("B's by 128 columns") != std::string::npos, weight_blocks) << source->strategy;
    // Shared scales take 64-, 128- and 192-column tiles (a 192-column tile reads two runs).
    for (int width : {64, 128, 192}) {
      CudaGemmConfig c;
      c.block_n = width;
      EXPECT_TRUE(EmitCudaGemm(*gemm, c).ok()) << width;
    }
  }
}

TEST(CudaGemmEmitterTest, AnEightBitWeightOfAnOddVocabularyKeepsItsEpilogue) {
  const PlannedText p = PlanFp8Linear(256, 768, 1030, DType::kF8E4M3, CudaPassOptions());
  EXPECT_TRUE(std::none_of(p.graph.nodes().begin(), p.graph.nodes().end(), [](const Node& n) { return n.op == OpCode::kSlice; }));
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_EQ(gemm->operand_dtype, DType::kF8E4M3);
  EXPECT_EQ(gemm->n, 1030);
  EXPECT_GE(gemm->b_k_major, 0);
  EXPECT_TRUE(gemm_layout::StoreByThreads(*gemm));
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->strategy.find("FP8 f8e4m3"), std::string::npos) << source->strategy;
}

// An odd vocabulary (GPT-2's 50257, here 1029): B read K-major from the [N][K] weight, whose
// rows of K TMA can read; the output's rows are not 16-byte aligned, so the staged store is
// written out of shared memory by the threads, not by TMA, and an odd N ends inside the last
// column pair.
TEST(CudaGemmEmitterTest, AnOddVocabularyIsReadKMajorAndItsLogitsStoredByTheThreads) {
  Planned p = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n",
                       "g (bfloat16[256,64] x, bfloat16[1029,64] w) => (bfloat16[256,1029] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_GE(gemm->b_k_major, 0);
  EXPECT_TRUE(gemm_layout::StoreByThreads(*gemm));
  for (const char* form : {"tail", "overlap"}) {
    CudaGemmConfig config;
    config.overlap_epilogue = std::string(form) == "overlap";
    auto source = EmitCudaGemm(*gemm, config);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_TRUE(MatchesChecks(source->function, R"(
      CHECK: gemm(const __grid_constant__ tf::TensorMap map_a, const __grid_constant__ tf::TensorMap map_b, uint16_t* __restrict__ b0)
      CHECK: kN = 1029,
      CHECK: kStagedStore = 1, kStoreByThreads = 1, kStagedLoad = 0, kRingedLoad = 0, kAMnMajor = 0, kBKMajor = 1
      CHECK: return v
      CHECK: tf::GemmMaps maps{&map_a, &map_b, nullptr, nullptr, nullptr, b0}
    )")) << form << "\n" << source->function;
    EXPECT_NE(source->strategy.find("by the threads"), std::string::npos) << source->strategy;
    EXPECT_EQ(source->launch.args.size(), 3u) << "no TMA map of the output";
  }
}

// The same logits padded to 1032 columns (passes/column_padding_into_products.h): B is the
// weight with 3 zero rows appended, which TMA's out-of-bounds fill supplies: B's map keeps the
// weight's 1029 rows, the product's 1032 columns are stored by TMA, and no prologue copies B.
TEST(CudaGemmEmitterTest, ZeroRowsAppendedToAKMajorWeightAreFilledByTma) {
  Planned p = PlanText("  pad_shape = Constant <value = int64[2] {3, 64}> ()\n  zeros_f32 = ConstantOfShape <value = float[1] {0.0}> (pad_shape)\n"
                       "  zeros = Cast <to = 16> (zeros_f32)\n  wide = Concat <axis = 0> (w, zeros)\n"
                       "  wt = Transpose <perm = [1, 0]> (wide)\n  y = MatMul (x, wt)\n",
                       "g (bfloat16[256,64] x, bfloat16[1029,64] w) => (bfloat16[256,1032] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->b_k_major, 0);
  EXPECT_EQ(p.graph.node(gemm->b_k_major).shape, (Shape{1029, 64}));  // the weight itself
  EXPECT_EQ(gemm->b_rows, 1029);
  EXPECT_EQ(gemm->n, 1032);
  EXPECT_FALSE(gemm_layout::StoreByThreads(*gemm));
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& b = source->launch.args[1].map;
  EXPECT_EQ(b.node, gemm->b_k_major);
  EXPECT_EQ(b.dims[0], 64);    // K, contiguous
  EXPECT_EQ(b.dims[1], 1029);  // the weight's rows, not N
  // Nonzero rows appended are no padding: B is then the concat a prologue writes.
  Planned ones = PlanText("  pad_shape = Constant <value = int64[2] {3, 64}> ()\n  ones_f32 = ConstantOfShape <value = float[1] {1.0}> (pad_shape)\n"
                          "  ones = Cast <to = 16> (ones_f32)\n  wide = Concat <axis = 0> (w, ones)\n"
                          "  wt = Transpose <perm = [1, 0]> (wide)\n  y = MatMul (x, wt)\n",
                          "g (bfloat16[256,64] x, bfloat16[1029,64] w) => (bfloat16[256,1032] y)");
  auto copied = LowerOnlyGemm(ones);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->b_rows, 0);
  EXPECT_NE(copied->b_k_major, ones.graph.inputs()[1]);  // not the weight read as if it were B
}

// An LM head's input gradient g · concat(w, zeros) over a padded vocabulary: B [K][N] is the
// weight with zero rows of K appended, which TMA's out-of-bounds fill supplies: B's map keeps
// the weight's 1001 rows of K, and no prologue copies it; nonzero rows are a concat to write.
TEST(CudaGemmEmitterTest, ZeroRowsOfKAppendedToAnMnMajorWeightAreFilledByTma) {
  auto plan = [](const char* fill) {
    return PlanText(fmt::format("  pad_shape = Constant <value = int64[2] {{7, 256}}> ()\n"
                                "  fill_f32 = ConstantOfShape <value = float[1] {{{}}}> (pad_shape)\n"
                                "  fill = Cast <to = 16> (fill_f32)\n  wide = Concat <axis = 0> (w, fill)\n  dx = MatMul (g, wide)\n",
                                fill),
                    "f (bfloat16[260,1008] g, bfloat16[1001,256] w) => (bfloat16[260,256] dx)");
  };
  Planned p = plan("0.0");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_LT(gemm->b_k_major, 0);
  EXPECT_EQ(gemm->b, p.graph.inputs()[1]);  // the weight itself
  EXPECT_EQ(gemm->b_k_rows, 1001);
  EXPECT_EQ(gemm->k, 1008);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& b = source->launch.args[1].map;
  EXPECT_EQ(b.node, gemm->b);
  EXPECT_EQ(b.dims[0], 256);   // N, contiguous
  EXPECT_EQ(b.dims[1], 1001);  // the weight's rows of K, not K
  Planned ones = plan("1.0");
  auto copied = LowerOnlyGemm(ones);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->b_k_rows, 0);
  EXPECT_NE(copied->b, ones.graph.inputs()[1]);
}

// Epilogue::Pair, which the template calls per column pair where N is even: half values at the
// product's position (the matrix m read, the outputs p and t written) move as one 4-byte word
// per pair; the bias (by column) and the staged output stay per column. Where N is odd, Pair
// is operator() twice.
TEST(CudaGemmEmitterTest, ThePairEpilogueMovesHalfValuesAtTheProductsPositionAsWords) {
  const std::string body = "  p = MatMul (x, w)\n  s = Add (p, b)\n  g = Mul (s, m)\n  y = Add (g, r)\n  t = Tanh (g)\n";
  Planned even = PlanText(body, "g (bfloat16[1000,136] x, bfloat16[136,520] w, bfloat16[520] b, bfloat16[1000,520] m, "
                                "bfloat16[1000,520] r) => (bfloat16[1000,520] y, bfloat16[1000,520] p, bfloat16[1000,520] t)");
  auto source = EmitOnlyGemm(even);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string& f = source->function;
  const std::string pair = f.substr(f.find("void Pair("));
  EXPECT_TRUE(MatchesChecks(pair, R"(
    CHECK: void Pair(tf_index_t row, int col, const float (&acc)[2], const float (&loaded)[2], float (&result)[2]) const {
    CHECK: const int col1 = col + 1;
    CHECK: const uint32_t p
    CHECK-SAME: = *(const uint32_t*)(b
    CHECK-SAME: + (col));
    CHECK: const uint32_t p
    CHECK-SAME: = *(const uint32_t*)(b
    CHECK-SAME: + ((row * 520 + col)));
    CHECK: (uint16_t)p
    CHECK: result[0] = v
    CHECK: >> 16))
    CHECK: result[1] = v
    CHECK: *(uint32_t*)(b
    CHECK-SAME: + ((row * 520 + col))) = (uint32_t)tf_pack_bf16(s
    CHECK: *(uint32_t*)(b
    CHECK-SAME: + ((row * 520 + col))) = (uint32_t)tf_pack_bf16(s
  )")) << pair;
  // The bias's column pair is adjacent too: a word, not two elements.
  EXPECT_EQ(pair.find("[(row * 520 + col"), std::string::npos) << "no element access at the product's position:\n" << pair;
  EXPECT_EQ(pair.find("[col"), std::string::npos) << "no element access of the bias:\n" << pair;
  // The functor writes p and t itself: it runs for the pairs inside the product only.
  EXPECT_NE(f.find("kEpilogueWrites = 1 }"), std::string::npos) << f;

  // An odd vocabulary (B read K-major from its [N][K] weight).
  Planned odd = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  g = Mul (p, m)\n  t = Tanh (g)\n",
                         "g (bfloat16[1000,136] x, bfloat16[521,136] w, bfloat16[1000,521] m) => (bfloat16[1000,521] p, bfloat16[1000,521] t)");
  auto odd_gemm = LowerOnlyGemm(odd);
  ASSERT_TRUE(odd_gemm.ok()) << odd_gemm.status().ToString();
  auto odd_source = EmitCudaGemm(*odd_gemm);
  ASSERT_TRUE(odd_source.ok()) << odd_source.status().ToString();
  EXPECT_NE(odd_source->function.find("result[1] = (*this)(row, col + 1, acc[1], loaded[1]);"), std::string::npos)
      << odd_source->function;
}

// f32 values at the product's position (a TF32 or 3xTF32 product's output, its residual) move
// as one float2 per column pair: an 8-byte access where element by element a warp wrote half
// of each 32-byte sector it touched per instruction.
TEST(CudaGemmEmitterTest, ThePairEpilogueMovesF32ValuesAtTheProductsPositionAsFloat2) {
  Planned p = PlanText("  p = MatMul (x, w)\n  s = Add (p, b)\n  y = Add (s, r)\n  t = Relu (y)\n",
                       "g (float[1000,136] x, float[136,520] w, float[520] b, float[1000,520] r) => (float[1000,520] t, float[1000,520] y)");
  auto source = EmitOnlyGemm(p);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string pair = source->function.substr(source->function.find("void Pair("));
  EXPECT_TRUE(MatchesChecks(pair, R"(
    CHECK: const int col1 = col + 1;
    CHECK: const float2 p
    CHECK-SAME: = *(const float2*)(b
    CHECK-SAME: + (col));
    CHECK: const float2 p
    CHECK-SAME: = *(const float2*)(b
    CHECK-SAME: + ((row * 520 + col)));
    CHECK: tf_cvt_f32(p
    CHECK-SAME: .x)
    CHECK: result[0] = 0.0f;
    CHECK: tf_cvt_f32(p
    CHECK-SAME: .y)
    CHECK: result[1] = 0.0f;
    CHECK: *(float2*)(b
    CHECK-SAME: + ((row * 520 + col))) = make_float2(tf_pack_f32(s
    CHECK: *(float2*)(b
    CHECK-SAME: + ((row * 520 + col))) = make_float2(tf_pack_f32(s
  )")) << pair;
  EXPECT_EQ(pair.find("[(row * 520 + col"), std::string::npos) << "no element access at the product's position:\n" << pair;
  EXPECT_EQ(pair.find("[col"), std::string::npos) << "no element access of the bias:\n" << pair;
}

TEST(CudaGemmEmitterTest, WhatTheTemplateDoesNotTakeComesWithTheReason) {
  struct Case {
    std::string body, signature, reason;
  };
  std::vector<Case> cases = {
      {"  y = MatMul (x, w)\n", "g (float[3,64,64] x, float[3,64,64] w) => (float[3,64,64] y)", "3xTF32 GEMM template takes a B shared"},
      {"  y = MatMul (x, w)\n", "g (int32[64,64] x, int32[64,64] w) => (int32[64,64] y)", "not i32"},
      {"  y = MatMul (x, w)\n", "g (bfloat16[64,60] x, bfloat16[60,64] w) => (bfloat16[64,64] y)", "K = 60 must be a multiple of 8"},
      {"  y = MatMul (x, w)\n", "g (bfloat16[64,64] x, bfloat16[64,61] w) => (bfloat16[64,61] y)", "N = 61 must be a multiple of 8"},
      {"  y = MatMul (x, w)\n", "g (bfloat16[64,64] x, bfloat16[3,64,64] w) => (bfloat16[3,64,64] y)", "broadcast"},
      // Scores at 100 keys: Kᵀ [64][100] per batch entry has 200-byte rows.
      {"  y = MatMul (q, k)\n", "g (bfloat16[3,100,64] q, bfloat16[3,64,100] k) => (bfloat16[3,100,100] y)",
       "N = 100 must be a multiple of 8 for TMA's 16-byte row strides (a batched B"},
      {"  p = MatMul (x, w)\n  t = Transpose <perm = [1, 0]> (p)\n  y = Relu (t)\n",
       "g (bfloat16[64,64] x, bfloat16[64,64] w) => (bfloat16[64,64] y)", "through a view"},
  };
  int refused = 0;
  for (const Case& c : cases) {
    Planned p = PlanText(c.body, c.signature);
    bool has_gemm = false;
    for (const FusionGroup& g : p.plan.groups) has_gemm = has_gemm || g.kind == GroupKind::kGemm;
    if (!has_gemm) continue;  // planned without a gemm group: nothing to refuse
    auto gemm = LowerOnlyGemm(p);
    ASSERT_FALSE(gemm.ok()) << c.signature;
    EXPECT_NE(gemm.status().message().find(c.reason), std::string::npos) << gemm.status().message();
    ++refused;
  }
  EXPECT_GE(refused, 3);
}

TEST(CudaGemmEmitterTest, ConfigurationsTheTemplateCannotRunAreRefused) {
  Planned p = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[256,256] x, bfloat16[256,256] w) => (bfloat16[256,256] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok());
  CudaGemmConfig bad;
  bad.block_n = 96;
  EXPECT_EQ(EmitCudaGemm(*gemm, bad).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig too_deep;
  too_deep.block_n = 256;
  too_deep.stages = 8;
  EXPECT_EQ(EmitCudaGemm(*gemm, too_deep).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig too_wide;  // a ping-pong consumer would hold 128 x 256 accumulators
  too_wide.pingpong = true;
  too_wide.block_n = 256;
  EXPECT_EQ(EmitCudaGemm(*gemm, too_wide).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig resolved = ResolveGemmConfig(*gemm, {});
  EXPECT_FALSE(*resolved.pingpong);  // a plain product: nothing to hide behind the main loop
  EXPECT_GE(resolved.stages, 2);
  EXPECT_TRUE(EmitCudaGemm(*gemm, resolved).ok());
}

// Clusters of two CTAs on vertically adjacent tiles: each loads its A tile and half of the
// B tile they share, multicast to both; a slot goes back to a producer once the consumers
// of both CTAs have read it, and a producer stays until its slots are all handed back.
TEST(CudaGemmEmitterTest, ClustersOfTwoShareTheBTileByMulticast) {
  Planned p = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[2048,1024] x, bfloat16[1024,2048] w) => (bfloat16[2048,2048] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_EQ(ResolveGemmConfig(*gemm, {}).cluster_m, 1);  // single CTAs by rule, until measured otherwise
  CudaGemmConfig paired;
  paired.cluster_m = 2;
  paired.block_n = 128;
  auto source = EmitCudaGemm(*gemm, paired);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.cluster[0], 2);
  EXPECT_EQ(source->launch.cluster[1] * source->launch.cluster[2], 1);
  EXPECT_EQ(source->work_blocks, 132);  // 66 clusters for 256 tiles
  EXPECT_EQ(source->launch.grid[0] % 2, 0);
  EXPECT_NE(source->strategy.find("clusters of 2"), std::string::npos) << source->strategy;
  EXPECT_NE(source->function.find("kClusterM = 2,"), std::string::npos) << source->function;
  // A single CTA's kernel has none of it.
  auto single = EmitCudaGemm(*gemm, {});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->launch.cluster[0], 1);
  EXPECT_NE(single->function.find("kClusterM = 1,"), std::string::npos);

  // What a pair cannot share: three CTAs, 64 columns (one box of B), split-K, an odd number
  // of tile rows.
  CudaGemmConfig three = paired;
  three.cluster_m = 3;
  EXPECT_EQ(EmitCudaGemm(*gemm, three).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig narrow = paired;
  narrow.block_n = 64;
  EXPECT_EQ(EmitCudaGemm(*gemm, narrow).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig split = paired;
  split.splits = 2;
  EXPECT_EQ(EmitCudaGemm(*gemm, split).status().code(), StatusCode::kInvalidArgument);
  Planned odd_rows = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[1920,1024] x, bfloat16[1024,2048] w) => (bfloat16[1920,2048] y)");
  auto odd = LowerOnlyGemm(odd_rows);
  ASSERT_TRUE(odd.ok());
  auto refused = EmitCudaGemm(*odd, paired);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().ToString().find("15 rows of tiles"), std::string::npos) << refused.status().ToString();
  EXPECT_FALSE(gemm_layout::ClustersFit(*odd, ResolveGemmConfig(*odd, {}), 2));
  EXPECT_TRUE(gemm_layout::ClustersFit(*gemm, ResolveGemmConfig(*gemm, {}), 2));
}

TEST(CudaGemmEmitterTest, FewTilesSplitKAndTheLastUnitRunsTheEpilogue) {
  Planned p = PlanText("  q = MatMul (x, w)\n  y = Add (q, b)\n",
                       "g (bfloat16[16,4096] x, bfloat16[4096,4096] w, bfloat16[4096] b) => (bfloat16[16,4096] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  CudaGemmConfig c = ResolveGemmConfig(*gemm, {});
  EXPECT_EQ(c.block_m, 64);  // 16 rows: half the tile wasted, not seven eighths
  EXPECT_EQ(c.block_n, 128);
  const int64_t tiles = 4096 / c.block_n, steps = 4096 / 64;
  ASSERT_GT(c.splits, 1);
  EXPECT_LE(tiles * c.splits, 66);                    // about half as many units as SMs
  const int64_t per = (steps + c.splits - 1) / c.splits;
  EXPECT_LT((c.splits - 1) * per, steps);             // no unit without a step of K
  EXPECT_GE(per, 4);
  auto source = EmitCudaGemm(*gemm, c);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.block[0], 256);  // one consumer warpgroup of 64 rows
  EXPECT_EQ(source->work_blocks, tiles * c.splits);
  // The tile counters and the partial tiles, in one scratch memory of the right size.
  ASSERT_GE(source->launch.args.size(), 2u);
  const LaunchArg& counters = source->launch.args[source->launch.args.size() - 2];
  const LaunchArg& partials = source->launch.args.back();
  EXPECT_EQ(counters.kind, LaunchArg::Kind::kScratch);
  EXPECT_EQ(partials.kind, LaunchArg::Kind::kScratch);
  EXPECT_EQ(counters.scalar, 0);
  EXPECT_GE(partials.scalar, tiles * 4);
  EXPECT_EQ(source->launch.scratch_bytes, partials.scalar + tiles * c.splits * 64 * c.block_n * 4);
  EXPECT_TRUE(MatchesChecks(source->function, fmt::format(R"(
    CHECK: unsigned* __restrict__ tile_counters, float* __restrict__ partials) {{
    CHECK: kSplits = {}, kSplitSteps = {} }};
    CHECK: tf_cvt_bf16(b1[col])
    CHECK: Epilogue{{b1, b2}}, tile_counters, partials);
  )", c.splits, per)));
  CudaGemmConfig pingpong = c;  // ping-pong consumers skip each other's fixed step counts
  pingpong.pingpong = true;
  pingpong.block_m = 128;
  EXPECT_EQ(EmitCudaGemm(*gemm, pingpong).status().code(), StatusCode::kInvalidArgument);
  CudaGemmConfig too_many = c;
  too_many.splits = 65;
  EXPECT_EQ(EmitCudaGemm(*gemm, too_many).status().code(), StatusCode::kInvalidArgument);
}

TEST(CudaGemmEmitterTest, MergedHeadsAreReadThroughTheirViewByARank4Map) {
  const std::string body =
      "  t = Transpose <perm = [0, 2, 1, 3]> (heads)\n  shape = Constant <value = int64[3] {2, 256, 256}> ()\n"
      "  a = Reshape (t, shape)\n  y = MatMul (a, w)\n";
  Planned p = PlanText(body, "g (bfloat16[2,4,256,64] heads, bfloat16[256,192] w) => (bfloat16[2,256,192] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->a_view.has_value());
  const GemmOperandView& v = *gemm->a_view;
  EXPECT_EQ(p.graph.node(v.node).shape, (Shape{2, 4, 256, 64}));  // the heads themselves, not A
  EXPECT_EQ(v.head, 64);
  EXPECT_EQ(v.entry_rows, 256);
  EXPECT_EQ(v.heads, 4);
  EXPECT_EQ(v.entries, 2);
  EXPECT_EQ(v.stride, (std::array<int64_t, 3>{64, 256 * 64, 4 * 256 * 64}));  // row, head, entry
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& map = source->launch.args[0].map;
  EXPECT_EQ(map.node, v.node);
  EXPECT_EQ(map.rank, 4);
  EXPECT_EQ(map.dims[1], 256);
  EXPECT_EQ(map.strides_bytes[0], 128);
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: tf::GemmSm90<Config, tf::ViewA<64, 256>>
  )"));
  // 100 rows per batch entry: a 128-row tile would span two entries; A is copied instead.
  Planned ragged = PlanText("  t = Transpose <perm = [0, 2, 1, 3]> (heads)\n  shape = Constant <value = int64[3] {2, 100, 256}> ()\n"
                            "  a = Reshape (t, shape)\n  y = MatMul (a, w)\n",
                            "g (bfloat16[2,4,100,64] heads, bfloat16[256,192] w) => (bfloat16[2,100,192] y)");
  auto copied = LowerOnlyGemm(ragged);
  ASSERT_TRUE(copied.ok());
  EXPECT_FALSE(copied->a_view.has_value());
}

// A linear layer's input viewed as a matrix (reshape [1, 5, 256] -> [5, 256], as torch.compile
// gives every linear): the same bytes, read as A itself by a plain map, so a decode step's few
// rows take the skinny template; no prologue copy either way.
TEST(CudaGemmEmitterTest, APlainReshapedMatrixIsReadAsItself) {
  Planned p = PlanText("  shape = Constant <value = int64[2] {5, 256}> ()\n  a = Reshape (h, shape)\n  y = MatMul (a, w)\n",
                       "g (bfloat16[1,5,256] h, bfloat16[256,192] w) => (bfloat16[5,192] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_FALSE(gemm->a_view.has_value());
  EXPECT_EQ(p.graph.node(gemm->a).shape, (Shape{1, 5, 256}));  // h itself
  EXPECT_TRUE(SkinnyGemmFits(*gemm).ok());
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& a = source->launch.args[0].map;
  EXPECT_EQ(a.node, gemm->a);
  EXPECT_EQ(a.dims[0], 256);  // K, contiguous
  EXPECT_EQ(a.dims[1], 5);    // the rows: a matrix, not ViewA's heads and entries
}

// So for f32 products (3xTF32, TF32): the reshaped activation is read where it lies, no
// prologue copy; merged heads through their view (a rank-4 map of 32-column boxes, f32's K
// step), their heads of 64 columns holding whole steps.
TEST(CudaGemmEmitterTest, F32ProductsReadAPlainReshapedMatrixAsItselfAndMergedHeadsThroughTheirView) {
  for (bool tf32 : {false, true}) {
    SCOPED_TRACE(tf32 ? "TF32" : "3xTF32");
    Planned p = PlanText("  shape = Constant <value = int64[2] {128, 256}> ()\n  a = Reshape (h, shape)\n"
                         "  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (a, wt)\n",
                         "g (float[1,128,256] h, float[192,256] w) => (float[128,192] y)");
    auto gemm = LowerOnlyGemm(p, tf32);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    EXPECT_EQ(p.graph.node(gemm->a).op, OpCode::kParameter);  // h itself
    EXPECT_FALSE(gemm->a_view.has_value());
    Planned heads = PlanText("  t = Transpose <perm = [0, 2, 1, 3]> (x)\n  shape = Constant <value = int64[2] {512, 256}> ()\n"
                             "  a = Reshape (t, shape)\n  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (a, wt)\n",
                             "g (float[2,4,256,64] x, float[192,256] w) => (float[512,192] y)");
    auto viewed = LowerOnlyGemm(heads, tf32);
    ASSERT_TRUE(viewed.ok()) << viewed.status().ToString();
    ASSERT_TRUE(viewed->a_view.has_value());
    EXPECT_EQ(viewed->a_view->heads, 4);
    EXPECT_EQ(viewed->a_view->entry_rows, 256);
    auto source = EmitCudaGemm(*viewed);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const TensorMapArg& a = source->launch.args[0].map;
    EXPECT_EQ(a.node, viewed->a_view->node);
    EXPECT_EQ(a.box[0], 32);                      // a K step of f32
    EXPECT_EQ(a.strides_bytes[0], 64 * 4);        // a row of a head: 64 f32 values
    EXPECT_EQ(a.strides_bytes[1], 256 * 64 * 4);  // the next head
    EXPECT_NE(source->function.find("tf::ViewA<64, 256>"), std::string::npos);
  }
}

// PyTorch's linear layers flatten the merged heads to a matrix ([batch·T, heads·d], GPT-2's
// out-projection through torch.compile): still a rank-4 map, with T rows per batch entry.
TEST(CudaGemmEmitterTest, FlattenedMergedHeadsAreReadThroughTheirView) {
  const std::string body =
      "  t = Transpose <perm = [0, 2, 1, 3]> (heads)\n  shape = Constant <value = int64[2] {512, 256}> ()\n"
      "  a = Reshape (t, shape)\n  y = MatMul (a, w)\n";
  Planned p = PlanText(body, "g (bfloat16[2,4,256,64] heads, bfloat16[256,192] w) => (bfloat16[512,192] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->a_view.has_value());
  const GemmOperandView& v = *gemm->a_view;
  EXPECT_EQ(v.entry_rows, 256);
  EXPECT_EQ(v.entries, 2);
  EXPECT_EQ(v.heads, 4);
  EXPECT_EQ(v.stride, (std::array<int64_t, 3>{64, 256 * 64, 4 * 256 * 64}));
  // [2, 4, 200, 64]: T = 200 is no whole number of row tiles; A is copied.
  Planned ragged = PlanText("  t = Transpose <perm = [0, 2, 1, 3]> (heads)\n  shape = Constant <value = int64[2] {400, 256}> ()\n"
                            "  a = Reshape (t, shape)\n  y = MatMul (a, w)\n",
                            "g (bfloat16[2,4,200,64] heads, bfloat16[256,192] w) => (bfloat16[400,192] y)");
  auto copied = LowerOnlyGemm(ragged);
  ASSERT_TRUE(copied.ok());
  EXPECT_FALSE(copied->a_view.has_value());
}

// The channels-last convolution's lowering (passes/window_ops.h) over an NHWC activation
// z [N, H, W, C]: A = im2col(z) [N·OH·OW, KH·KW·C], B = the filter [KH·KW·C, Co], then ReLU.
Planned ChannelsLastConv(int64_t channels, int64_t stride, int64_t pad, DType dtype = DType::kBF16) {
  GraphBuilder b;
  const int64_t n = 2, h = 16, w = 16, co = 128, k = 3;
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  Value z = b.Parameter("z", dtype, {n, h, w, channels});
  Value filter = b.Parameter("filter", dtype, {k * k * channels, co});
  PoolParams p;
  p.kernel = {k, k};
  p.strides = {stride, stride};
  p.pads = {pad, pad, pad, pad};
  p.dilations = {1, 1};
  Value windows = b.Window(b.Transpose(z, {0, 3, 1, 2}), b.Scalar(0, dtype), p);
  Value a = b.Reshape(b.Transpose(windows, {0, 2, 3, 4, 5, 1}), {n * oh * ow, k * k * channels});
  b.Output(b.Unary(OpCode::kRelu, b.MatMul(a, filter)), "y");
  Planned out;
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  if (!graph.ok()) return out;
  out.graph = std::move(*graph);
  auto plan = PlanFusion(out.graph, {});
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) out.plan = std::move(*plan);
  return out;
}

TEST(CudaGemmEmitterTest, ChannelsLastConvolutionIsAnImplicitGemmOverTheActivation) {
  Planned p = ChannelsLastConv(/*channels=*/64, /*stride=*/2, /*pad=*/1);
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->a_conv.has_value());
  const GemmConvWindow& c = *gemm->a_conv;
  EXPECT_EQ(p.graph.node(c.node).shape, (Shape{2, 16, 16, 64}));  // the activation itself, not im2col's copy
  EXPECT_EQ(c.out_height, 8);
  EXPECT_EQ(c.out_width, 8);
  EXPECT_EQ(gemm->rows, 2 * 8 * 8);
  EXPECT_EQ(gemm->k, 9 * 64);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& map = source->launch.args[0].map;
  EXPECT_EQ(map.node, c.node);
  EXPECT_EQ(map.rank, 4);
  EXPECT_EQ(map.dims, (std::array<int64_t, 5>{64, 16, 16, 2, 1}));  // C, W, H, N
  ASSERT_TRUE(map.im2col.has_value());
  EXPECT_EQ(map.im2col->lower, (std::array<int, 2>{-1, -1}));  // -pad
  EXPECT_EQ(map.im2col->upper, (std::array<int, 2>{-1, -1}));  // pad - (k - 1)
  EXPECT_EQ(map.im2col->strides, (std::array<int, 2>{2, 2}));
  EXPECT_EQ(map.im2col->channels, 64);
  EXPECT_TRUE(MatchesChecks(source->function, R"(
    CHECK: tf::GemmSm90<Config, tf::Im2colA<64, 64, 8, 2, 1, 2, 1, 3, 1, 1>>
  )")) << source->function;
  // 32 channels: a K step of 64 would straddle two filter taps; A is copied instead.
  auto copied = LowerOnlyGemm(ChannelsLastConv(/*channels=*/32, /*stride=*/1, /*pad=*/1));
  ASSERT_TRUE(copied.ok());
  EXPECT_FALSE(copied->a_conv.has_value());
}

// f32 (3xTF32): a K step is 32 channels (one 128-byte swizzle row), so 32 channels read the
// activation too; 16 do not.
TEST(CudaGemmEmitterTest, F32ConvolutionIsAnImplicitGemmOf32ChannelSteps) {
  Planned p = ChannelsLastConv(/*channels=*/32, /*stride=*/1, /*pad=*/1, DType::kF32);
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->split_f32);
  ASSERT_TRUE(gemm->a_conv.has_value());
  EXPECT_EQ(p.graph.node(gemm->a_conv->node).shape, (Shape{2, 16, 16, 32}));
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& map = source->launch.args[0].map;
  EXPECT_EQ(map.dtype, DType::kF32);
  EXPECT_EQ(map.strides_bytes[0], 32 * 4);  // a pixel's channels
  ASSERT_TRUE(map.im2col.has_value());
  EXPECT_EQ(map.im2col->channels, 32);
  EXPECT_NE(source->function.find("tf::Im2colA<32, 256, 16, 1, 1, 1, 1, 3, 1, 1>"), std::string::npos) << source->function;
  auto copied = LowerOnlyGemm(ChannelsLastConv(/*channels=*/16, /*stride=*/1, /*pad=*/1, DType::kF32));
  ASSERT_TRUE(copied.ok());
  EXPECT_FALSE(copied->a_conv.has_value());
}

// A product the graph lets round to TF32 (a PyTorch convolution under cudnn.allow_tf32) takes
// the TF32 form though the compile asks for f32's accuracy; without it, 3xTF32.
TEST(CudaGemmEmitterTest, AProductMarkedTf32TakesTheTf32Form) {
  for (bool tf32 : {true, false}) {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF32, {256, 128});
    Value w = b.Parameter("w", DType::kF32, {64, 128});
    b.Output(b.MatMul(x, b.Transpose(w, {1, 0}), tf32), "y");
    auto graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto plan = PlanFusion(*graph, {});
    ASSERT_TRUE(plan.ok());
    Planned p{std::move(*graph), std::move(*plan)};
    auto gemm = LowerOnlyGemm(p, /*tf32=*/false);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    EXPECT_EQ(gemm->split_f32, !tf32);
  }
}

// A graph input is NCHW: the channels-last passes stage an NHWC copy of it
// (passes/stage_conv_inputs.h), a group of its own, which the first convolution's implicit
// GEMM reads (the second reads the first's NHWC output as a plain matrix).
TEST(CudaGemmEmitterTest, AConvolutionOverAnNchwInputReadsAStagedNhwcCopy) {
  const std::string text =
      "<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n"
      "g (bfloat16[4,64,20,20] x, bfloat16[128,64,3,3] w, bfloat16[64,128,1,1] v) => (bfloat16[4,64,20,20] y)\n"
      "{\n  c = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w)\n  r = Relu (c)\n"
      "  y = Conv <kernel_shape = [1, 1]> (r, v)\n}\n";
  auto model = ImportOnnxText(text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PassOptions options;
  options.channels_last = true;
  auto graph = RunGraphPasses(std::move(model->graph), options);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusion(*graph, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  Planned p{std::move(*graph), std::move(*plan)};
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_TRUE(gemm->a_conv.has_value());
  const Node& copy = p.graph.node(gemm->a_conv->node);
  EXPECT_EQ(copy.op, OpCode::kTranspose);
  EXPECT_EQ(copy.shape, (Shape{4, 20, 20, 64}));
  // The copy is a pointwise group's output, not folded into the gemm group's prologue.
  bool copied = false;
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kPointwise && group.outputs == std::vector<int>{copy.id}) copied = true;
  EXPECT_TRUE(copied);
}

// x · wᵀ with w a linear layer's [N][K] weight: the template reads B K-major from w itself
// (boxes of 64 rows of N × 64 of K) instead of the transposed copy its prologue would make.
// A transpose of anything but the last two dims of an [N][K] value keeps the copy.
TEST(CudaGemmEmitterTest, ATransposedWeightIsReadKMajorFromItself) {
  Planned p = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  q = MatMul (x, wt)\n  y = Add (q, b)\n",
                       "g (bfloat16[1024,512] x, bfloat16[384,512] w, bfloat16[384] b) => (bfloat16[1024,384] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->b_k_major, 0);
  EXPECT_EQ(p.graph.node(gemm->b_k_major).shape, (Shape{384, 512}));
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("kBKMajor = 1 }"), std::string::npos) << source->function;
  EXPECT_NE(source->strategy.find("B K-major"), std::string::npos) << source->strategy;
  const TensorMapArg& b = source->launch.args[1].map;
  EXPECT_EQ(b.node, gemm->b_k_major);
  EXPECT_EQ(b.dims[0], 512);  // K, contiguous
  EXPECT_EQ(b.dims[1], 384);  // N
  EXPECT_EQ(b.box[0], 64);
  EXPECT_EQ(b.box[1], 64);
  EXPECT_EQ(b.strides_bytes[0], 512 * 2);
  Planned plain = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[1024,512] x, bfloat16[512,384] w) => (bfloat16[1024,384] y)");
  auto mn_major = LowerOnlyGemm(plain);
  ASSERT_TRUE(mn_major.ok());
  EXPECT_EQ(mn_major->b_k_major, -1);
  auto plain_source = EmitCudaGemm(*mn_major);
  ASSERT_TRUE(plain_source.ok());
  EXPECT_NE(plain_source->function.find("kBKMajor = 0 }"), std::string::npos);
}

// xᵀ · dy (a linear layer's weight gradient): the template reads A MN-major from x itself
// (boxes of 64 rows of K × 64 of M, wgmma's transposed A) instead of the transposed copy its
// prologue would make; its prologue is gone from the launches.
TEST(CudaGemmEmitterTest, ATransposedActivationIsReadMnMajorFromItself) {
  Planned p = PlanText("  xt = Transpose <perm = [1, 0]> (x)\n  y = MatMul (xt, dy)\n",
                       "g (bfloat16[512,1000] x, bfloat16[512,384] dy) => (bfloat16[1000,384] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->a_mn_major, 0);
  EXPECT_EQ(p.graph.node(gemm->a_mn_major).shape, (Shape{512, 1000}));
  EXPECT_FALSE(gemm->a_view.has_value());
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("kAMnMajor = 1,"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("tf::MatrixAMnMajor"), std::string::npos) << source->function;
  EXPECT_NE(source->strategy.find("A MN-major"), std::string::npos) << source->strategy;
  const TensorMapArg& a = source->launch.args[0].map;
  EXPECT_EQ(a.node, gemm->a_mn_major);
  EXPECT_EQ(a.dims[0], 1000);  // M, contiguous
  EXPECT_EQ(a.dims[1], 512);   // K
  EXPECT_EQ(a.box[0], 64);
  EXPECT_EQ(a.box[1], 64);
  EXPECT_EQ(a.strides_bytes[0], 1000 * 2);
  // M not a multiple of 8: x's rows are no whole 16-byte units for TMA, the copy stays.
  Planned odd = PlanText("  xt = Transpose <perm = [1, 0]> (x)\n  y = MatMul (xt, dy)\n",
                         "g (bfloat16[512,1001] x, bfloat16[512,384] dy) => (bfloat16[1001,384] y)");
  auto odd_gemm = LowerOnlyGemm(odd);
  ASSERT_TRUE(odd_gemm.ok()) << odd_gemm.status().ToString();
  EXPECT_EQ(odd_gemm->a_mn_major, -1);
  // A transpose that is not of a [K][M] matrix (here of a 3-d value) keeps the copy.
  Planned batched = PlanText("  xt = Transpose <perm = [0, 2, 1]> (x)\n  y = MatMul (xt, dy)\n",
                             "g (bfloat16[2,512,1000] x, bfloat16[2,512,384] dy) => (bfloat16[2,1000,384] y)");
  auto kept = LowerOnlyGemm(batched);
  if (kept.ok()) EXPECT_EQ(kept->a_mn_major, -1);
}

// The same where the transposed value is computed inside the group and written out by a
// prologue anyway (the group outputs it): A is read MN-major from that prologue's copy, and the
// transposed copy's prologue is not made. (GPT-2's LM-head weight gradient: the zero-padded
// dlogits its group writes for the input gradient's product too.)
TEST(CudaGemmEmitterTest, ATransposedValueThatAPrologueWritesIsReadMnMajorFromItsCopy) {
  Planned p = PlanText("  xc = Cast <to = 16> (x)\n  xt = Transpose <perm = [1, 0]> (xc)\n  y = MatMul (xt, dy)\n",
                       "g (float[512,1000] x, bfloat16[512,384] dy) => (bfloat16[1000,384] y, bfloat16[512,1000] xc)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->a_mn_major, 0);
  EXPECT_EQ(p.graph.node(gemm->a_mn_major).op, OpCode::kCast);
  EXPECT_EQ(p.graph.node(gemm->a_mn_major).shape, (Shape{512, 1000}));
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.args[0].map.node, gemm->a_mn_major);
  // Computed by a prologue that is not the group's output: the transposed copy stays.
  Planned inner = PlanText("  xc = Cast <to = 16> (x)\n  xt = Transpose <perm = [1, 0]> (xc)\n  y = MatMul (xt, dy)\n",
                           "g (float[512,1000] x, bfloat16[512,384] dy) => (bfloat16[1000,384] y)");
  auto copied = LowerOnlyGemm(inner);
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->a_mn_major, -1);
}

// A weight gradient whose activation arrives with its rows in two dims (x[8, 64, 1000] viewed
// as [512, 1000] before the transpose): the reshape keeps every element where it is, so A is
// read MN-major from x itself, with no copy.
TEST(CudaGemmEmitterTest, ATransposedReshapeIsReadMnMajorFromTheValueItViews) {
  Planned p = PlanText("  s = Constant <value = int64[2] {512, 1000}> ()\n  x2 = Reshape (x, s)\n"
                       "  xt = Transpose <perm = [1, 0]> (x2)\n  y = MatMul (xt, dy)\n",
                       "g (bfloat16[8,64,1000] x, bfloat16[512,384] dy) => (bfloat16[1000,384] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  ASSERT_GE(gemm->a_mn_major, 0);
  EXPECT_EQ(p.graph.node(gemm->a_mn_major).op, OpCode::kParameter);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const TensorMapArg& a = source->launch.args[0].map;
  EXPECT_EQ(a.node, gemm->a_mn_major);
  EXPECT_EQ(a.dims[0], 1000);  // M, contiguous
  EXPECT_EQ(a.dims[1], 512);   // K: the 8 x 64 rows
  EXPECT_EQ(a.strides_bytes[0], 1000 * 2);
}

// More rows than a read-bound product but few tiles (GPT-2's products at batch 1): 64x64 tiles,
// one unit each where K is short, units of about 12 steps where it is long (fc2, K = 3072);
// 128 columns a tile where 64 would take a second round of the grid (a LLaMA-style gate
// projection, 2048 -> 5632: 176 tiles of 64x64 on 132 SMs, 88 of 64x128); a ring of 8 stages
// where a unit runs 32 steps or more (the gate; LLaMA's down projection, 5632 -> 2048 in 2
// units of 44), as many as fit up to 6 elsewhere.
TEST(CudaGemmEmitterTest, FewTilesOfManyRowsTakeSmallTilesAndSplitOnlyALongK) {
  struct Case {
    int64_t k, n;
    int block_n, splits;
    bool deep_ring;
  };
  for (const Case& t : {Case{768, 2304, 64, 1, false}, Case{768, 768, 64, 1, false}, Case{768, 3072, 64, 1, false},
                        Case{3072, 768, 64, 4, false}, Case{2048, 5632, 128, 1, true}, Case{2048, 2048, 64, 2, false},
                        Case{5632, 2048, 64, 2, true}}) {
    Planned p = PlanText("  y = MatMul (x, w)\n", fmt::format("g (bfloat16[128,{0}] x, bfloat16[{0},{1}] w) => (bfloat16[128,{1}] y)", t.k, t.n));
    auto gemm = LowerOnlyGemm(p);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    const CudaGemmConfig c = ResolveGemmConfig(*gemm, {});
    EXPECT_EQ(c.block_m, 64) << t.k << "x" << t.n;
    EXPECT_EQ(c.block_n, t.block_n) << t.k << "x" << t.n;
    EXPECT_EQ(c.splits, t.splits) << t.k << "x" << t.n;
    EXPECT_LE(128 / 64 * t.n / t.block_n * c.splits, 132) << "at most one unit an SM";
    // No next tile to overlap: the epilogue in the tail, on the f32 sums.
    EXPECT_FALSE(c.overlap_epilogue.value_or(true)) << t.k << "x" << t.n;
    if (t.deep_ring) EXPECT_EQ(c.stages, 8) << t.k << "x" << t.n;
    else EXPECT_LE(c.stages, 6) << t.k << "x" << t.n;
    EXPECT_TRUE(EmitCudaGemm(*gemm, c).ok()) << t.k << "x" << t.n;
  }
  // Read-bound (16 rows) products keep the rule before it.
  Planned skinny = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[16,768] x, bfloat16[768,768] w) => (bfloat16[16,768] y)");
  auto gemm = LowerOnlyGemm(skinny);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(ResolveGemmConfig(*gemm, {}).block_n, 128);
}

// The rule's deepest ring moved for measurement (CudaGemmConfig::max_stages,
// TILEFUSE_GEMM_MAX_STAGES): 128x128 tiles fit 6 stages, capped at 5; the few-tile form's 8
// stages only where the cap allows them; an explicit ask stays as asked.
TEST(CudaGemmEmitterTest, TheRulesDeepestRingMovesWithMaxStages) {
  Planned many = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[4096,1024] x, bfloat16[1024,1024] w) => (bfloat16[4096,1024] y)");
  auto wide = LowerOnlyGemm(many);
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  CudaGemmConfig asked;
  asked.block_n = 128;
  asked.overlap_epilogue = false;
  EXPECT_EQ(ResolveGemmConfig(*wide, asked).stages, 6);
  asked.max_stages = 5;
  EXPECT_EQ(ResolveGemmConfig(*wide, asked).stages, 5);
  asked.stages = 4;
  EXPECT_EQ(ResolveGemmConfig(*wide, asked).stages, 4) << "asked for";
  Planned few = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[128,2048] x, bfloat16[2048,5632] w) => (bfloat16[128,5632] y)");
  auto gate = LowerOnlyGemm(few);
  ASSERT_TRUE(gate.ok()) << gate.status().ToString();
  CudaGemmConfig rule;
  EXPECT_EQ(ResolveGemmConfig(*gate, rule).stages, 8);
  rule.max_stages = 6;
  EXPECT_EQ(ResolveGemmConfig(*gate, rule).stages, 6);
  rule.max_stages = 8;
  EXPECT_EQ(ResolveGemmConfig(*gate, rule).stages, 8);
}

// 3xTF32 products of few tiles (GPT-2's in f32 at batch 1) are bound by their steps: 64-column
// tiles of 64 or 128 rows, K cut into as many units as the SMs take, each unit at least 6 steps
// of 32, whichever puts the fewest steps on the critical path.
TEST(CudaGemmEmitterTest, Exact3xTf32ProductsOfFewTilesCutKShort) {
  struct Case {
    int64_t k, n;
    int block_m, splits;
  };
  for (const Case& t : {Case{768, 2304, 128, 3}, Case{768, 768, 64, 4}, Case{768, 3072, 128, 2}, Case{3072, 768, 128, 11}}) {
    Planned p = PlanText("  y = MatMul (x, w)\n", fmt::format("g (float[128,{0}] x, float[{0},{1}] w) => (float[128,{1}] y)", t.k, t.n));
    auto gemm = LowerOnlyGemm(p);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    ASSERT_TRUE(gemm->split_f32);
    const CudaGemmConfig c = ResolveGemmConfig(*gemm, {});
    EXPECT_EQ(c.block_m, t.block_m) << t.k << "x" << t.n;
    EXPECT_EQ(c.block_n, 64) << t.k << "x" << t.n;
    EXPECT_EQ(c.splits, t.splits) << t.k << "x" << t.n;
    EXPECT_LE(128 / c.block_m * t.n / 64 * c.splits, 132) << "at most one unit an SM";
    EXPECT_GE(gemm_layout::StepsPerSplit(*gemm, c), 6) << t.k << "x" << t.n;
    EXPECT_TRUE(EmitCudaGemm(*gemm, c).ok());
  }
  // 64 rows or fewer: 64-row tiles only.
  Planned few = PlanText("  y = MatMul (x, w)\n", "g (float[40,768] x, float[768,2304] w) => (float[40,2304] y)");
  auto gemm = LowerOnlyGemm(few);
  ASSERT_TRUE(gemm.ok());
  EXPECT_EQ(ResolveGemmConfig(*gemm, {}).block_m, 64);
  // TF32 (a convolution under PyTorch's cudnn.allow_tf32, B K-major) the same way: 64-column
  // tiles, K cut into units of 6 steps or more, not the generic 128-column form.
  Planned tf32 = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n",
                          "g (float[196,2304] x, float[256,2304] w) => (float[196,256] y)");
  auto tf32_gemm = LowerOnlyGemm(tf32, /*tf32=*/true);
  ASSERT_TRUE(tf32_gemm.ok()) << tf32_gemm.status().ToString();
  ASSERT_FALSE(tf32_gemm->split_f32);
  const CudaGemmConfig c = ResolveGemmConfig(*tf32_gemm, {});
  EXPECT_EQ(c.block_n, 64);
  EXPECT_GT(c.splits, 1);
  EXPECT_GE(gemm_layout::StepsPerSplit(*tf32_gemm, c), 6);
}

// B a model input or a constant (a weight no kernel of the model writes): the producer loads
// its first tiles before it waits for the grid ahead. B a value the model computes: after.
TEST(CudaGemmEmitterTest, AWeightIsLoadedBeforeTheWaitForTheGridAhead) {
  Planned p = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[128,768] x, bfloat16[768,768] w) => (bfloat16[128,768] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_TRUE(gemm->b_read_only);
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_NE(source->function.find("kBBeforeWait = 1,"), std::string::npos) << source->function;
  EXPECT_TRUE(source->launch.awaits_prior_grid);
  // The skeleton waits (its producer after B's first tiles): nothing before the call.
  EXPECT_EQ(source->function.find(kAwaitPriorGrid), std::string::npos);
  Planned computed = PlanText("  v = Tanh (w)\n  y = MatMul (x, v)\n",
                              "g (bfloat16[128,768] x, bfloat16[768,768] w) => (bfloat16[128,768] y)");
  auto computed_gemm = LowerOnlyGemm(computed);
  ASSERT_TRUE(computed_gemm.ok()) << computed_gemm.status().ToString();
  EXPECT_FALSE(computed_gemm->b_read_only);
  auto computed_source = EmitCudaGemm(*computed_gemm);
  ASSERT_TRUE(computed_source.ok()) << computed_source.status().ToString();
  EXPECT_NE(computed_source->function.find("kBBeforeWait = 0,"), std::string::npos);
}

TEST(CudaGemmEmitterTest, EnoughTilesNeedNoSplitK) {
  Planned p = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[4096,4096] x, bfloat16[4096,4096] w) => (bfloat16[4096,4096] y)");
  auto gemm = LowerOnlyGemm(p);
  ASSERT_TRUE(gemm.ok());
  auto source = EmitCudaGemm(*gemm);
  ASSERT_TRUE(source.ok());
  EXPECT_EQ(ResolveGemmConfig(*gemm, {}).splits, 1);
  EXPECT_EQ(source->launch.scratch_bytes, 0);
  EXPECT_EQ(source->function.find("tile_counters"), std::string::npos);
}

// The tile's width is the one whose tiles end soonest on 132 SMs: rounds of the grid times
// the tile's columns (a narrower column a little dearer). Each case says what the rounds are.
// A residual epilogue overlapped with the next main loop brings the residual through a ring
// of its own, which can leave the main loop a stage short: after a long K (GPT-2's fc2, 48
// steps, 3 stages overlapped where the tail form holds 4) the epilogue goes in the tail; after
// a short one (its out-projection, 12 steps) it stays overlapped.
// A transformer's x · wᵀ + bias + residual into 768 columns (GPT-2's and ViT-B's fc2 and
// out-projection), `rows` x `k`.
GemmTemplateKernel ResidualProductTo768(int64_t rows, int64_t k) {
  Planned p = PlanText("  wt = Transpose <perm = [1, 0]> (w)\n  q = MatMul (x, wt)\n  s = Add (q, b)\n  y = Add (s, r)\n",
                       fmt::format("g (bfloat16[{0},{1}] x, bfloat16[768,{1}] w, bfloat16[768] b, bfloat16[{0},768] r) => "
                                   "(bfloat16[{0},768] y)", rows, k));
  auto gemm = LowerOnlyGemm(p);
  EXPECT_TRUE(gemm.ok()) << gemm.status().ToString();
  return gemm.ok() ? *gemm : GemmTemplateKernel{};
}

TEST(CudaGemmEmitterTest, ALongMainLoopKeepsItsStagesOverTheResidualsRing) {
  auto rule = [](int64_t k) { return ResolveGemmConfig(ResidualProductTo768(4096, k), {}); };
  const CudaGemmConfig fc2 = rule(3072);
  EXPECT_EQ(fc2.block_n, 192);
  EXPECT_FALSE(*fc2.overlap_epilogue);
  EXPECT_EQ(fc2.stages, 4);
  const CudaGemmConfig proj = rule(768);
  EXPECT_TRUE(*proj.overlap_epilogue);
  EXPECT_EQ(proj.stages, 3);
}

// 192-row tiles run on three consumer warpgroups (512 threads, 152 registers each), the
// epilogue in the main loop's tail (which tiles take them: TheTileWidthTakesTheFewestRounds...);
// not for f32 operands, and refused with the forms three consumers do not run.
TEST(CudaGemmEmitterTest, TilesOf192RowsRunOnThreeConsumers) {
  Planned half = PlanText("  y = MatMul (x, w)\n", "g (bfloat16[6304,3072] x, bfloat16[3072,768] w) => (bfloat16[6304,768] y)");
  auto bf16 = LowerOnlyGemm(half);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  const CudaGemmConfig rule = ResolveGemmConfig(*bf16, {});
  ASSERT_EQ(rule.block_m, 192);
  EXPECT_FALSE(*rule.overlap_epilogue);
  auto source = EmitCudaGemm(*bf16);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->threads, 512);
  EXPECT_NE(source->function.find("kBM = 192, kBN = 192"), std::string::npos) << source->function;
  EXPECT_NE(source->function.find("kConsumerRegisters = 152"), std::string::npos);
  Planned f32 = PlanText("  y = MatMul (x, w)\n", "g (float[6304,3072] x, float[3072,768] w) => (float[6304,768] y)");
  auto gemm = LowerOnlyGemm(f32);
  ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
  EXPECT_NE(ResolveGemmConfig(*gemm, {}).block_m, 192);
  CudaGemmConfig pingpong;
  pingpong.block_m = 192;
  pingpong.pingpong = true;
  auto refused = EmitCudaGemm(*bf16, pingpong);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("192-row tiles"), std::string::npos) << refused.status().ToString();
}

// The tile (192 rows only where they take fewer rounds: ViT-B at batch 32, not GPT-2 at 4096).
TEST(CudaGemmEmitterTest, TheTileWidthTakesTheFewestRoundsOfTheGrid) {
  struct Case {
    int64_t m, n, k;
    int block_m, block_n;
    const char* why;
  };
  const Case cases[] = {
      {4096, 2304, 768, 128, 192, "GPT-2's QKV: 384 tiles of 192 in 3 rounds, 288 of 256 in 3 as well; 2 rounds of 192x192 as many columns"},
      {4096, 768, 768, 128, 192, "N = 768: 128 tiles of 192 in 1 round, 192 of 128 in 2"},
      {4096, 3072, 768, 128, 256, "384 tiles of 256 in 3 rounds, 512 of 192 in 4"},
      {16384, 4096, 1024, 128, 256, "2048 tiles of 256 in 16 rounds, 2816 of 192 in 22"},
      {4096, 50264, 768, 128, 256, "a vocabulary: 48 rounds of 256, 64 of 192"},
      {65536, 384, 768, 128, 192, "N = 384: 1024 tiles of 192 in 8 rounds, of 256 as many (computing 512 columns), 1536 of 128 in 12"},
      {4096, 384, 768, 128, 128, "N = 384 at 4096 rows: every width one round, 128 the fewest columns but for 64 (2 rounds)"},
      {6304, 768, 3072, 192, 192, "ViT-B's fc2: 132 tiles of 192x192, one round; 200 of 128x192 in 2"},
      {6304, 3072, 768, 192, 192, "ViT-B's fc1: 528 of 192x192 in 4 rounds, 600 of 128x256 in 5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    Planned p = PlanText("  y = MatMul (x, w)\n", fmt::format("g (bfloat16[{0},{2}] x, bfloat16[{2},{1}] w) => (bfloat16[{0},{1}] y)",
                                                                c.m, c.n, c.k));
    auto gemm = LowerOnlyGemm(p);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    const CudaGemmConfig rule = ResolveGemmConfig(*gemm, {});
    EXPECT_EQ(rule.block_m, c.block_m);
    EXPECT_EQ(rule.block_n, c.block_n);
    EXPECT_EQ(rule.splits, 1);
    ASSERT_TRUE(EmitCudaGemm(*gemm).ok());
    // A pair of CTAs splits B's tile in 64-column boxes: asked for, it keeps a width of 128 or 256.
    CudaGemmConfig paired;
    paired.cluster_m = 2;
    EXPECT_EQ(ResolveGemmConfig(*gemm, paired).block_n % 128, 0);
  }
}

// Stream-K: where the tiles leave a partial last round, its tiles are shared by the SMs as one
// run of K steps. The rule takes it where the run's critical path is at most 70% of the
// rounds': 4480 rows of N = 768 in 128x192 tiles (asked for; the rule's width would be 256, one
// round) are 140 (132 and 8), 48 steps a tile: 96 steps in two rounds against 48 + 4 + 3 shared
// by 96 CTAs. Asked for, it runs wherever there is a partial round.
TEST(CudaGemmEmitterTest, APartialLastRoundIsSharedByStreamK) {
  auto lower = ResidualProductTo768;
  using namespace gemm_layout;
  CudaGemmConfig rows128;
  rows128.block_m = 128;
  rows128.block_n = 192;
  const GemmTemplateKernel fc2 = lower(4480, 3072);
  const CudaGemmConfig rule = ResolveGemmConfig(fc2, rows128);
  EXPECT_EQ(rule.block_n, 192);
  ASSERT_TRUE(rule.stream_k.value_or(false));
  EXPECT_FALSE(*rule.overlap_epilogue) << "stream-K runs the epilogue in the main loop's tail";
  EXPECT_EQ(StreamKTiles(fc2, rule), 140 - 132);
  EXPECT_EQ(StreamKCtas(fc2, rule), 8 * 48 / kStreamKMinSteps);
  EXPECT_EQ(GridCtas(fc2, rule), 132);
  EXPECT_EQ(ScratchBytes(fc2, rule), kScratchCounterBytes + int64_t{96} * 128 * 192 * 4) << "a partial tile a CTA";
  auto source = EmitCudaGemm(fc2, rows128);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const std::string& f = source->function;
  EXPECT_NE(f.find("kStreamTiles = 8, kStreamCtas = 96"), std::string::npos) << f;
  EXPECT_NE(f.find("kStagedLoad = 1"), std::string::npos) << "the residual staged by TMA for the part that finishes a tile";
  EXPECT_NE(f.find("Epilogue{b1, b2, b3}, tile_counters, partials);"), std::string::npos) << f;
  EXPECT_NE(source->strategy.find("stream-K over the last 8 tiles on 96 CTAs"), std::string::npos) << source->strategy;
  EXPECT_EQ(source->launch.grid[0], 132);
  EXPECT_EQ(source->launch.scratch_bytes, ScratchBytes(fc2, rule));
  // ViT-B's fc2 at batch 32: 200 tiles of 128x192 (76 steps shared against 96: not enough), and
  // by the rule's rows 132 tiles of 192x192, one round.
  const GemmTemplateKernel vit_fc2 = lower(6304, 3072);
  EXPECT_FALSE(*ResolveGemmConfig(vit_fc2, rows128).stream_k);
  EXPECT_FALSE(*ResolveGemmConfig(vit_fc2, {}).stream_k);
  const GemmTemplateKernel proj = lower(6304, 768);
  EXPECT_FALSE(ResolveGemmConfig(proj, {}).stream_k.value_or(true)) << "one round of 192x192 tiles";
  EXPECT_FALSE(ResolveGemmConfig(lower(4224, 3072), {}).stream_k.value_or(true)) << "132 tiles: one whole round";
  // Asked for, it runs wherever there is a partial round, and its CTAs get 4 steps or more:
  // 4096 rows of N = 768 are 128 tiles of 12 steps, all shared, 1536 steps on 132 CTAs.
  CudaGemmConfig asked;
  asked.stream_k = true;
  const GemmTemplateKernel gpt2_proj = lower(4096, 768);
  const CudaGemmConfig streamed = ResolveGemmConfig(gpt2_proj, asked);
  ASSERT_TRUE(*streamed.stream_k);
  EXPECT_EQ(StreamKTiles(gpt2_proj, streamed), 128);
  EXPECT_EQ(StreamKCtas(gpt2_proj, streamed), 132);
  EXPECT_EQ(GridCtas(gpt2_proj, streamed), 132);
  // 4 tiles of 2 steps (K = 128) give 2 CTAs 4 steps each.
  const GemmTemplateKernel small = lower(512, 128);
  const CudaGemmConfig few = ResolveGemmConfig(small, asked);
  if (few.splits == 1 && *few.stream_k) {
    EXPECT_EQ(StreamKCtas(small, few), StreamKTiles(small, few) * 2 / kStreamKMinSteps);
    EXPECT_EQ(GridCtas(small, few), StreamKCtas(small, few));
  }
  // Not with the forms it does not run in: ping-pong consumers, clusters of two.
  CudaGemmConfig pingpong = asked;
  pingpong.pingpong = true;
  EXPECT_FALSE(*ResolveGemmConfig(fc2, pingpong).stream_k);
  CudaGemmConfig paired = asked;
  paired.cluster_m = 2;
  EXPECT_FALSE(*ResolveGemmConfig(fc2, paired).stream_k);
  asked.block_m = 128;
  CudaGemmConfig resolved = ResolveGemmConfig(fc2, asked);
  resolved.cluster_m = 2;
  EXPECT_FALSE(CheckClusters(fc2, resolved).ok());
  resolved.cluster_m = 1;
  resolved.overlap_epilogue = true;  // an overlapped epilogue asked for too: that form, without stream-K
  resolved.stages = 0;               // (its residual ring takes a stage)
  auto overlapped = EmitCudaGemm(fc2, resolved);
  ASSERT_TRUE(overlapped.ok()) << overlapped.status().ToString();
  EXPECT_EQ(overlapped->strategy.find("stream-K"), std::string::npos) << overlapped->strategy;
  EXPECT_NE(overlapped->strategy.find("overlapping"), std::string::npos) << overlapped->strategy;
}

}  // namespace
}  // namespace tilefuse

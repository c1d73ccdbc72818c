// Every template skeleton (codegen/cuda/device/*.cuh) compiles through NVRTC for sm_90a in
// the configurations and element types the rules and the tuner can pick, with no
// local-memory spills and no wgmma waits ptxas would add; and the typed MMA forms no
// skeleton uses yet (tf32, e4m3, a register A) compile too. NVRTC's time per kernel is
// printed: a design that makes each kernel cost seconds is the wrong trade (the target is
// about half a second on the GPU machine's host). Needs NVRTC, not a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "api/backend_setup.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_depthwise_emitter.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/cuda/cuda_template_kernels.h"
#include "codegen/depthwise_template.h"
#include "codegen/gemm_split.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "testing/fp8_linear.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// A compiler with a cache of its own, empty: every compile is timed cold.
StatusOr<NvrtcCompiler> ColdCompiler() {
  std::random_device seed;
  const auto folder = std::filesystem::temp_directory_path() / fmt::format("tilefuse_skeletons_{:x}", seed());
  return NvrtcCompiler::Create(folder.string());
}

// Compiles `kernel` alone, as the backend does (one unit a kernel), and checks ptxas's report.
void CompileAndReport(NvrtcCompiler& nvrtc, const CudaKernelSource& kernel, const std::string& label) {
  SCOPED_TRACE(label);
  const auto start = std::chrono::steady_clock::now();
  StatusOr<CubinResult> cubin = nvrtc.Compile(CudaTranslationUnit({kernel}), "sm_90a");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubin->ptxas_log);
  ASSERT_EQ(report.size(), 1u) << cubin->ptxas_log;
  EXPECT_EQ(report[0].spill_store_bytes + report[0].spill_load_bytes, 0) << report[0].line;
  EXPECT_EQ(cubin->ptxas_log.find("are serialized"), std::string::npos) << cubin->ptxas_log;
  EXPECT_EQ(cubin->ptxas_log.find("warpgroup.wait is injected"), std::string::npos) << cubin->ptxas_log;
  std::printf("  nvrtc %-58s %6.0f ms  %3d registers\n", label.c_str(), ms, report[0].registers);
}

// A one-product graph in ONNX text, named for the report.
struct GemmProblem {
  const char* label;
  std::string signature, body;
  bool tf32 = true;  // f32 products as TF32 (--precision high), else as 3xTF32
};

StatusOr<GemmTemplateKernel> GemmOf(const PlannedText& p, bool tf32 = true) {
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      ASSIGN_OR_RETURN(GemmTemplateKernel gemm,
                       LowerGemmTemplate(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph), tf32));
      gemm.name = "gemm";
      return gemm;
    }
  return NotFound("no gemm group");
}

TEST(TemplateSkeletonsTest, GemmCompilesInEveryFormAndElementType) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  const GemmProblem problems[] = {
      {"bf16 plain", "g (bfloat16[2048,1024] x, bfloat16[1024,4096] w) => (bfloat16[2048,4096] y)", "  y = MatMul (x, w)\n"},
      {"f16 bias+tanh+residual", "g (float16[2048,1024] x, float16[1024,4096] w, float16[4096] b, float16[2048,4096] r) => (float16[2048,4096] y)",
       "  p = MatMul (x, w)\n  s = Add (p, b)\n  t = Tanh (s)\n  y = Add (t, r)\n"},
      {"bf16 16 rows, split-K", "g (bfloat16[16,4096] x, bfloat16[4096,4096] w, bfloat16[4096] b) => (bfloat16[16,4096] y)",
       "  p = MatMul (x, w)\n  y = Add (p, b)\n"},
      {"bf16 B K-major", "g (bfloat16[2048,1024] x, bfloat16[4096,1024] w, bfloat16[2048,4096] r) => (bfloat16[2048,4096] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, r)\n"},
      {"bf16 A MN-major", "g (bfloat16[1024,2048] x, bfloat16[1024,4096] dy, bfloat16[2048,4096] r) => (bfloat16[2048,4096] y)",
       "  xt = Transpose <perm = [1, 0]> (x)\n  p = MatMul (xt, dy)\n  y = Add (p, r)\n"},
      {"bf16 odd N (a vocabulary), B K-major, stored by the threads",
       "g (bfloat16[2048,768] x, bfloat16[50257,768] w) => (bfloat16[2048,50257] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  y = MatMul (x, wt)\n"},
      {"f32 as TF32, B K-major", "g (float[2048,1024] x, float[4096,1024] w, float[2048,4096] r) => (float[2048,4096] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, r)\n"},
      {"f32 as TF32 16 rows, split-K", "g (float[16,4096] x, float[4096,4096] w, float[4096] b) => (float[16,4096] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, b)\n"},
      {"f32 as 3xTF32, B K-major", "g (float[2048,1024] x, float[4096,1024] w, float[2048,4096] r) => (float[2048,4096] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, r)\n", false},
      {"f32 as 3xTF32 64 rows, split-K", "g (float[64,4096] x, float[4096,4096] w, float[4096] b) => (float[64,4096] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, b)\n", false},
  };
  struct Form {
    const char* label;
    CudaGemmConfig config;
  };
  std::vector<Form> forms = {{"rule", {}}};
  CudaGemmConfig form;
  form.pingpong = true;
  form.overlap_epilogue = false;
  forms.push_back({"ping-pong", form});
  form.pingpong = false;
  forms.push_back({"cooperative, epilogue in the tail", form});
  form.overlap_epilogue = true;
  form.block_n = 128;
  forms.push_back({"cooperative 128 wide, epilogue overlapped", form});
  form = {};
  form.cluster_m = 2;
  form.block_n = 256;
  forms.push_back({"clusters of 2", form});
  for (const GemmProblem& problem : problems) {
    const PlannedText planned = PlanOnnxText(problem.signature, problem.body);
    StatusOr<GemmTemplateKernel> gemm = GemmOf(planned, problem.tf32);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    for (const Form& f : forms) {
      StatusOr<CudaKernelSource> source = EmitCudaGemm(*gemm, f.config);
      if (!source.ok()) continue;  // a form this problem cannot take (split-K with overlap, ...)
      CompileAndReport(*nvrtc, *source, fmt::format("gemm {}, {}: {}", problem.label, f.label, source->strategy.substr(0, 24)));
    }
    // The rule's stand-in, where it has one (TemplateKernel::StandIn: a background compile's).
    const std::shared_ptr<const TemplateKernel> templ = MakeGemmTemplate(*gemm, CudaGemmConfig{});
    if (std::optional<nlohmann::json> quick = templ->StandIn({})) {
      StatusOr<CudaKernelSource> source = templ->Emit("gemm", *quick, 132);
      ASSERT_TRUE(source.ok()) << source.status().ToString();
      CompileAndReport(*nvrtc, *source, fmt::format("gemm {}, stand-in: {}", problem.label, source->strategy.substr(0, 24)));
    }
  }
}

// FP8 products (passes/fp8_products.h) in both 8-bit types: promoted sums (the rule),
// the tensor cores' own accumulation, ping-pong consumers, stream-K, and split-K for a few
// rows; K of 8 steps (chains of 4), 6 (GPT-2's 768: chains of 2) and 24 split six ways (128
// rows), where a partial chain serialized the wgmmas.
TEST(TemplateSkeletonsTest, Fp8GemmCompilesInItsFormsAndTypes) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  CudaGemmConfig fast, pingpong, stream_k, overlapped;
  fast.promote = false;
  pingpong.pingpong = true;
  stream_k.stream_k = true;
  overlapped.overlap_epilogue = true;  // promoted f32 sums held (where one unit runs a tile)
  int compiled = 0, held = 0;
  for (DType type : {DType::kF8E4M3, DType::kF8E5M2})
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{4096, 1024}, {64, 1024}, {4096, 768}, {128, 3072}}) {
      if (type == DType::kF8E5M2 && k != 1024) continue;  // the step loop is the type's own only in its MMA
      const PlannedText planned = PlanFp8Linear(rows, k, 2048, type, CudaPassOptions());
      StatusOr<GemmTemplateKernel> gemm = GemmOf(planned);
      ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
      for (const CudaGemmConfig& config : {CudaGemmConfig{}, fast, pingpong, stream_k, overlapped}) {
        StatusOr<CudaKernelSource> source = EmitCudaGemm(*gemm, config);
        if (!source.ok()) continue;  // ping-pong where the rule splits K, stream-K without a partial round
        // (The overlapped form where it applies; the same form as the rule's elsewhere, compiled twice.)
        CompileAndReport(*nvrtc, *source, fmt::format("gemm {} {}x{}: {}", DTypeName(type), rows, k, source->strategy.substr(14, 60)));
        ++compiled;
        held += source->strategy.find("epilogue overlapping") != std::string::npos;
      }
    }
  EXPECT_GE(compiled, 18);
  EXPECT_GE(held, 3);
}

// Products whose output is quantized to an 8-bit float (a cast to e4m3 at the product's
// position): the 8-bit tile staged in shared memory and stored by TMA (64-byte box rows,
// unswizzled), from a bf16 product in the forms the rule and the tuner pick (the overlapped
// epilogue's chunks included) and from an FP8 one (promoted sums, ping-pong, stream-K).
TEST(TemplateSkeletonsTest, EightBitStagedStoresCompileInTheirForms) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  auto plan = [](bool float8, int64_t rows) {
    GraphBuilder b;
    const DType operand = float8 ? DType::kF8E4M3 : DType::kBF16;
    Value x = b.Parameter("x", operand, {rows, 1024});
    Value w = b.Parameter("w", operand, {4096, 1024});
    if (float8) {
      x = b.Mul(b.Cast(x, DType::kF32), b.Scalar(0.5, DType::kF32));
      w = b.Mul(b.Cast(w, DType::kF32), b.Scalar(0.25, DType::kF32));
    }
    Value p = b.MatMul(x, b.Transpose(w, {1, 0}));
    Value scaled = b.Mul(b.Cast(p, DType::kF32), b.Scalar(0.125, DType::kF32));
    b.Output(b.Cast(scaled, DType::kF8E4M3), "q");
    return PlanBuilt(b, CudaPassOptions());
  };
  CudaGemmConfig pingpong, tail, overlapped, stream_k;
  pingpong.pingpong = true;
  tail.overlap_epilogue = false;
  overlapped.overlap_epilogue = true, overlapped.block_n = 128;
  stream_k.stream_k = true;
  int compiled = 0;
  for (bool float8 : {false, true})
    for (int64_t rows : {2048, 32}) {
      StatusOr<GemmTemplateKernel> gemm = GemmOf(plan(float8, rows));
      ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
      ASSERT_EQ(gemm_layout::StagedStoreBytes(*gemm), 1);
      for (const CudaGemmConfig& config : {CudaGemmConfig{}, pingpong, tail, overlapped, stream_k}) {
        StatusOr<CudaKernelSource> source = EmitCudaGemm(*gemm, config);
        if (!source.ok()) continue;  // a form this product cannot take (an FP8 one held for an overlapped epilogue, ...)
        EXPECT_NE(source->strategy.find("TMA store"), std::string::npos) << source->strategy;
        const TensorMapArg& out = source->launch.args[2].map;  // after A's and B's maps
        EXPECT_EQ(source->launch.args[2].kind, LaunchArg::Kind::kTensorMap);
        EXPECT_EQ(out.dtype, DType::kF8E4M3);
        EXPECT_EQ(out.box[0], 64);  // 64 columns: 64-byte rows
        EXPECT_EQ(out.box[1], 64);
        EXPECT_FALSE(out.swizzle_128b);
        CompileAndReport(*nvrtc, *source, fmt::format("8-bit store, {} {} rows: {}", float8 ? "FP8" : "bf16", rows, source->strategy.substr(14, 60)));
        ++compiled;
      }
    }
  EXPECT_GE(compiled, 12);
}

// Block-scaled FP8 products (each K step's sums scaled by A's row and B's column scales of its
// block, TILEFUSE_FP8_BLOCK_SCALES): the rule's form, ping-pong, split-K at few rows, stream-K;
// B's scales per column and shared by 128 columns (DeepGEMM's 128x128 weight blocks).
TEST(TemplateSkeletonsTest, BlockScaledFp8GemmCompilesInItsForms) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  PassOptions passes = CudaPassOptions();
  passes.fp8_block_scales = true;
  CudaGemmConfig pingpong, stream_k, wide;
  pingpong.pingpong = true;
  stream_k.stream_k = true;
  wide.block_m = 128, wide.block_n = 192;
  int compiled = 0;
  for (bool weight_blocks : {false, true})
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{4096, 1024}, {128, 3072}}) {
      const PlannedText planned = PlanFp8Linear(rows, k, 2048, DType::kF8E4M3, passes, /*block_scales=*/true, weight_blocks);
      StatusOr<GemmTemplateKernel> gemm = GemmOf(planned);
      ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
      ASSERT_EQ(gemm->scale_blocks, k / 128);
      ASSERT_EQ(gemm->b_scale_columns, weight_blocks ? 128 : 0);
      for (const CudaGemmConfig& config : {CudaGemmConfig{}, pingpong, stream_k, wide}) {
        StatusOr<CudaKernelSource> source = EmitCudaGemm(*gemm, config);
        if (!source.ok()) continue;  // ping-pong where the rule splits K, stream-K without a partial round, 192 columns of shared scales
        EXPECT_NE(source->strategy.find(weight_blocks ? "B's by 128 columns" : "block scales"), std::string::npos) << source->strategy;
        CompileAndReport(*nvrtc, *source, fmt::format("block-scaled gemm {}x{}: {}", rows, k, source->strategy.substr(14, 60)));
        ++compiled;
      }
    }
  EXPECT_GE(compiled, 11);
}

// The skinny GEMM skeleton: A's rows padded to 16, 48 and 64, B MN-major and K-major, bf16
// and f16, one and two consumers, with and without split-K, the splits through memory and in
// a cluster.
TEST(TemplateSkeletonsTest, SkinnyGemmCompilesInItsShapesAndElementTypes) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  const GemmProblem problems[] = {
      {"bf16 16 rows, bias", "g (bfloat16[16,4096] x, bfloat16[4096,4096] w, bfloat16[4096] b) => (bfloat16[16,4096] y)",
       "  p = MatMul (x, w)\n  y = Add (p, b)\n"},
      {"f16 33 rows, B K-major, residual", "g (float16[33,520] x, float16[776,520] w, float16[33,776] r) => (float16[33,776] y)",
       "  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (x, wt)\n  y = Add (p, r)\n"},
      {"bf16 64 rows, tanh", "g (bfloat16[64,1024] x, bfloat16[1024,4096] w) => (bfloat16[64,4096] y)", "  p = MatMul (x, w)\n  y = Tanh (p)\n"},
  };
  int compiled = 0;
  for (const GemmProblem& problem : problems) {
    const PlannedText planned = PlanOnnxText(problem.signature, problem.body);
    StatusOr<GemmTemplateKernel> gemm = GemmOf(planned);
    ASSERT_TRUE(gemm.ok()) << gemm.status().ToString();
    ASSERT_TRUE(SkinnyGemmFits(*gemm).ok()) << SkinnyGemmFits(*gemm).ToString();
    CudaSkinnyGemmConfig one_split;
    one_split.splits = 1;
    CudaSkinnyGemmConfig narrow;
    narrow.block_n = 64;
    CudaSkinnyGemmConfig in_cluster;  // the splits summed in a cluster's shared memory
    in_cluster.in_cluster = 1;
    for (const CudaSkinnyGemmConfig& config : {CudaSkinnyGemmConfig{}, one_split, narrow, in_cluster}) {
      StatusOr<CudaKernelSource> source = EmitCudaSkinnyGemm(*gemm, config);
      ASSERT_TRUE(source.ok()) << source.status().ToString();
      if (config.in_cluster == 1) EXPECT_GT(source->launch.cluster[0], 1) << source->strategy;
      CompileAndReport(*nvrtc, *source, fmt::format("skinny {}: {}", problem.label, source->strategy.substr(source->strategy.find(": ") + 2, 44)));
      ++compiled;
    }
  }
  EXPECT_EQ(compiled, 12);
}

// The channels-last depthwise convolutions of tests/conv in their element types, with the
// rule's thread shape and others the tuner may take.
TEST(TemplateSkeletonsTest, DepthwiseCompilesInItsShapesAndElementTypes) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  int compiled = 0;
  for (const char* model : {"convnext_dw_bf16", "depthwise_nhwc_c40_f16"}) {
    auto imported = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/conv/" + model + ".onnxtxt");
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    PassOptions passes;
    passes.channels_last = true;
    auto graph = RunGraphPasses(std::move(imported->graph), passes);
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto plan = PlanFusion(*graph, {});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    for (const FusionGroup& group : plan->groups) {
      StatusOr<DepthwiseTemplateKernel> dw = LowerDepthwiseTemplate(*graph, group, FindInlinedGenerators(*graph));
      if (!dw.ok()) continue;
      dw->name = dw->epilogue.name = "depthwise";
      for (auto [vector, pixels] : {std::pair{0, 0}, std::pair{2, 8}, std::pair{8, 2}}) {
        CudaDepthwiseConfig config;
        config.vector = vector;
        config.pixels = pixels;
        StatusOr<CudaKernelSource> source = EmitCudaDepthwise(*dw, ResolveDepthwiseConfig(*dw, config));
        if (!source.ok()) continue;  // 8 channels a thread where C is not a multiple of 8
        CompileAndReport(*nvrtc, *source, fmt::format("{} {}", model, source->strategy));
        ++compiled;
      }
    }
  }
  EXPECT_GE(compiled, 5);
}

// The attention groups of tests/attention (head dims 64 and 128, bf16 and f16, masks) with the
// template's loops (ping-pong, overlap, serial) and consumer counts.
TEST(TemplateSkeletonsTest, AttentionCompilesInItsLoopsAndHeadDims) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  int compiled = 0, stand_ins = 0;
  for (const char* model : {"attention_causal_d128_bf16", "attention_ragged_d64_bf16", "attention_additive_mask_f16"}) {
    auto imported = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/attention/" + model + ".onnxtxt");
    ASSERT_TRUE(imported.ok()) << imported.status().ToString();
    auto graph = RunGraphPasses(std::move(imported->graph), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    for (AttentionPath loop : {AttentionPath::kTemplate, AttentionPath::kOverlap, AttentionPath::kSerial}) {
      CudaTarget target;
      target.attention = loop;
      target.stand_ins = true;  // and their stand-ins (TemplateKernel::StandIn), where they have one
      auto plan = PlanFusionForCuda(*graph, {}, target);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
      ASSERT_TRUE(program.ok()) << program.status().ToString();
      for (const CudaGroupProgram& g : program->groups)
        if (g.mode == CudaGroupProgram::Mode::kAttentionTemplate && g.kernel) {
          CompileAndReport(*nvrtc, g.kernel->source, fmt::format("{} {}", model, g.kernel->source.strategy.substr(0, 40)));
          ++compiled;
          if (g.kernel->stand_in) {
            CompileAndReport(*nvrtc, g.kernel->stand_in->source, fmt::format("{} stand-in: {}", model, g.kernel->stand_in->source.strategy.substr(0, 40)));
            ++stand_ins;
          }
        }
    }
  }
  EXPECT_GE(compiled, 6);
  EXPECT_GE(stand_ins, 4) << "the ping-pong and overlap loops have a serial stand-in";
}

// The MMA forms of tile_mma.cuh at the extremes of N: tf32, e4m3 and e5m2 from shared
// memory (both operands K-major), f16 and tf32 (3xTF32's A) with A from registers, at the
// narrowest and widest N.
TEST(TemplateSkeletonsTest, TypedMmaFormsCompileForEveryElementType) {
  StatusOr<NvrtcCompiler> nvrtc = ColdCompiler();
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, skeletons not compiled: " << nvrtc.status().ToString();
  CudaKernelSource kernel;
  kernel.name = "typed_mma";
  kernel.includes = {"tile_mma.cuh"};
  kernel.function = R"(
extern "C" __global__ void __launch_bounds__(128, 1) typed_mma(float* out, unsigned long long a, unsigned long long b, unsigned x) {
  float wide[128] = {}, narrow[8] = {};
  Mma<Tf32>::Shared<256, false>(wide, a, b, 0);
  Mma<E4m3>::Shared<256, false>(wide, a, b, 1);
  Mma<E5m2>::Shared<256, false>(wide, a, b, 1);
  Mma<Bf16>::Shared<16, true>(narrow, a, b, 1);
  const unsigned fragment[4] = {x, x + 1, x + 2, x + 3};
  Mma<F16>::Registers<16, false>(narrow, fragment, b, 1);
  Mma<Tf32>::Registers<16, false>(narrow, fragment, b, 1);
  Mma<Tf32>::Registers<256, false>(wide, fragment, b, 1);
  Warpgroup::Commit();
  Warpgroup::Wait<0>();
  for (int i = 0; i < 128; ++i) out[threadIdx.x * 136 + i] = wide[i];
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 136 + 128 + i] = narrow[i];
}
)";
  CompileAndReport(*nvrtc, kernel, "tile_mma.cuh: tf32, e4m3, e5m2, bf16 and f16 forms, f16 and tf32 from registers");
}

}  // namespace
}  // namespace tilefuse

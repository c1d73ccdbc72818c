// Every kernel the CUDA backend generates for the examples, the real models and the
// benchmark cases — fused and unfused — must compile through NVRTC for sm_90a with no
// local-memory spills. Needs NVRTC (the CUDA toolkit), not a GPU.
#include "backend/cuda/cuda_program.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include <fmt/format.h>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "api/backend_setup.h"
#include "codegen/cuda/cuda_gemm_search_space.h"
#include "codegen/kernel_fingerprint.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

std::string TestCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

void CompileForHopper(const std::string& path, bool fuse, AttentionPath attention = AttentionPath::kTemplate, bool channels_last = true,
                      const TemplateOverrides& overrides = {}) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  auto model = ImportOnnx(path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PassOptions passes;
  passes.channels_last = channels_last;  // as the CUDA backend passes graphs (TILEFUSE_CHANNELS_LAST=0: NCHW)
  passes.fp8_products = true;            // and its FP8 products, their weights K-major
  passes.int8_products = true;           // and its int8 ones
  passes.k_major_weights.eight_bit = true;
  auto graph = RunGraphPasses(std::move(model->graph), passes);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  PlannerOptions planner;
  planner.fuse = fuse;
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;  // every gemm group the template takes, small ones too
  target.attention = attention;
  target.overrides = overrides;
  auto plan = PlanFusionForCuda(*graph, planner, target);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  size_t generated = 0;
  for (const CudaGroupProgram& g : program->groups) {
    EXPECT_NE(g.mode, CudaGroupProgram::Mode::kHost) << path << " group " << g.group << " runs on the host: " << g.why_host;
    generated += (g.kernel ? 1 : 0) + g.prologue.size();
  }
  if (generated == 0) return;
  // As the backend builds: a unit per distinct kernel, ptxas's report under every kernel's name.
  std::vector<CudaKernelSource> sources;
  for (const CudaGroupProgram& g : program->groups)
    for (const CudaLaunchable* k : Launchables(g)) sources.push_back(k->source);
  // Each may be launched programmatically, before the kernel ahead of it has finished: its
  // first statement waits for that kernel, or the GEMM skeleton it calls does (its producer
  // after loading B's first tiles where B is a weight; the skinny chain's after both weights'),
  // or the decode attention's does after
  // its hooks' definitions and at most its L2 prefetch (which reads no value).
  for (const CudaKernelSource& s : sources) {
    EXPECT_TRUE(s.launch.awaits_prior_grid) << path << ": " << s.name;
    if (s.function.find("tf::GemmSm90<") != std::string::npos || s.function.find("tf::GemmSkinnySm90<") != std::string::npos ||
        s.function.find("tf::GemmSkinnyChainSm90<") != std::string::npos)
      continue;
    if (const size_t decode = s.function.find("  tf::AttentionDecode<Config>("); decode != std::string::npos) {
      const size_t hooks_end = s.function.rfind("  };\n", decode) + 5;
      const std::string between = s.function.substr(hooks_end, decode - hooks_end);
      const std::string prefetch = "  tf::AttentionDecodePrefetch<Config>(";
      const bool prefetch_then_wait = between.rfind(prefetch, 0) == 0 && between.find('\n') + 1 == between.size() - std::strlen(kAwaitPriorGrid) &&
                                      between.ends_with(kAwaitPriorGrid);
      EXPECT_TRUE(between == kAwaitPriorGrid || prefetch_then_wait) << path << ": after the hooks, before the work:\n" << between;
      continue;
    }
    const size_t body = s.function.find("{\n", s.function.find("__global__"));
    EXPECT_EQ(s.function.substr(body + 2, std::strlen(kAwaitPriorGrid)), kAwaitPriorGrid) << path << ": " << s.function.substr(0, 400);
  }
  auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(sources), "sm_90a");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
  const std::string log = cubins->PtxasLog();
  std::vector<PtxasKernelInfo> report = ParsePtxasLog(log);
  EXPECT_EQ(report.size(), generated) << log;
  // Without registers for the wgmma pipeline ptxas waits for each wgmma before the next
  // (warning C7511): no spill, but the tensor cores idle. Seen once, 2026-11-25, in an
  // attention variant at 168 registers a thread.
  EXPECT_EQ(log.find("are serialized"), std::string::npos) << path << ": ptxas serialized wgmma instructions:\n" << log;
  // Nor may it wait for a wgmma group where the code did not (info C7517: registers the
  // wgmma writes read early): the GEMM template's overlapped epilogue had one on its loop exit.
  EXPECT_EQ(log.find("warpgroup.wait is injected"), std::string::npos) << path << ": ptxas waits for wgmma the code did not:\n" << log;
  for (const PtxasKernelInfo& k : report) {
    EXPECT_EQ(k.spill_store_bytes, 0) << path << ": " << k.name << " spills: " << k.line;
    EXPECT_EQ(k.spill_load_bytes, 0) << path << ": " << k.name << " spills: " << k.line;
  }
}

std::vector<std::string> Models() {
  std::vector<std::string> paths;
  std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* folder : {"/examples", "/bench/cases", "/tests/gemm", "/tests/attention", "/tests/conv", "/tests/pointwise"})
    if (std::filesystem::exists(root + folder))
      for (const auto& e : std::filesystem::directory_iterator(root + folder))
        if (e.path().extension() == ".onnxtxt") paths.push_back(e.path().string());
  // The FP8 graphs are binary ONNX (the text parser has no 8-bit float types).
  for (const char* folder : {"/tests/gemm", "/bench/cases/fp8"})
    for (const auto& e : std::filesystem::directory_iterator(root + folder))
      if (e.path().extension() == ".onnx") paths.push_back(e.path().string());
  for (const char* m : {"mlp_block", "attention_block", "gpt2_2layer", "llama_2layer"}) paths.push_back(root + "/tests/models/" + m);
  for (const auto& e : std::filesystem::directory_iterator(root + "/tests/attention/exports"))
    if (e.path().extension() == ".onnx") paths.push_back(e.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

class CudaProgramTest : public testing::TestWithParam<std::string> {};

TEST_P(CudaProgramTest, FusedKernelsCompileForSm90aWithoutSpills) { CompileForHopper(GetParam(), true); }
TEST_P(CudaProgramTest, UnfusedKernelsCompileForSm90aWithoutSpills) { CompileForHopper(GetParam(), false); }
TEST_P(CudaProgramTest, FusedNchwKernelsCompileForSm90aWithoutSpills) {
  CompileForHopper(GetParam(), true, AttentionPath::kTemplate, /*channels_last=*/false);
}


INSTANTIATE_TEST_SUITE_P(Models, CudaProgramTest, testing::ValuesIn(Models()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::filesystem::path path(info.param);
                           std::string folder = path.parent_path().filename().string();
                           std::string kind = folder == "exports"             ? "export_"
                                              : path.extension() != ".onnxtxt" ? "model_"
                                              : folder == "cases"              ? "case_"
                                              : folder == "gemm"               ? "gemm_"
                                              : folder == "attention"          ? "attention_"
                                                                               : "example_";
                           std::string name = kind + path.stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The rule overlaps residual epilogues (their residual through a ring of its own). Their
// other forms, the tuner's and the GPU script's: with --gemm-form tail the epilogue in the
// main loop's tail, the residual staged by TMA, and with --gemm-form pingpong on ping-pong
// tiles; those kernels too compile without spills or wgmma waits ptxas adds.
TEST(CudaGemmOverlapTest, ResidualEpiloguesInTheTailAndOnPingPongTilesCompileForSm90aWithoutSpills) {
  const std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* form : {"tail", "pingpong"}) {
    TemplateOverrides overrides;
    ASSERT_TRUE(ApplyTemplateWords(form, 0, "on", overrides).ok());
    for (const char* model : {"/bench/cases/gemm_residual_bf16_16384x4096x1024.onnxtxt", "/bench/cases/mlp_block_bf16_8x2048x1024.onnxtxt",
                              "/tests/gemm/gemm_overlap_residual_ragged_bf16.onnxtxt", "/tests/gemm/gemm_residual_many_tiles_bf16.onnxtxt"}) {
      SCOPED_TRACE(std::string("--gemm-form ") + form + " " + model);
      CompileForHopper(root + model, true, AttentionPath::kTemplate, true, overrides);
    }
  }
}

// How many of a model's GEMM template kernels under `overrides` (every gemm group on the
// template) `which` holds for; -1 where the program is not built.
int CountGemmTemplates(const std::string& path, const TemplateOverrides& overrides, const std::function<bool(const CudaKernelSource&)>& which) {
  auto imported = ImportOnnx(path);
  if (!imported.ok()) return -1;
  auto graph = RunGraphPasses(std::move(imported->graph), PassOptions{});
  if (!graph.ok()) return -1;
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;
  target.overrides = overrides;
  auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
  if (!plan.ok()) return -1;
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  if (!program.ok()) return -1;
  int count = 0;
  for (const CudaGroupProgram& g : program->groups)
    if (g.mode == CudaGroupProgram::Mode::kGemmTemplate && which(g.kernel->source)) ++count;
  return count;
}

// With --gemm-form streamk (the tuner's other form), the tiles of a partial last round are
// shared by the SMs as a run of K steps wherever there is such a round: the products of the
// residual, MLP and GPT blocks and of a ragged residual compile without spills, and some
// kernel of each streams K.
TEST(CudaGemmStreamKTest, StreamKFormsCompileForSm90aWithoutSpills) {
  TemplateOverrides overrides;
  ASSERT_TRUE(ApplyTemplateWords("streamk", 0, "on", overrides).ok());
  EXPECT_TRUE(overrides.gemm_stream_k.value_or(false));
  EXPECT_FALSE(overrides.gemm_overlap_epilogue.value_or(true)) << "stream-K runs the epilogue in the tail";
  EXPECT_FALSE(overrides.gemm_skinny) << "the GEMM template's form, not the skinny template";
  TemplateOverrides tail;
  ASSERT_TRUE(ApplyTemplateWords("tail", 0, "on", tail).ok());
  EXPECT_FALSE(tail.gemm_stream_k.value_or(true)) << "tail: whole tiles";
  const Status unknown = ApplyTemplateWords("streamK", 0, "on", tail);
  EXPECT_NE(unknown.message().find("rule, tail, overlap, pingpong, streamk, skinny"), std::string::npos) << unknown.ToString();
  const std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* model : {"/bench/cases/gemm_residual_bf16_16384x4096x1024.onnxtxt", "/bench/cases/mlp_block_bf16_8x2048x1024.onnxtxt",
                            "/tests/gemm/gemm_192_residual_ragged_bf16.onnxtxt", "/tests/gemm/gemm_3xtf32_many_tiles_f32.onnxtxt"}) {
    SCOPED_TRACE(model);
    CompileForHopper(root + model, true, AttentionPath::kTemplate, true, overrides);
    EXPECT_GE(CountGemmTemplates(root + model, overrides,
                                 [](const CudaKernelSource& k) { return k.strategy.find("stream-K") != std::string::npos; }),
              1);
  }
}

// With --gemm-cluster 2 (the tuner's other choice), clusters of two CTAs share B tiles
// wherever they fit: overlapped epilogues, the residual's ring included, and the blocks' GEMMs
// compile without spills, and some kernel of each model is paired.
TEST(CudaGemmClusterTest, ClustersSharingBCompileForSm90aWithoutSpills) {
  TemplateOverrides overrides;
  overrides.gemm_cluster_m = 2;
  const std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* model : {"/bench/cases/gemm_residual_bf16_16384x4096x1024.onnxtxt", "/bench/cases/gemm_bias_gelu_bf16_16384x4096x1024.onnxtxt",
                            "/bench/cases/mlp_block_bf16_8x2048x1024.onnxtxt", "/tests/gemm/gemm_cluster_ragged_bf16.onnxtxt"}) {
    SCOPED_TRACE(model);
    CompileForHopper(root + model, true, AttentionPath::kTemplate, true, overrides);
    EXPECT_GE(CountGemmTemplates(root + model, overrides, [](const CudaKernelSource& k) { return k.launch.cluster[0] == 2; }), 1);
  }
}

// Attention as transformers' GPT-2, BERT and LLaMA have it, exported by both torch.onnx
// exporters (tests/attention/exports/export.py): each is one attention group the template
// takes, causal ones with their masked key blocks proven.
TEST(CudaAttentionExportsTest, RealExportsTakeTheAttentionTemplate) {
  for (const char* name : {"gpt2_legacy", "gpt2_dynamo", "bert_legacy", "bert_dynamo", "llama_legacy", "llama_dynamo"}) {
    SCOPED_TRACE(name);
    auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/attention/exports/" + name + "_bf16.onnx");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, CudaTarget{});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_TRUE(plan->split_attention.empty()) << plan->split_attention.front();
    EXPECT_TRUE(plan->plan.missed_attention.empty()) << plan->plan.missed_attention.front();
    auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph));
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    int templates = 0;
    bool skips = false;
    for (const CudaGroupProgram& g : program->groups)
      if (g.mode == CudaGroupProgram::Mode::kAttentionTemplate) {
        ++templates;
        skips = g.kernel->source.strategy.find("masked key blocks skipped") != std::string::npos;
      }
    EXPECT_EQ(templates, 1);
    EXPECT_EQ(skips, std::string(name).find("bert") == std::string::npos) << "causal models skip blocks, BERT does not";
  }
}

// Depthwise convolutions over NHWC with constant weights take the direct template: the
// ConvNeXt 7x7 (stride 1, its residual and ReLU in the epilogue) and the MobileNet 3x3
// (stride 2); the taps' sum is never a kernel parameter. NCHW depthwise convolutions and
// weights computed in the group keep the loop templates.
TEST(CudaDepthwiseTest, ChannelsLastDepthwiseConvolutionsTakeTheDirectTemplate) {
  auto strategies = [](const char* file, bool channels_last) {
    auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/conv/" + file);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    PassOptions passes;
    passes.channels_last = channels_last;
    auto graph = RunGraphPasses(std::move(model->graph), passes);
    EXPECT_TRUE(graph.ok()) << graph.status().ToString();
    auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, CudaTarget{});
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph));
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    std::vector<std::string> out;
    for (const CudaGroupProgram& g : program->groups)
      for (const CudaLaunchable* k : Launchables(g))
        if (k->source.strategy.starts_with("depthwise direct")) {
          out.push_back(k->source.strategy);
          for (int node : k->buffer_nodes) {  // the sum adds products of taps and weights
            const Node& n = graph->node(node);
            EXPECT_FALSE(n.op == OpCode::kAdd && graph->node(n.inputs[1]).op == OpCode::kMul) << "the taps' sum is passed: %" << node;
          }
        }
    return out;
  };
  EXPECT_EQ(strategies("convnext_dw_bf16.onnxtxt", true),
            (std::vector<std::string>{"depthwise direct 7x7 taps, 4 channels x 4 pixels a thread",
                                      "depthwise direct 3x3 taps, 4 channels x 4 pixels a thread"}));
  EXPECT_EQ(strategies("depthwise_nhwc_c40_f16.onnxtxt", true),
            (std::vector<std::string>{"depthwise direct 5x5 taps, 4 channels x 4 pixels a thread"}));
  EXPECT_TRUE(strategies("convnext_dw_bf16.onnxtxt", false).empty());
  EXPECT_TRUE(strategies("depthwise_hardswish_f16.onnxtxt", true).empty());  // its weights are graph inputs
}

// The attention template's other main loops (without ping-pong; serial), on tests/attention.
std::vector<std::string> AttentionTests() {
  std::vector<std::string> paths;
  for (const std::string& p : Models())
    if (p.find("/tests/attention/") != std::string::npos) paths.push_back(p);
  return paths;
}

// A benchmark case through the graph passes.
Graph PassedCase(const std::string& file) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/bench/cases/" + file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return *graph;
}

// Under --gemm auto a bias + GELU product with tiles enough to fill the GPU goes to the
// template (noting that cuBLASLt's own epilogue would fuse it too, for the tuner), a
// decode-like one to cuBLASLt's own epilogue (one call, no epilogue kernel); the tuner's
// measured path for a matmul overrides either.
TEST(CudaProgramGemmPathTest, TemplateByRuleLibraryEpilogueForFewTilesMeasuredPathWins) {
  for (const char* file : {"gemm_bias_gelu_bf16_4096.onnxtxt", "gemm_bias_bf16_16x4096x4096.onnxtxt"}) {
    SCOPED_TRACE(file);
    const bool few_tiles = std::string(file).find("16x4096") != std::string::npos;
    const Graph graph = PassedCase(file);
    CudaTarget target;
    target.overrides.gemm_skinny = false;  // the GEMM template's own rule (the skinny one's: below)
    auto plan = PlanFusionForCuda(graph, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok());
    auto rule = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
    ASSERT_TRUE(rule.ok());
    ASSERT_EQ(rule->groups.size(), 1u);
    const CudaGroupProgram& by_rule = rule->groups[0];
    const LtEpilogue lt = few_tiles ? LtEpilogue::kBias : LtEpilogue::kBiasGelu;
    if (few_tiles) {
      EXPECT_EQ(by_rule.mode, CudaGroupProgram::Mode::kGemm);
      EXPECT_EQ(by_rule.lt_epilogue, lt);
      EXPECT_FALSE(by_rule.kernel.has_value());  // no epilogue kernel
      EXPECT_EQ(by_rule.lt_output, graph.outputs()[0].node);
      EXPECT_EQ(by_rule.why_library.rfind(kLibraryEpilogueRule, 0), 0u) << by_rule.why_library;
    } else {
      EXPECT_EQ(by_rule.mode, CudaGroupProgram::Mode::kGemmTemplate);
      ASSERT_TRUE(by_rule.library_alternative.has_value());
      EXPECT_EQ(*by_rule.library_alternative, lt);
    }
    const int matmul = by_rule.matmul;
    target.gemm_path_at[matmul] = GemmPath::kTemplate;
    auto on_template = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
    ASSERT_TRUE(on_template.ok());
    EXPECT_EQ(on_template->groups[0].mode, CudaGroupProgram::Mode::kGemmTemplate);
    EXPECT_FALSE(on_template->groups[0].library_alternative.has_value()) << "measured, not the rule's choice";
    target.gemm_path_at[matmul] = GemmPath::kLibrary;
    auto on_library = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
    ASSERT_TRUE(on_library.ok());
    EXPECT_EQ(on_library->groups[0].mode, CudaGroupProgram::Mode::kGemm);
    EXPECT_EQ(on_library->groups[0].lt_epilogue, lt);
  }
}

// A product of at most 64 rows goes to the skinny GEMM template by rule, cuBLASLt's fused
// epilogue kept as the measured alternative; a form of the GEMM template asked for
// (--gemm-form tail) takes it back to that template's rule (cuBLASLt for few tiles).
TEST(CudaProgramGemmPathTest, FewRowsGoToTheSkinnyTemplate) {
  const Graph graph = PassedCase("gemm_bias_bf16_16x4096x4096.onnxtxt");
  CudaTarget target;
  auto plan = PlanFusionForCuda(graph, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok());
  auto rule = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(rule.ok());
  ASSERT_EQ(rule->groups.size(), 1u);
  const CudaGroupProgram& p = rule->groups[0];
  ASSERT_EQ(p.mode, CudaGroupProgram::Mode::kGemmTemplate);
  ASSERT_TRUE(p.kernel.has_value());
  EXPECT_EQ(p.kernel->template_kernel->Kind(), "skinny gemm template");
  EXPECT_EQ(p.kernel->source.strategy.rfind("skinny gemm template", 0), 0u) << p.kernel->source.strategy;
  // Its splits summed in a cluster (64 tiles x 2 splits: 32 steps of 64 columns an SM, as 128
  // columns x 4 splits through memory streams).
  EXPECT_NE(p.kernel->source.strategy.find("16 rows padded to 16, 64 columns a unit, split-K x2 summed in a cluster"), std::string::npos)
      << p.kernel->source.strategy;
  ASSERT_TRUE(p.library_alternative.has_value());
  EXPECT_EQ(*p.library_alternative, LtEpilogue::kBias);
  // The tuner's space: the rule's first, then other widths and splits, each a kernel.
  const std::vector<nlohmann::json> space = p.kernel->template_kernel->SearchSpace(132);
  ASSERT_GE(space.size(), 3u);
  for (const nlohmann::json& config : space) EXPECT_TRUE(p.kernel->template_kernel->Emit("k", config, 132).ok()) << config.dump();

  target.overrides.skinny_clusters = false;  // TILEFUSE_SKINNY_CLUSTERS=0: the splits through memory
  auto memory = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(memory.ok());
  EXPECT_NE(memory->groups[0].kernel->source.strategy.find("16 rows padded to 16, 128 columns a unit, split-K x4,"), std::string::npos)
      << memory->groups[0].kernel->source.strategy;

  target.overrides.gemm_skinny = false;
  auto wide = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(wide.ok());
  EXPECT_EQ(wide->groups[0].mode, CudaGroupProgram::Mode::kGemm);  // cuBLASLt by the GEMM template's rule
}

// Past kSkinnyOverLibraryRows, a product cuBLASLt fuses whole goes to cuBLASLt by rule (it was
// faster at 64 rows); one it does not fuse (a residual) stays on the skinny template.
TEST(CudaProgramGemmPathTest, SixtyFourRowsGoToCuBlasLtWhereItFusesTheEpilogue) {
  const Graph graph = PassedCase("gemm_bf16_64x4096x4096.onnxtxt");
  CudaTarget target;
  auto plan = PlanFusionForCuda(graph, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok());
  auto rule = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->groups[0].mode, CudaGroupProgram::Mode::kGemm);
  EXPECT_EQ(rule->groups[0].why_library.rfind(kLibraryEpilogueRule, 0), 0u) << rule->groups[0].why_library;

  auto residual = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/gemm_skinny_b_transposed_residual_f16.onnxtxt");
  ASSERT_TRUE(residual.ok());
  auto passed = RunGraphPasses(std::move(residual->graph), PassOptions{});
  ASSERT_TRUE(passed.ok());
  auto residual_plan = PlanFusionForCuda(*passed, PlannerOptions{}, target);
  ASSERT_TRUE(residual_plan.ok());
  auto on_skinny = BuildCudaProgram(*passed, residual_plan->plan, FindInlinedGenerators(*passed), "", {}, target);
  ASSERT_TRUE(on_skinny.ok());
  const CudaGroupProgram& gemm = on_skinny->groups.back();
  ASSERT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemmTemplate);
  EXPECT_EQ(gemm.kernel->template_kernel->Kind(), "skinny gemm template");
}

// f32 products of few tiles under --precision highest: a batch-1 transformer's (100 rows) on the
// 3xTF32 template's few-tile forms, a decode step's (8 rows) on cuBLASLt's f32, said why.
// A graph's CUDA program, the graph through the default passes and the planner.
StatusOr<CudaProgram> ProgramOfGraph(StatusOr<Graph> built, const CudaTarget& target) {
  if (!built.ok()) return built.status();
  ASSIGN_OR_RETURN(Graph graph, RunGraphPasses(std::move(*built), PassOptions{}));
  ASSIGN_OR_RETURN(CudaPlan plan, PlanFusionForCuda(graph, PlannerOptions{}, target));
  return BuildCudaProgram(graph, plan.plan, FindInlinedGenerators(graph), "", {}, target);
}

// An imported model's CUDA program.
StatusOr<CudaProgram> ProgramOfModel(StatusOr<ImportedModel> model, const CudaTarget& target) {
  if (!model.ok()) return model.status();
  return ProgramOfGraph(std::move(model->graph), target);
}

TEST(CudaProgramGemmPathTest, Exact3xTf32OfFewTilesOnTheTemplateADecodeStepOnCuBlasLt) {
  CudaTarget target;
  for (const char* file : {"gemm_3xtf32_small_m_splitk_bias_residual_f32.onnxtxt", "gemm_3xtf32_decode_rows_residual_f32.onnxtxt"}) {
    SCOPED_TRACE(file);
    auto program = ProgramOfModel(ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/" + file), target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    const CudaGroupProgram& gemm = program->groups.back();
    if (std::string(file).find("decode") == std::string::npos) {
      ASSERT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemmTemplate);
      EXPECT_NE(gemm.kernel->source.strategy.find("3xTF32"), std::string::npos) << gemm.kernel->source.strategy;
      EXPECT_NE(gemm.kernel->source.strategy.find("64x64x32"), std::string::npos) << gemm.kernel->source.strategy;
    } else {
      EXPECT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemm);
      EXPECT_NE(gemm.why_library.find("decode step"), std::string::npos) << gemm.why_library;
    }
  }
}

// TF32 with a bias alone goes to cuBLASLt's own epilogue by rule, but not where cuBLASLt would
// need copies the template does without: a weight given [N][K] (transposed in the graph) and A
// as merged heads; with both as plain matrices in memory, to cuBLASLt.
TEST(CudaProgramGemmPathTest, Tf32BiasGoesToCuBlasLtOnlyWithoutCopies) {
  CudaTarget target;
  target.tf32 = true;
  for (const char* text : {
           "g (float[2,4,256,64] heads, float[192,256] w, float[192] b) => (float[512,192] y)\n"
           "{\n  t = Transpose <perm = [0, 2, 1, 3]> (heads)\n  shape = Constant <value = int64[2] {512, 256}> ()\n"
           "  a = Reshape (t, shape)\n  wt = Transpose <perm = [1, 0]> (w)\n  p = MatMul (a, wt)\n  y = Add (p, b)\n}\n",
           "g (float[512,256] a, float[256,192] w, float[192] b) => (float[512,192] y)\n{\n  p = MatMul (a, w)\n  y = Add (p, b)\n}\n"}) {
    const bool copies = std::string(text).find("heads") != std::string::npos;
    SCOPED_TRACE(copies ? "copies" : "plain");
    auto program = ProgramOfModel(ImportOnnxText(std::string("<\n  ir_version: 8,\n  opset_import: [\"\" : 17]\n>\n") + text), target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    const CudaGroupProgram& gemm = program->groups.back();
    if (copies) {
      ASSERT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemmTemplate) << gemm.why_library;
      EXPECT_TRUE(gemm.prologue.empty()) << "A and B read where they lie";
      EXPECT_NE(gemm.kernel->source.strategy.find("TF32"), std::string::npos);
    } else {
      EXPECT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemm) << "B as [K][N]: TF32 reads B K-major only, cuBLASLt takes it";
      EXPECT_EQ(gemm.lt_epilogue, LtEpilogue::kBias);
    }
  }
}

// f32 attention as its parts: cuBLASLt reads q, kᵀ and v where they lie in the QKV output
// ([80, 384]: 2 heads of 64 for each of q, k and v), no prologue copies; with
// TILEFUSE_LT_VIEWS's switch off, three copies.
TEST(CudaProgramGemmPathTest, CuBlasLtReadsAttentionsOperandsThroughTheirViews) {
  for (bool views : {true, false}) {
    SCOPED_TRACE(views ? "views" : "copies");
    CudaTarget target;
    target.overrides.lt_views = views;
    auto program = ProgramOfModel(ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/bmm_attention_views_f32.onnxtxt"), target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<const CudaGroupProgram*> products;
    size_t prologues = 0;
    for (const CudaGroupProgram& p : program->groups)
      if (p.mode == CudaGroupProgram::Mode::kGemm) {
        products.push_back(&p);
        prologues += p.prologue.size();
      }
    ASSERT_EQ(products.size(), 2u);
    if (!views) {
      EXPECT_EQ(prologues, 3u);
      EXPECT_FALSE(products[0]->lt_a || products[0]->lt_b || products[1]->lt_b);
      continue;
    }
    EXPECT_EQ(prologues, 0u);
    const CudaGroupProgram& scores = *products[0];  // q · kᵀ
    ASSERT_TRUE(scores.lt_a && scores.lt_b);
    EXPECT_FALSE(scores.lt_a->transposed);
    EXPECT_EQ(scores.lt_a->offset, 0);
    EXPECT_EQ(scores.lt_a->row_stride, 384);
    EXPECT_EQ(scores.lt_a->batch_stride, 64);
    EXPECT_TRUE(scores.lt_b->transposed);  // kᵀ: k's rows are its columns
    EXPECT_EQ(scores.lt_b->offset, 128);
    EXPECT_EQ(scores.lt_b->row_stride, 384);
    EXPECT_EQ(scores.lt_b->node, scores.lt_a->node);  // the QKV output itself
    const CudaGroupProgram& mixed = *products[1];  // p · v
    EXPECT_FALSE(mixed.lt_a.has_value());            // p is a plain matrix
    ASSERT_TRUE(mixed.lt_b.has_value());
    EXPECT_FALSE(mixed.lt_b->transposed);
    EXPECT_EQ(mixed.lt_b->offset, 256);
    EXPECT_EQ(mixed.lt_b->batch_stride, 64);
  }
}

// A weight's gradient (dWᵀ = dYᵀ·X: 256 x 768 from 4096 rows, dY read MN-major) splits K on
// the template as a decode-like product does, but is not one: it stays on the template, split
// (cuBLASLt took 94-168 µs for it in a LLaMA-style training step, H200, 2026-11-30).
TEST(CudaProgramGemmPathTest, AWeightGradientSplitsKOnTheTemplate) {
  GraphBuilder b;
  Value dy = b.Parameter("dy", DType::kBF16, {4096, 256});
  Value x = b.Parameter("x", DType::kBF16, {4096, 768});
  b.Output(b.MatMul(b.Transpose(dy, {1, 0}), x), "dw");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CudaTarget target;
  auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok());
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  const CudaGroupProgram& gemm = program->groups.back();
  ASSERT_EQ(gemm.mode, CudaGroupProgram::Mode::kGemmTemplate) << gemm.why_library;
  EXPECT_NE(gemm.kernel->source.strategy.find("split-K"), std::string::npos) << gemm.kernel->source.strategy;
}

// A product the tuner sent to cuBLASLt keeps its bias + ReLU epilogue in its group:
// cuBLASLt fuses it on that path too, so the planner's capabilities must say so (they did
// not, and the tuned plan split the epilogue off: 194 -> 292 us on an H100).
TEST(CudaProgramGemmPathTest, LibraryPathKeepsTheEpilogueCuBlasLtFuses) {
  const Graph graph = PassedCase("gemm_bias_relu_bf16_16384x4096x1024.onnxtxt");
  CudaTarget target;
  auto rule = PlanFusionForCuda(graph, PlannerOptions{}, target);
  ASSERT_TRUE(rule.ok());
  ASSERT_EQ(rule->plan.groups.size(), 1u);
  for (int id : rule->plan.groups[0].nodes)
    if (graph.node(id).op == OpCode::kMatMul) target.gemm_path_at[id] = GemmPath::kLibrary;
  ASSERT_EQ(target.gemm_path_at.size(), 1u);
  auto library = PlanFusionForCuda(graph, PlannerOptions{}, target);
  ASSERT_TRUE(library.ok());
  EXPECT_EQ(library->plan.groups.size(), 1u) << "the epilogue left the gemm group";
}

// A configuration the tuner measured for a GEMM template problem (keyed by its
// fingerprint) is the one emitted; another problem keeps the rule's.
TEST(CudaProgramGemmPathTest, TunedGemmConfigurationIsEmitted) {
  const Graph graph = PassedCase("gemm_residual_bf16_4096.onnxtxt");
  CudaTarget target;
  auto plan = PlanFusionForCuda(graph, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok());
  auto rule = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(rule.ok());
  ASSERT_EQ(rule->groups[0].mode, CudaGroupProgram::Mode::kGemmTemplate);
  const CudaLaunchable& by_rule = *rule->groups[0].kernel;
  ASSERT_NE(by_rule.template_kernel, nullptr);
  EXPECT_EQ(by_rule.template_kernel->Kind(), "gemm template");
  EXPECT_EQ(by_rule.source.strategy.find("3 stages, ping-pong"), std::string::npos) << by_rule.source.strategy;
  CudaGemmConfig tuned;
  tuned.pingpong = true;
  tuned.block_n = 128;
  tuned.stages = 3;
  target.template_configs["another problem"] = nlohmann::json::object();
  target.template_configs[by_rule.template_kernel->Fingerprint()] = GemmConfigToJson(tuned);
  auto measured = BuildCudaProgram(graph, plan->plan, FindInlinedGenerators(graph), "", {}, target);
  ASSERT_TRUE(measured.ok());
  const std::string& strategy = measured->groups[0].kernel->source.strategy;
  EXPECT_NE(strategy.find("128x128x64, 3 stages"), std::string::npos) << strategy;
  EXPECT_NE(strategy, by_rule.source.strategy);
}

class CudaProgramAttentionOverlapTest : public testing::TestWithParam<std::string> {};

TEST_P(CudaProgramAttentionOverlapTest, CompilesForSm90aWithoutSpills) { CompileForHopper(GetParam(), true, AttentionPath::kOverlap); }
TEST_P(CudaProgramAttentionOverlapTest, SerialLoopCompilesForSm90aWithoutSpills) {
  CompileForHopper(GetParam(), true, AttentionPath::kSerial);
}

INSTANTIATE_TEST_SUITE_P(Attention, CudaProgramAttentionOverlapTest, testing::ValuesIn(AttentionTests()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param).stem().string();
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// The CUDA program of `model` (empty when a step fails; the failure is reported).
CudaProgram BuildProgram(Graph model, const PlannerOptions& planner = {}, const CudaTarget& target = {},
                         const PassOptions& passes = {}) {
  auto graph = RunGraphPasses(std::move(model), passes);
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = graph.ok() ? PlanFusionForCuda(*graph, planner, target) : StatusOr<CudaPlan>(graph.status());
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return {};
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  return program.ok() ? *program : CudaProgram{};
}

// The CUDA program of bench/cases/`file`.
CudaProgram BenchCaseProgram(const std::string& file, const PlannerOptions& planner = {}, const CudaTarget& target = {}) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/bench/cases/" + file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  return BuildProgram(std::move(model->graph), planner, target);
}

// Dropout's random values whose vectors are whole Philox blocks are drawn four per
// generator call, once per row when the row is held in registers (the layer norm's three
// passes read them), not once per element and pass: fused (a row kernel) and unfused
// (the random op alone, a pointwise kernel).
TEST(CudaProgramRandomTest, DropoutDrawsWholePhiloxBlocks) {
  for (bool fuse : {true, false}) {
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    PlannerOptions planner;
    planner.fuse = fuse;
    const std::string source = BenchCaseProgram("dropout_residual_layernorm_bf16_16384x4096.onnxtxt", planner).source;
    EXPECT_NE(source.find("tf_philox_uniform4("), std::string::npos) << source;
    if (!fuse) continue;  // (a pointwise kernel's scalar tail still draws one element at a time)
    EXPECT_EQ(source.find("tf_philox_uniform("), std::string::npos) << source;
    EXPECT_NE(source.find("float c0[kChunks][kVec];"), std::string::npos) << "the row's draws held in registers:\n" << source;
  }
}

// Rotary's concat: the vector loop branches into the part each vector lies in, whose loads
// are vectors without clamps (before: every element evaluated both halves with scalar loads).
TEST(CudaProgramConcatTest, RotaryVectorsBranchIntoTheirHalf) {
  CudaProgram program = BenchCaseProgram("rotary_bf16_b8t2048h32d128.onnxtxt");
  ASSERT_EQ(program.groups.size(), 1u);
  const std::string& source = program.source;
  size_t vector_loop = source.find("for (tf_index_t t = thread"), tail = source.find("for (tf_index_t i0");
  ASSERT_NE(vector_loop, std::string::npos);
  ASSERT_NE(tail, std::string::npos);
  std::string vector_part = source.substr(vector_loop, tail - vector_loop);
  EXPECT_NE(vector_part.find("if (within < "), std::string::npos) << vector_part;
  EXPECT_EQ(vector_part.find("tf_clamp"), std::string::npos) << vector_part;
  size_t loads = 0;
  for (size_t at = vector_part.find("tf_vload"); at != std::string::npos; at = vector_part.find("tf_vload", at + 1)) ++loads;
  EXPECT_EQ(loads, 8u) << "x's two halves, cos and sin in each part:\n" << vector_part;
}

// Occurrences of `what` in `text`.
size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Long rows split over a cluster of 2, 4 or 8 CTAs (each a slice, the partial results combined
// through distributed shared memory): the softmaxes, cross-entropy and the norms compile.
TEST(CudaProgramRowClusterTest, LongRowKernelsCompileForSm90aWithoutSpills) {
  for (int cluster : {2, 4, 8})
    for (const char* file : {"softmax_bf16_1024x65536", "softmax_bf16_8192x8192", "cross_entropy_bf16_4096x131072", "layernorm_bf16_16384x4096"}) {
      SCOPED_TRACE(fmt::format("{} cluster {}", file, cluster));
      TemplateOverrides overrides;
      overrides.row_cluster = cluster;
      CompileForHopper(fmt::format("{}/bench/cases/{}.onnxtxt", TILEFUSE_SOURCE_DIR, file), true, AttentionPath::kTemplate, true, overrides);
      CudaTarget target;
      target.overrides.row_cluster = cluster;
      const std::string source = BenchCaseProgram(std::string(file) + ".onnxtxt", {}, target).source;
      EXPECT_NE(source.find(fmt::format("kCluster = {}", cluster)), std::string::npos) << source;
    }
}

// Softmax over 65536 bf16 columns: a 1024-thread block holds a row in registers, so an SM runs
// one; with more rows than SMs, a block per SM walks the rows and copies its next row into
// shared memory while the current one computes (and the kernel compiles without spills:
// CudaProgramTest above).
TEST(CudaProgramPrefetchTest, RowsHeldInRegistersPrefetchTheNextRow) {
  CudaTarget one_block_a_row;
  one_block_a_row.overrides.row_cluster = 1;  // by rule the row goes to a cluster (below)
  CudaProgram program = BenchCaseProgram("softmax_bf16_1024x65536.onnxtxt", {}, one_block_a_row);
  ASSERT_EQ(program.groups.size(), 1u);
  ASSERT_TRUE(program.groups[0].kernel);
  const CudaKernelSource& k = program.groups[0].kernel->source;
  EXPECT_NE(k.function.find("tf_cp_async16(&tf_row_stage["), std::string::npos) << k.function;
  EXPECT_EQ(k.launch.grid[0], CudaTarget{}.sm_count);
  EXPECT_EQ(k.launch.dynamic_shared_bytes, 65536 * 2);
  // Rows shorter than a 1024-thread block's (8192 columns: 256 threads) keep a block per row.
  const std::string short_rows = BenchCaseProgram("softmax_bf16_8192x8192.onnxtxt").source;
  EXPECT_EQ(short_rows.find("tf_row_stage"), std::string::npos);
}

// By rule, a row a 1024-thread block would hold only as pairs goes to a cluster of 4 CTAs of
// 256 threads holding their slices as pairs — on a GPU that launches clusters; another keeps
// the one block.
TEST(CudaProgramRowClusterTest, RowsHeldOnlyAsPairsGoToAClusterOfFour) {
  const CudaProgram hopper = BenchCaseProgram("softmax_bf16_1024x65536.onnxtxt");
  ASSERT_EQ(hopper.groups.size(), 1u);
  ASSERT_TRUE(hopper.groups[0].kernel);
  const CudaKernelSource& k = hopper.groups[0].kernel->source;
  EXPECT_EQ(k.config.cluster, 4) << k.strategy;
  EXPECT_EQ(k.config.threads, 256) << k.strategy;
  EXPECT_EQ(k.config.cache_row, 2) << k.strategy;
  EXPECT_EQ(k.launch.cluster[0], 4);
  // The slice's max taken on the packed pairs first, then one exp an element for the sum (no
  // rescale a chunk) and one for the store.
  EXPECT_NE(k.function.find("tf_max_pairs_bf16("), std::string::npos) << k.function;
  EXPECT_EQ(Count(k.function, "tf_exp_nonpositive("), 2u) << k.function;
  CudaTarget ampere;
  ampere.arch = "sm_80";
  const CudaProgram other = BenchCaseProgram("softmax_bf16_1024x65536.onnxtxt", {}, ampere);
  ASSERT_EQ(other.groups.size(), 1u);
  ASSERT_TRUE(other.groups[0].kernel);
  EXPECT_EQ(other.groups[0].kernel->source.config.cluster, 1) << other.groups[0].kernel->source.strategy;
  EXPECT_EQ(other.groups[0].kernel->source.config.cache_row, 2) << other.groups[0].kernel->source.strategy;
  // Rows that fit a block unpacked keep it (softmax over 8192 columns).
  const CudaProgram shorter = BenchCaseProgram("softmax_bf16_8192x8192.onnxtxt");
  ASSERT_TRUE(!shorter.groups.empty() && shorter.groups[0].kernel);
  EXPECT_EQ(shorter.groups[0].kernel->source.config.cluster, 1);
}

// Rows of 40000 bf16 also go to a cluster of 4 holding pairs, and their slices of 10000 end
// part-way through a chunk: the max on the pairs and the sum guard the chunks past the slice,
// and the kernel compiles without spills.
TEST(CudaProgramRowClusterTest, RaggedSlicesTakeTheMaxOnThePairs) {
  GraphBuilder b;
  b.Output(b.Softmax(b.Parameter("x", DType::kBF16, {7, 40000}), 1), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const CudaProgram program = BuildProgram(std::move(graph).value());
  ASSERT_EQ(program.groups.size(), 1u);
  ASSERT_TRUE(program.groups[0].kernel);
  const CudaKernelSource& k = program.groups[0].kernel->source;
  EXPECT_EQ(k.config.cluster, 4) << k.strategy;
  EXPECT_NE(k.function.find("tf_max_pairs_bf16("), std::string::npos) << k.function;
  EXPECT_GE(Count(k.function, "if (i1b < slice_begin + kSlice)"), 3u) << "the max, the sum and the stores guard:\n" << k.function;
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, the kernel not compiled: " << nvrtc.status().ToString();
  auto cubin = nvrtc->Compile(CudaTranslationUnit({k}), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  for (const PtxasKernelInfo& info : ParsePtxasLog(cubin->ptxas_log)) EXPECT_EQ(info.spill_store_bytes, 0) << info.line;
}

// Cross-entropy's logsumexp over rows too long for registers (131072 bf16 logits): the max
// and the sum of exp(x - max) in one pass over the row (an online softmax), so the logits are
// read once, not twice. Rows held in registers (its 64x1000 twin) keep the two passes.
TEST(CudaProgramOnlineSoftmaxTest, LongRowsTakeMaxAndSumInOnePass) {
  const std::string long_rows = BenchCaseProgram("cross_entropy_bf16_4096x131072.onnxtxt").source;
  EXPECT_NE(long_rows.find("tf_block_reduce_max_sum<"), std::string::npos) << long_rows;
  EXPECT_EQ(long_rows.find("tf_block_reduce<"), std::string::npos) << "no second pass:\n" << long_rows;
  const std::string cached = BenchCaseProgram("check/cross_entropy_bf16_64x1000.onnxtxt").source;
  EXPECT_EQ(cached.find("_max_sum<"), std::string::npos) << cached;
}

// exp(x - max(x)) — softmax's, logsumexp's, the online sum's rescale — takes the SFU's exp2,
// whose error is absolute and tiny where the argument is never positive; an exp of anything
// else keeps the accurate expf (f32) or the half types' fast form.
TEST(CudaProgramRowMathTest, OnlyExpLessTheRowMaxTakesTheNonpositiveExp) {
  const std::string online = BenchCaseProgram("cross_entropy_bf16_4096x131072.onnxtxt").source;
  EXPECT_EQ(Count(online, "tf_exp_nonpositive("), 2u) << "the sum's exp and its rescale:\n" << online;
  EXPECT_EQ(Count(online, "(exp("), 0u) << online;
  const std::string softmax = BenchCaseProgram("softmax_bf16_16384x1024.onnxtxt").source;
  EXPECT_EQ(Count(softmax, "tf_exp_nonpositive("), 2u) << "the sum pass and the store pass:\n" << softmax;
  EXPECT_EQ(Count(softmax, "tf_exp_fast("), 0u) << softmax;

  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {64, 1000});
  Value shifted_by_min = b.Unary(OpCode::kExp, b.Sub(x, b.Reduce(OpCode::kReduceMin, x, {1}, true)));
  b.Output(b.Reduce(OpCode::kReduceSum, shifted_by_min, {1}, true), "sum_of_exp_above_min");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const std::string other = BuildProgram(std::move(graph).value()).source;
  EXPECT_EQ(Count(other, "tf_exp_nonpositive("), 0u) << other;
  EXPECT_EQ(Count(other, "float(exp("), 1u) << other;
}

// Dropout + residual + layer norm reads its three row inputs (the Philox draw, x, the
// residual) only through their sum: each pass reads that one folded value from registers
// instead of recomputing it from the loads (three times a row before). Softmax, whose one
// load would fold into a float of twice its size, keeps its load.
TEST(CudaProgramRowFoldTest, PassesReadTheValueTheRowInputsFoldInto) {
  const std::string dropout = BenchCaseProgram("dropout_residual_layernorm_bf16_16384x4096.onnxtxt").source;
  EXPECT_EQ(Count(dropout, "// folded:"), 1u) << dropout;
  EXPECT_EQ(Count(dropout, "tf_cvt_bf16(c3[k][j])"), 1u) << "x converted once a row:\n" << dropout;
  EXPECT_EQ(Count(dropout, "tf_cast_bf16("), 0u) << "the cast before the store is the store's own conversion:\n" << dropout;
  const std::string softmax = BenchCaseProgram("softmax_bf16_16384x1024.onnxtxt").source;
  EXPECT_EQ(Count(softmax, "// folded:"), 0u) << softmax;
}

// Half-type outputs convert two at a time (cvt.rn.bf16x2) in the row and pointwise
// templates' vector loops (a pointwise kernel's scalar tail converts one at a time).
TEST(CudaProgramStoreTest, HalfOutputsConvertInPairs) {
  for (const char* file : {"softmax_bf16_16384x1024.onnxtxt", "gelu_tanh_bf16.onnxtxt", "swiglu_bf16_16384x4096.onnxtxt"}) {
    SCOPED_TRACE(file);
    const std::string source = BenchCaseProgram(file).source;
    const std::string vector_part = source.substr(0, source.find("for (tf_index_t i0 = (kElements / kVec) * kVec"));
    EXPECT_EQ(Count(vector_part, "tf_pack2_bf16("), 1u) << source;
    EXPECT_EQ(Count(vector_part, "tf_pack_bf16("), 0u) << source;
  }
}

// An f32 linear layer with a constant weight, as most ONNX exports carry it ([K][N] after the
// folding of constants): its weight is stored K-major and the product with its residual
// epilogue is one GEMM template kernel reading that constant (no prologue), TF32 under
// --precision high, 3xTF32 otherwise. With the weight left [K][N], 3xTF32 transposes B's parts
// itself, and TF32 leaves the product to cuBLASLt, saying why.
TEST(CudaProgramTf32Test, ConstantF32WeightsTakeTheTemplateAsTf32UnderPrecisionHigh) {
  auto linear = [] {
    GraphBuilder b;
    Value x = b.Parameter("x", DType::kF32, {2048, 768});
    Value w = b.Constant(Tensor::Random(DType::kF32, {768, 1024}, 5));
    b.Output(b.Add(b.MatMul(x, w), b.Parameter("r", DType::kF32, {2048, 1024})), "y");
    auto graph = b.Build();
    EXPECT_TRUE(graph.ok()) << graph.status().ToString();
    return std::move(graph).value();
  };
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;
  const CudaProgram mn_major = BuildProgram(linear(), {}, target);
  ASSERT_EQ(mn_major.groups.size(), 1u);
  ASSERT_EQ(mn_major.groups[0].mode, CudaGroupProgram::Mode::kGemmTemplate) << mn_major.groups[0].why_library;
  EXPECT_NE(mn_major.groups[0].kernel->source.strategy.find("3xTF32"), std::string::npos);
  EXPECT_EQ(mn_major.groups[0].kernel->source.strategy.find("B K-major"), std::string::npos);
  CudaTarget tf32_target = target;
  tf32_target.tf32 = true;
  const CudaProgram tf32_mn_major = BuildProgram(linear(), {}, tf32_target);
  ASSERT_FALSE(tf32_mn_major.groups.empty());
  EXPECT_EQ(tf32_mn_major.groups[0].mode, CudaGroupProgram::Mode::kGemm);
  EXPECT_NE(tf32_mn_major.groups[0].why_library.find("read B K-major only"), std::string::npos) << tf32_mn_major.groups[0].why_library;

  PassOptions passes;
  passes.k_major_weights.f32 = true;
  const CudaProgram exact = BuildProgram(linear(), {}, target, passes);
  ASSERT_EQ(exact.groups.size(), 1u) << "the residual is the template's epilogue";
  ASSERT_EQ(exact.groups[0].mode, CudaGroupProgram::Mode::kGemmTemplate) << exact.groups[0].why_library;
  EXPECT_NE(exact.groups[0].kernel->source.strategy.find("3xTF32"), std::string::npos) << exact.groups[0].kernel->source.strategy;

  target.tf32 = true;
  const CudaProgram tf32 = BuildProgram(linear(), {}, target, passes);
  ASSERT_EQ(tf32.groups.size(), 1u) << "the residual is the template's epilogue";
  const CudaGroupProgram& g = tf32.groups[0];
  ASSERT_EQ(g.mode, CudaGroupProgram::Mode::kGemmTemplate) << g.why_library;
  EXPECT_TRUE(g.prologue.empty());
  EXPECT_NE(g.kernel->source.strategy.find(" TF32"), std::string::npos) << g.kernel->source.strategy;
  EXPECT_EQ(g.kernel->source.strategy.find("3xTF32"), std::string::npos) << g.kernel->source.strategy;
  EXPECT_NE(g.kernel->source.strategy.find("B K-major"), std::string::npos) << g.kernel->source.strategy;
  EXPECT_NE(g.kernel->source.function.find("using Element = tf::Tf32;"), std::string::npos);
}

// A template kernel's outputs are what it writes: a value its group's prologue computes (here
// MobileNetV3's input, channels-last, which the residual reads later) is the prologue's, else
// the poisoning before the template's launch (--check) overwrote it.
TEST(CudaProgramTf32Test, TemplateKernelsDoNotClaimTheirProloguesOutputs) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/mobilenetv3_block/model.onnx");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  CudaTarget target;
  target.tf32 = true;
  PassOptions passes;
  passes.channels_last = true;
  passes.k_major_weights.f32 = true;
  const CudaProgram program = BuildProgram(std::move(model->graph), {}, target, passes);
  int checked = 0;
  for (const CudaGroupProgram& g : program.groups) {
    if (g.mode != CudaGroupProgram::Mode::kGemmTemplate) continue;
    for (const CudaLaunchable& prologue : g.prologue)
      for (int node : prologue.outputs) {
        EXPECT_EQ(std::count(g.kernel->outputs.begin(), g.kernel->outputs.end(), node), 0) << "group " << g.group << " %" << node;
        ++checked;
      }
  }
  EXPECT_GT(checked, 0) << "no gemm template with a prologue: the test checks nothing";
}

// Stand-ins (TemplateKernel::StandIn): with CudaTarget::stand_ins, the GEMM template's
// overlapped epilogue and the attention template's ping-pong loop carry a quick kernel of the
// same name (ping-pong GEMM tiles; the serial attention loop with the mask on every block);
// with stand_ins_only, the stand-in is the kernel itself; neither asked, there is none. A
// ping-pong GEMM (a form that compiles fast) has none.
TEST(CudaProgramStandInTest, SlowCompilingTemplateKernelsCarryTheirStandIns) {
  const std::string root = TILEFUSE_SOURCE_DIR;
  struct Case {
    const char* model;
    const char* own;       // in the kernel's own strategy
    const char* stand_in;  // in its stand-in's
  };
  for (const Case& c : {Case{"/bench/cases/gemm_bias_gelu_bf16_16384x4096x1024.onnxtxt", "epilogue overlapping", "ping-pong consumers"},
                        Case{"/bench/cases/attention_causal_bf16_b4h16n4096d128.onnxtxt", "ping-pong consumers", "lazy rescaling"}}) {
    SCOPED_TRACE(c.model);
    auto model = ImportOnnx(root + c.model);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    for (int mode = 0; mode < 3; ++mode) {  // none, stand_ins, stand_ins_only
      CudaTarget target;
      target.stand_ins = mode == 1;
      target.stand_ins_only = mode == 2;
      auto plan = PlanFusionForCuda(*graph, {}, target);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
      ASSERT_TRUE(program.ok()) << program.status().ToString();
      int templates = 0;
      for (const CudaGroupProgram& p : program->groups) {
        if (!p.kernel || !p.kernel->is_template) continue;
        ++templates;
        const std::string& strategy = p.kernel->source.strategy;
        EXPECT_NE(strategy.find(mode == 2 ? c.stand_in : c.own), std::string::npos) << mode << ": " << strategy;
        if (mode == 2) EXPECT_EQ(strategy.find(c.own), std::string::npos) << strategy;
        ASSERT_EQ(p.kernel->stand_in != nullptr, mode == 1) << mode;
        if (mode != 1) continue;
        const CudaLaunchable& quick = *p.kernel->stand_in;
        EXPECT_EQ(quick.source.name, p.kernel->source.name);
        EXPECT_NE(quick.source.strategy.find(c.stand_in), std::string::npos) << quick.source.strategy;
        EXPECT_EQ(quick.source.strategy.find(c.own), std::string::npos) << quick.source.strategy;
        EXPECT_EQ(quick.buffer_nodes.size(), p.kernel->buffer_nodes.size());
        EXPECT_EQ(quick.stand_in, nullptr);
      }
      EXPECT_EQ(templates, 1);
    }
  }
  TemplateOverrides pingpong;
  ASSERT_TRUE(ApplyTemplateWords("pingpong", 0, "on", pingpong).ok());
  CudaTarget target;
  target.stand_ins = true;
  target.overrides = pingpong;
  auto model = ImportOnnx(root + "/bench/cases/gemm_bias_gelu_bf16_16384x4096x1024.onnxtxt");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusionForCuda(*graph, {}, target);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  for (const CudaGroupProgram& p : program->groups)
    if (p.kernel && p.kernel->is_template) EXPECT_EQ(p.kernel->stand_in, nullptr) << p.kernel->source.strategy;
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// Three products of one A by three weights at 128 rows: q, then a row sum of q, then k, and v
// whose epilogue adds that row sum. q and k become one kernel at q's step (products grouped
// over N); v reads a value computed after q, so it keeps its own kernel. The moved writes
// start k's live range at q's step.
TEST(CudaProgramGroupedTest, ProductsOfOneAByWeightsShareAKernelWhereTheirInputsAreReady) {
  GraphBuilder b;
  const Value x = b.Parameter("x", DType::kBF16, {128, 1024});
  auto weight = [&](const char* name, int64_t n) { return b.Transpose(b.Parameter(name, DType::kBF16, {n, 1024}), {1, 0}); };
  const Value h = b.Unary(OpCode::kTanh, x);
  const Value q = b.MatMul(h, weight("wq", 1024));
  const Value row_sum = b.Reduce(OpCode::kReduceSum, q, {1}, true);
  const Value k = b.MatMul(h, weight("wk", 256));
  const Value v = b.Add(b.MatMul(h, weight("wv", 256)), row_sum);
  b.Output(q, "q");
  b.Output(row_sum, "s");
  b.Output(k, "k");
  b.Output(v, "v");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  for (bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "grouped" : "a kernel each");
    CudaTarget target;
    target.overrides.gemm_group_n = grouped;
    auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok());
    auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<std::string> gemms;  // each gemm group's launch, in plan order
    int into = -1;
    for (const CudaGroupProgram& p : program->groups) {
      if (p.kind != GroupKind::kGemm) continue;
      ASSERT_EQ(p.mode, CudaGroupProgram::Mode::kGemmTemplate) << p.why_library;
      if (p.grouped_into >= 0) into = p.grouped_into;
      gemms.push_back(p.kernel ? p.kernel->source.strategy : fmt::format("in group {}", p.grouped_into));
    }
    ASSERT_EQ(gemms.size(), 3u);
    if (!grouped) {
      for (const std::string& s : gemms) EXPECT_EQ(s.find("grouped"), std::string::npos) << s;
      continue;
    }
    EXPECT_NE(gemms[0].find("2 products grouped over N (1024 + 256 columns)"), std::string::npos) << gemms[0];
    EXPECT_EQ(gemms[1], fmt::format("in group {}", into));
    EXPECT_EQ(gemms[2].find("grouped"), std::string::npos) << gemms[2];
    const CudaGroupProgram& head = program->groups.at(into);
    ASSERT_TRUE(head.kernel.has_value());
    EXPECT_NE(std::find(head.kernel->outputs.begin(), head.kernel->outputs.end(), k.id), head.kernel->outputs.end());
    // k's output is written at q's step.
    Schedule schedule = ScheduleFromFusionPlan(*graph, plan->plan);
    WriteGroupedOutputsAtTheirKernel(*program, schedule);
    int k_buffer = -1;
    for (size_t i = 0; i < schedule.buffers.size(); ++i)
      if (schedule.buffers[i].node == k.id) k_buffer = static_cast<int>(i);
    ASSERT_GE(k_buffer, 0);
    const auto& writes = schedule.steps.at(into).writes;
    EXPECT_NE(std::find(writes.begin(), writes.end(), k_buffer), writes.end());
    EXPECT_TRUE(PlanMemory(schedule).ok());
    // The grouped kernel compiles for sm_90a without spills.
    StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
    if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
    auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits({head.kernel->source}), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubins->PtxasLog());
    ASSERT_EQ(report.size(), 1u);
    EXPECT_EQ(report[0].spill_store_bytes + report[0].spill_load_bytes, 0) << report[0].line;
  }
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// Five products of one A at 128 rows: at most four share a kernel (the skeleton's B maps), the
// fifth keeps its own; a product of half as many tiles as SMs takes no other (together they
// would no longer be few).
TEST(CudaProgramGroupedTest, AtMostFourFewTileProductsOfOneKAndOneAShareAKernel) {
  GraphBuilder b;
  const Value x = b.Parameter("x", DType::kBF16, {128, 1024});
  auto linear = [&](const char* name, int64_t n, Value in) {
    return b.MatMul(in, b.Transpose(b.Parameter(name, DType::kBF16, {n, b.shape(in)[1]}), {1, 0}));
  };
  const Value h = b.Unary(OpCode::kTanh, x);
  for (const char* name : {"w0", "w1", "w2", "w3", "w4"}) b.Output(linear(name, 256, h), std::string("y") + name);
  b.Output(linear("wide", 8448, h), "wide");  // 66 tiles of 128x128, half the SMs: with any other, more
  auto program = ProgramOfGraph(b.Build(), CudaTarget{});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::map<int, int> members;  // head group -> products in its kernel
  int alone = 0;
  for (const CudaGroupProgram& p : program->groups) {
    if (p.kind != GroupKind::kGemm) continue;
    if (p.grouped_into >= 0) ++members[p.grouped_into];
    else if (p.kernel && p.kernel->source.strategy.find("grouped over N") != std::string::npos) ++members[p.group];
    else ++alone;
  }
  ASSERT_EQ(members.size(), 1u);
  EXPECT_EQ(members.begin()->second, 4);
  EXPECT_EQ(alone, 2);  // the fifth of 256 columns, and the wide one
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// A LLaMA-style MLP's gate and up projections at 128 rows, SwiGLU as PyTorch traces it in bf16
// (silu of the gate's f32 upcast, cast back, times the up product); `also_output`: the gate's
// product is an output of the graph too.
StatusOr<Graph> SwiGlu(bool also_output, int64_t gate_k = 1024, int64_t rows = 128) {
  GraphBuilder b;
  const Value x = b.Parameter("x", DType::kBF16, {rows, 1024});
  auto linear = [&](const char* name, Value in, int64_t k) {
    return b.MatMul(in, b.Transpose(b.Parameter(name, DType::kBF16, {2816, k}), {1, 0}));
  };
  const Value gate_in = gate_k == 1024 ? x : b.Parameter("x2", DType::kBF16, {rows, gate_k});
  const Value gate = linear("wg", gate_in, gate_k);
  const Value up = linear("wu", x, 1024);
  const Value g32 = b.Cast(gate, DType::kF32);
  const Value silu = b.Cast(b.Mul(g32, b.Unary(OpCode::kSigmoid, g32)), DType::kBF16);
  b.Output(b.Mul(silu, up), "y");
  if (also_output) b.Output(gate, "gate");
  return b.Build();
}

// The gate's product runs in the up product's tiles: one kernel, the gate's group none, its
// output neither written nor read (no memory); the kernel rounds the gate's value to bf16 as
// the graph stores it, and compiles for sm_90a without spills. Switched off, a kernel each.
TEST(CudaProgramGatedTest, AGateOnlyAnotherEpilogueReadsRunsInItsTiles) {
  for (bool gated : {true, false}) {
    SCOPED_TRACE(gated ? "gated" : "a kernel each");
    auto graph = RunGraphPasses(*SwiGlu(false), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    CudaTarget target;
    target.overrides.gemm_gates = gated;
    auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok());
    auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<const CudaGroupProgram*> gemms;
    for (const CudaGroupProgram& p : program->groups)
      if (p.kind == GroupKind::kGemm) gemms.push_back(&p);
    ASSERT_EQ(gemms.size(), 2u);
    ASSERT_EQ(gemms[0]->mode, CudaGroupProgram::Mode::kGemmTemplate) << gemms[0]->why_library;
    ASSERT_EQ(gemms[1]->mode, CudaGroupProgram::Mode::kGemmTemplate) << gemms[1]->why_library;
    ASSERT_TRUE(gemms[1]->kernel.has_value());
    if (!gated) {
      EXPECT_TRUE(gemms[0]->kernel.has_value());
      EXPECT_EQ(gemms[1]->kernel->source.strategy.find("gated"), std::string::npos);
      continue;
    }
    EXPECT_FALSE(gemms[0]->kernel.has_value());
    EXPECT_EQ(gemms[0]->gated_into, gemms[1]->group);
    const CudaLaunchable& kernel = *gemms[1]->kernel;
    EXPECT_NE(kernel.source.strategy.find("gated"), std::string::npos) << kernel.source.strategy;
    EXPECT_NE(kernel.source.strategy.find("64x128x64"), std::string::npos) << kernel.source.strategy;  // 88 tiles on 132 SMs
    const std::vector<int>& gate_outputs = plan->plan.groups[gemms[0]->group].outputs;
    ASSERT_EQ(gate_outputs.size(), 1u);
    const int gate_value = gate_outputs[0];
    EXPECT_EQ(std::count(kernel.buffer_nodes.begin(), kernel.buffer_nodes.end(), gate_value), 0);
    EXPECT_NE(kernel.source.function.find("value[1] = tf_cvt_bf16(tf_pack_bf16(value[1]));"), std::string::npos) << kernel.source.function;
    Schedule schedule = ScheduleFromFusionPlan(*graph, plan->plan);
    WriteGroupedOutputsAtTheirKernel(*program, schedule);
    for (const ScheduleStep& step : schedule.steps)
      for (const std::vector<int>* buffers : {&step.reads, &step.writes})
        for (int b : *buffers) EXPECT_NE(schedule.buffers[b].node, gate_value) << step.name;
    auto memory = PlanMemory(schedule);
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
    if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
    auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits({kernel.source}), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    const std::vector<PtxasKernelInfo> report = ParsePtxasLog(cubins->PtxasLog());
    ASSERT_EQ(report.size(), 1u);
    EXPECT_EQ(report[0].spill_store_bytes + report[0].spill_load_bytes, 0) << report[0].line;
  }
}

// An RMS norm that only one product kernel reads, as its A, runs in that kernel: the q, k and
// v products grouped over N, and a gated product's pair. The norm's group keeps no kernel, its
// output no memory (no step writes or reads it), and the kernel reads the norm's input and
// scale instead, and compiles for sm_90a without spills or serialized wgmma. Switched off (the
// default: measured no faster), the norm is a kernel of its own. (bench/experiments/row_norms.sh
// runs both graphs against the reference on a GPU, the norm in their products.)
TEST(CudaProgramRowNormTest, AnRmsNormOnlyItsProductsReadRunsInTheirKernel) {
  for (const char* file : {"gemm_rms_norm_qkv_ragged_bf16.onnxtxt", "gemm_rms_norm_swiglu_gated_rows128_bf16.onnxtxt"})
    for (bool fold : {true, false}) {
      SCOPED_TRACE(testing::Message() << file << (fold ? "" : ", switched off"));
      auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/" + file);
      ASSERT_TRUE(model.ok()) << model.status().ToString();
      auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
      ASSERT_TRUE(graph.ok()) << graph.status().ToString();
      CudaTarget target;
      target.overrides.gemm_row_norms = fold;
      auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
      ASSERT_TRUE(plan.ok());
      auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
      ASSERT_TRUE(program.ok()) << program.status().ToString();
      const CudaGroupProgram* norm = nullptr;
      const CudaGroupProgram* product = nullptr;
      for (const CudaGroupProgram& p : program->groups) {
        if (p.kind == GroupKind::kRowReduction) norm = &p;
        if (p.kind == GroupKind::kGemm && p.kernel) product = &p;
      }
      ASSERT_NE(norm, nullptr);
      ASSERT_NE(product, nullptr);
      ASSERT_EQ(product->mode, CudaGroupProgram::Mode::kGemmTemplate) << product->why_library;
      const std::string& strategy = product->kernel->source.strategy;
      if (!fold) {
        EXPECT_TRUE(norm->kernel.has_value());
        EXPECT_EQ(strategy.find("normed"), std::string::npos) << strategy;
        continue;
      }
      EXPECT_FALSE(norm->kernel.has_value());
      EXPECT_EQ(norm->normed_into, product->group);
      EXPECT_NE(strategy.find("A normed by rows"), std::string::npos) << strategy;
      EXPECT_NE(strategy.find(std::string(file).find("qkv") != std::string::npos ? "grouped over N" : "gated"), std::string::npos) << strategy;
      const std::vector<int>& normed_outputs = plan->plan.groups[norm->group].outputs;
      ASSERT_EQ(normed_outputs.size(), 1u);
      const int normed = normed_outputs[0];
      const std::vector<int>& kernel_reads = product->kernel->buffer_nodes;
      EXPECT_EQ(std::count(kernel_reads.begin(), kernel_reads.end(), normed), 0);
      for (const char* name : {"x", "g"}) {
        const int input = *std::find_if(graph->inputs().begin(), graph->inputs().end(), [&](int id) { return graph->node(id).name == name; });
        EXPECT_EQ(std::count(kernel_reads.begin(), kernel_reads.end(), input), 1) << name;
      }
      Schedule schedule = ScheduleFromFusionPlan(*graph, plan->plan);
      WriteGroupedOutputsAtTheirKernel(*program, schedule);
      for (const ScheduleStep& step : schedule.steps)
        for (const std::vector<int>* buffers : {&step.reads, &step.writes})
          for (int b : *buffers) EXPECT_NE(schedule.buffers[b].node, normed) << step.name;
      ASSERT_TRUE(PlanMemory(schedule).ok());
      // (Off by default, so the models' compile tests do not reach it.)
      StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
      if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
      auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits({product->kernel->source}), "sm_90a");
      ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
      const std::string log = cubins->PtxasLog();
      EXPECT_EQ(log.find("are serialized"), std::string::npos) << log;
      EXPECT_EQ(log.find("warpgroup.wait is injected"), std::string::npos) << log;
      const std::vector<PtxasKernelInfo> report = ParsePtxasLog(log);
      ASSERT_EQ(report.size(), 1u);
      EXPECT_EQ(report[0].spill_store_bytes + report[0].spill_load_bytes, 0) << report[0].line;
    }
}

// Where the product's form takes long to compile (its overlapped epilogue at 4096 rows), its
// stand-in (ping-pong tiles) is a gated form too: the gate is not left out for it.
TEST(CudaProgramGatedTest, AGatedProductOfManyTilesHasAGatedStandIn) {
  CudaTarget target;
  target.stand_ins = true;
  auto program = ProgramOfGraph(SwiGlu(false, 1024, 4096), target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  int gates = 0;
  for (const CudaGroupProgram& p : program->groups) {
    if (p.gated_into >= 0) ++gates;
    if (!p.kernel || p.kernel->source.strategy.find("gated") == std::string::npos) continue;
    EXPECT_NE(p.kernel->source.strategy.find("overlapping"), std::string::npos) << p.kernel->source.strategy;
    ASSERT_TRUE(p.kernel->stand_in);
    EXPECT_NE(p.kernel->stand_in->source.strategy.find("gated"), std::string::npos) << p.kernel->stand_in->source.strategy;
    EXPECT_NE(p.kernel->stand_in->source.strategy.find("ping-pong"), std::string::npos) << p.kernel->stand_in->source.strategy;
  }
  EXPECT_EQ(gates, 1);
}

// No gate where its output is read elsewhere too (here: a graph output) or its product is not
// of the same A and K.
TEST(CudaProgramGatedTest, NoGateWhoseOutputIsReadElsewhereOrOfAnotherA) {
  for (auto [also_output, gate_k] : {std::pair<bool, int64_t>{true, 1024}, {false, 512}}) {
    SCOPED_TRACE(also_output ? "gate also an output" : "another A");
    auto program = ProgramOfGraph(SwiGlu(also_output, gate_k), CudaTarget{});
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    for (const CudaGroupProgram& p : program->groups) {
      EXPECT_LT(p.gated_into, 0);
      if (p.kernel) EXPECT_EQ(p.kernel->source.strategy.find("gated"), std::string::npos) << p.kernel->source.strategy;
    }
  }
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// Two pointwise results of different sizes from one product (as a LLaMA-style layer's rotary
// embeddings of q and k read the QKV product's parts): their kernels launch together at the
// first one's step, the second's output written there; the kernel compiles for sm_90a.
// Switched off, a launch each.
TEST(CudaProgramLaunchTogetherTest, IndependentPointwiseKernelsShareALaunch) {
  GraphBuilder b;
  const Value x = b.Parameter("x", DType::kBF16, {128, 256});
  const Value w = b.Parameter("w", DType::kBF16, {256, 320});
  const Value c = b.Parameter("c", DType::kBF16, {128, 64});
  const Value product = b.MatMul(x, w);
  const Value q = b.Slice(product, {0, 0}, {128, 256}, {0, 1}, {1, 1});
  const Value k = b.Slice(product, {0, 256}, {128, 320}, {0, 1}, {1, 1});
  b.Output(b.Mul(b.Unary(OpCode::kTanh, q), b.Parameter("s", DType::kBF16, {128, 256})), "q");
  b.Output(b.Mul(b.Unary(OpCode::kSigmoid, k), c), "k");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  for (bool together : {true, false}) {
    SCOPED_TRACE(together ? "together" : "a launch each");
    CudaTarget target;
    target.overrides.launch_together = together;
    auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok());
    auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<const CudaGroupProgram*> pointwise;
    for (const CudaGroupProgram& p : program->groups)
      if (p.mode == CudaGroupProgram::Mode::kGenerated) pointwise.push_back(&p);
    ASSERT_EQ(pointwise.size(), 2u);
    if (!together) {
      EXPECT_TRUE(pointwise[0]->kernel && pointwise[1]->kernel);
      continue;
    }
    ASSERT_TRUE(pointwise[0]->kernel.has_value());
    EXPECT_FALSE(pointwise[1]->kernel.has_value());
    EXPECT_EQ(pointwise[1]->launched_with, pointwise[0]->group);
    const CudaLaunchable& kernel = *pointwise[0]->kernel;
    EXPECT_NE(kernel.source.strategy.find("2 kernels launched together"), std::string::npos) << kernel.source.strategy;
    ASSERT_EQ(kernel.launched_with_it.size(), 1u);  // the second part's IR, verified and dumped beside the first's
    EXPECT_EQ(kernel.launched_with_it[0].nodes, plan->plan.groups[pointwise[1]->group].nodes);
    const std::vector<int>& second = plan->plan.groups[pointwise[1]->group].outputs;
    for (int out : second) EXPECT_NE(std::find(kernel.outputs.begin(), kernel.outputs.end(), out), kernel.outputs.end());
    Schedule schedule = ScheduleFromFusionPlan(*graph, plan->plan);
    WriteGroupedOutputsAtTheirKernel(*program, schedule);
    EXPECT_TRUE(schedule.steps.at(pointwise[1]->group).writes.empty());
    EXPECT_EQ(schedule.steps.at(pointwise[0]->group).writes.size(), 2u);
    EXPECT_TRUE(PlanMemory(schedule).ok());
    StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
    if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
    auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits({kernel.source}), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
  }
}

// Scalars computed from the graph's inputs alone (a static KV cache's per-layer counter and
// position, as a decode step has them after every layer's products) join the first pointwise
// kernel however many steps later they come; a larger kernel that far away keeps its own launch.
TEST(CudaProgramLaunchTogetherTest, ScalarsFromTheInputsJoinTheFirstLaunchFromAnywhere) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {64, 256});
  const Value w = b.Parameter("w", DType::kBF16, {256, 256});
  b.Output(b.Unary(OpCode::kTanh, x), "first");
  for (int layer = 0; layer < 8; ++layer) x = b.Softmax(b.MatMul(x, w), -1);  // sixteen steps
  b.Output(x, "x");
  const Value counter = b.Parameter("counter", DType::kI64, {});
  b.Output(b.AddScalar(counter, 1), "next");
  b.Output(b.MulScalar(counter, 3), "position");
  b.Output(b.Unary(OpCode::kSigmoid, b.Parameter("far", DType::kBF16, {64, 256})), "far");
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto graph = RunGraphPasses(std::move(*built), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, CudaTarget{});
  ASSERT_TRUE(plan.ok());
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, CudaTarget{});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::vector<const CudaGroupProgram*> pointwise;
  for (const CudaGroupProgram& p : program->groups)
    if (p.mode == CudaGroupProgram::Mode::kGenerated && p.kind == GroupKind::kPointwise) pointwise.push_back(&p);
  ASSERT_GE(pointwise.size(), 3u);
  const CudaGroupProgram& first = *pointwise.front();
  ASSERT_TRUE(first.kernel.has_value());
  int scalars = 0, far = 0;
  for (const CudaGroupProgram* p : pointwise) {
    if (p == &first) continue;
    const std::vector<int>& outputs = plan->plan.groups[p->group].outputs;
    const bool scalar = graph->node(outputs.front()).shape.empty();
    if (scalar) {
      ++scalars;
      EXPECT_EQ(p->launched_with, first.group) << "a scalar kernel at step " << p->group;
      EXPECT_GT(p->group - first.group, 6);
    } else {
      ++far;
      EXPECT_LT(p->launched_with, 0) << "a 64x256 kernel at step " << p->group << " joined the first";
    }
  }
  EXPECT_GE(scalars, 1);
  EXPECT_EQ(far, 1);
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// Rotary embeddings of q and k (transformers' LLaMA form) in their products' epilogues: the
// heads' transposes sink below them (passes/sink_transposes.h), so they compute in the
// products' layout, each column reading its rotated partner from the same thread's
// accumulators. No pointwise kernel is left for them; the products (grouped over N with v's)
// compile for sm_90a without spills.
TEST(CudaProgramRotaryTest, RotaryEmbeddingsRunInTheirProductsEpilogues) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/gemm_rotary_qk_attention_ragged_bf16.onnxtxt");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  PassOptions passes;
  passes.channels_last = true;  // as the CUDA backend passes graphs
  auto graph = RunGraphPasses(std::move(model->graph), passes);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CudaTarget target;
  auto plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok());
  auto program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto has_concat = [&](const FusionGroup& group) {
    return std::any_of(group.nodes.begin(), group.nodes.end(), [&](int id) { return graph->node(id).op == OpCode::kConcat; });
  };
  int rotary_products = 0;
  std::vector<CudaKernelSource> sources;
  for (const CudaGroupProgram& p : program->groups) {
    const FusionGroup& group = plan->plan.groups[p.group];
    if (!has_concat(group)) continue;
    EXPECT_EQ(p.kind, GroupKind::kGemm) << "a rotary embedding outside its product's group";
    EXPECT_EQ(p.mode, CudaGroupProgram::Mode::kGemmTemplate) << p.why_library;
    ++rotary_products;
  }
  EXPECT_EQ(rotary_products, 2);
  for (const CudaGroupProgram& p : program->groups) {
    if (!p.kernel || p.mode != CudaGroupProgram::Mode::kGemmTemplate) continue;
    if (p.kernel->source.function.find("kPartnerGroups = 8") == std::string::npos) continue;
    EXPECT_NE(p.kernel->source.function.find("float (&partner)[2]"), std::string::npos);
    sources.push_back(p.kernel->source);
  }
  ASSERT_FALSE(sources.empty());
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  auto cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(sources), "sm_90a");
  ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
  for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog()))
    EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
}

}  // namespace
}  // namespace tilefuse

namespace tilefuse {
namespace {

// A decode step's q, k and v (one token; q and k with rotary epilogues, which keep them on the
// GEMM template): v, which alone would run on the skinny template, joins their kernel, one
// launch for the three. Products grouped over N switched off, v keeps the skinny template.
TEST(CudaProgramGroupedTest, ASkinnyProductJoinsProductsOfItsAOnTheGemmTemplate) {
  for (bool grouped : {true, false}) {
    SCOPED_TRACE(grouped ? "grouped" : "a kernel each");
    CudaTarget target;
    target.overrides.gemm_group_n = grouped;
    auto program = ProgramOfModel(ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm/gemm_rotary_qk_v_decode_bf16.onnxtxt"), target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<std::string> kernels;  // the gemm groups' kernels' strategies
    int grouped_into = 0;
    for (const CudaGroupProgram& p : program->groups) {
      if (p.kind != GroupKind::kGemm) continue;
      if (p.grouped_into >= 0) ++grouped_into;
      if (p.kernel) kernels.push_back(p.kernel->source.strategy);
    }
    if (grouped) {
      ASSERT_EQ(kernels.size(), 1u);
      EXPECT_EQ(grouped_into, 2);
      EXPECT_NE(kernels[0].find("3 products grouped over N (512 + 512 + 512 columns)"), std::string::npos) << kernels[0];
    } else {
      ASSERT_EQ(kernels.size(), 3u);
      EXPECT_EQ(std::count_if(kernels.begin(), kernels.end(), [](const std::string& s) { return s.find("skinny") != std::string::npos; }), 1)
          << fmt::format("{}", fmt::join(kernels, " | "));
    }
  }
}

// Skinny products of one A alone (a decode step's gate and up, no rotary epilogue among them)
// stay on the skinny template, a kernel each: grouped, they would run on the GEMM template.
TEST(CudaProgramGroupedTest, SkinnyProductsAloneStayApart) {
  GraphBuilder b;
  const Value x = b.Parameter("x", DType::kBF16, {1, 1024});
  const Value h = b.Unary(OpCode::kTanh, x);
  for (const char* name : {"w0", "w1"})
    b.Output(b.MatMul(h, b.Transpose(b.Parameter(name, DType::kBF16, {512, 1024}), {1, 0})), std::string("y") + name);
  auto program = ProgramOfGraph(b.Build(), CudaTarget{});
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  int skinny = 0;
  for (const CudaGroupProgram& p : program->groups) {
    if (p.kind != GroupKind::kGemm) continue;
    EXPECT_LT(p.grouped_into, 0);
    ASSERT_TRUE(p.kernel.has_value());
    if (p.kernel->source.strategy.find("skinny") != std::string::npos) ++skinny;
  }
  EXPECT_EQ(skinny, 2);
}

}  // namespace
}  // namespace tilefuse

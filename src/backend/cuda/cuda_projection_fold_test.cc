// A decode attention's output projection folded into its kernel (cuda_projection_fold.h), on
// the CPU side: which graphs fold, what the kernel's text and launch say, and that the kernel
// compiles for sm_90a without spills. Running it needs a GPU: the tests/attention graphs
// attention_decode_projection_* under TILEFUSE_PROJECTION_IN_ATTENTION=1 with --check.
#include "backend/cuda/cuda_projection_fold.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_program_test_util.h"
#include "backend/cuda/device_test_util.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

struct Built {
  Graph graph;
  CudaProgram program;
};

CudaProgram ProgramOf(const Graph& g, bool projections) {
  CudaTarget target;
  target.overrides.projection_in_attention = projections;
  return LowerForTest(g, target);
}

Built Build(const std::string& file, bool projections) {
  StatusOr<ImportedModel> model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/tests/attention/" + file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<Graph> graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  CudaProgram program = ProgramOf(*graph, projections);
  return {std::move(*graph), std::move(program)};
}

const CudaGroupProgram* AttentionOf(const CudaProgram& program) {
  for (const CudaGroupProgram& p : program.groups)
    if (p.mode == CudaGroupProgram::Mode::kAttentionTemplate) return &p;
  return nullptr;
}

TEST(CudaProjectionFoldTest, TheProjectionRunsInTheDecodeAttentionWhereAsked) {
  struct Case {
    const char* file;
    int heads;
    bool k_major;
  };
  for (const Case& c : {Case{"attention_decode_projection_bf16.onnxtxt", 12, false}, Case{"attention_decode_projection_linear_bf16.onnxtxt", 8, true}}) {
    SCOPED_TRACE(c.file);
    const Built off = Build(c.file, false);
    const CudaGroupProgram* plain = AttentionOf(off.program);
    ASSERT_NE(plain, nullptr);
    EXPECT_EQ(plain->kernel->source.function.find("DecodeProjection"), std::string::npos);
    int products = 0;
    for (const CudaGroupProgram& p : off.program.groups) products += p.kernel && p.kernel->source.strategy.find("skinny gemm") != std::string::npos;
    EXPECT_EQ(products, 1) << "the projection a skinny product of its own";

    const Built on = Build(c.file, true);
    const CudaGroupProgram* attention = AttentionOf(on.program);
    ASSERT_NE(attention, nullptr);
    ASSERT_TRUE(attention->kernel.has_value());
    const CudaKernelSource& s = attention->kernel->source;
    EXPECT_NE(s.function.find("tf::DecodeProjectionStart<Config>(map_w);"), std::string::npos) << s.function;
    EXPECT_NE(s.function.find("tf::DecodeProjection<Config>(epilogue"), std::string::npos) << s.function;
    EXPECT_NE(s.function.find(fmt::format("kProjection = 1, kHeads = {}, kWKMajor = {}", c.heads, c.k_major ? 1 : 0)), std::string::npos)
        << s.function;
    EXPECT_EQ(s.launch.cluster[0], c.heads);
    EXPECT_GT(s.launch.dynamic_shared_bytes, c.heads * 64 * 64 * 2);  // the weight's columns: all of K by 64
    EXPECT_NE(s.strategy.find("output projection"), std::string::npos) << s.strategy;
    EXPECT_TRUE(attention->output_unstored);
    int grouped = 0, kernels = 0;
    for (const CudaGroupProgram& p : on.program.groups) {
      grouped += p.grouped_into == attention->group;
      kernels += p.kernel.has_value();
    }
    EXPECT_EQ(grouped, 1);
    EXPECT_EQ(kernels, 1) << "the attention's kernel alone";
    // The product's output (the graph's) is the attention kernel's; the attention's own is not.
    const int y = on.graph.outputs().front().node;
    EXPECT_NE(std::find(attention->kernel->outputs.begin(), attention->kernel->outputs.end(), y), attention->kernel->outputs.end());
    EXPECT_EQ(attention->kernel->outputs.size(), 1u);

    StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
    if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits({s}), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
}

// Not where anything else reads the attention's output (here the graph returns it too), nor
// where a head has more than one query row.
TEST(CudaProjectionFoldTest, NotWhereTheOutputIsReadElsewhereOrRowsAreMany) {
  for (const bool also_returned : {true, false}) {
    SCOPED_TRACE(also_returned ? "the attention's output returned too" : "two query rows a head");
    const int64_t rows = also_returned ? 1 : 2;
    GraphBuilder b;
    Value q = b.Parameter("q", DType::kBF16, {1, 12, rows, 64});
    Value k = b.Parameter("k", DType::kBF16, {1, 12, 200, 64});
    Value v = b.Parameter("v", DType::kBF16, {1, 12, 200, 64});
    Value w = b.Parameter("w", DType::kBF16, {768, 768});
    Value out = b.MatMul(b.Softmax(b.MulScalar(b.MatMul(q, b.Transpose(k, {0, 1, 3, 2})), 0.125), -1), v);
    b.Output(b.MatMul(b.Reshape(b.Transpose(out, {0, 2, 1, 3}), {rows, 768}), w), "y");
    if (also_returned) b.Output(out, "out");
    StatusOr<Graph> built = b.Build();
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    StatusOr<Graph> g = RunGraphPasses(std::move(*built), PassOptions{});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CudaProgram program = ProgramOf(*g, true);
    const CudaGroupProgram* attention = AttentionOf(program);
    ASSERT_NE(attention, nullptr);
    ASSERT_TRUE(attention->kernel.has_value());
    EXPECT_EQ(attention->kernel->source.function.find("DecodeProjection"), std::string::npos);
    EXPECT_FALSE(attention->output_unstored);
    for (const CudaGroupProgram& p : program.groups) EXPECT_LT(p.grouped_into, 0);
  }
}

}  // namespace
}  // namespace tilefuse

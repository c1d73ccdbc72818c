// Every example, convolution case (tests/conv) and real model, compiled for the CPU (fused, and with --no-fusion),
// must match the f64 reference interpreter on fresh random inputs, with kernel
// outputs poisoned beforehand so an unwritten element fails. Gemm groups' prologues run
// as generated kernels, into the arena.
#include "backend/cpu/cpu_executable.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <omp.h>

#include "reference/interpreter.h"
#include "codegen/gemm_split.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "runtime/measure.h"
#include "testing/tensor_compare.h"
#include "testing/random_inputs.h"
#include "testing/reference_check.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// Norm-wise bounds (testing/tensor_compare.h): a matmul's rounding error grows with the
// terms it sums, not with the result. f32 kernels vs the f64 reference: rtol 1e-4, atol
// 1e-5 of the tensor's largest magnitude.
void ExpectClose(const Tensor& actual, const Tensor& expected, const std::string& what) {
  Tolerance tol{1e-4, 1e-5};
  if (expected.dtype() == DType::kF64) tol = {1e-9, 1e-12};
  if (expected.dtype() == DType::kF16 || expected.dtype() == DType::kBF16) tol = {2e-2, 2e-2};
  if (!IsFloat(expected.dtype())) tol = {0, 0};
  Comparison c = CompareNormwise(actual, expected, tol);
  EXPECT_TRUE(c.pass) << what << ": " << c.reason;
}

std::string TestCacheDir() { return (std::filesystem::temp_directory_path() / "tilefuse_test_cache").string(); }

// `graph` compiled for the CPU (outputs poisoned) against the reference on `inputs`.
void CompileAndCheckGraph(const Graph& graph, bool fuse, const std::vector<Tensor>& inputs, const std::string& what) {
  CpuCompileOptions options;
  options.fuse = fuse;
  options.poison_outputs = true;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  auto expected = RunReference(graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t i = 0; i < expected->size(); ++i) ExpectClose((*actual)[i], (*expected)[i], what + " output " + std::to_string(i));
}

void CompileAndCheck(const std::string& path, bool fuse) {
  auto graph = ImportAndPass(path);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < graph->inputs().size(); ++i) {
    const Node& p = graph->node(graph->inputs()[i]);
    Tensor t = Tensor::Random(p.dtype, p.shape, 1000 + i);
    if (!IsFloat(p.dtype)) t = Tensor(p.dtype, p.shape);  // token ids: 0 is always valid
    inputs.push_back(t);
  }
  CompileAndCheckGraph(*graph, fuse, inputs, path);
}

class CompiledExampleTest : public testing::TestWithParam<std::string> {};

TEST_P(CompiledExampleTest, FusedMatchesReference) { CompileAndCheck(GetParam(), true); }
TEST_P(CompiledExampleTest, UnfusedMatchesReference) { CompileAndCheck(GetParam(), false); }

std::vector<std::string> Models() {
  std::vector<std::string> paths;
  std::string root = TILEFUSE_SOURCE_DIR;
  for (const char* folder : {"/examples", "/tests/conv"})
    for (const auto& e : std::filesystem::directory_iterator(root + folder))
      if (e.path().extension() == ".onnxtxt") paths.push_back(e.path().string());
  for (const char* m : {"mlp_block", "attention_block", "gpt2_2layer", "llama_2layer"}) paths.push_back(root + "/tests/models/" + m);
  std::sort(paths.begin(), paths.end());
  return paths;
}

INSTANTIATE_TEST_SUITE_P(Models, CompiledExampleTest, testing::ValuesIn(Models()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::filesystem::path path(info.param);
                           bool example = path.extension() == ".onnxtxt";
                           return (example ? "example_" : "model_") + path.stem().string();
                         });

// Gemm groups whose prologue (casts and views of the operands) runs as generated loop
// kernels: no member on the reference kernels, prologue outputs and the product in the
// arena, poisoned before they are written, and the result the reference interpreter's.
struct GemmPrologueCase {
  std::string name;
  std::string text;
  std::vector<OpCode> prologue_ops;  // the gemm group's prologue members, in order
  size_t prologue_kernels;           // values it materialises
};

std::vector<GemmPrologueCase> GemmPrologueCases() {
  const std::string header = "<ir_version: 8, opset_import: [\"\" : 17]>\n";
  return {
      // One operand transposed, the other cast and broadcast over the batch (dim 1).
      {"transpose_a_cast_b", header + R"(g (float[3,64,48] x, float16[1,64,40] w, float[40] bias) => (float[3,48,40] y) {
         xt = Transpose <perm = [0, 2, 1]> (x)
         wf = Cast <to = 1> (w)
         p = MatMul (xt, wf)
         y = Add (p, bias)
       })",
       {OpCode::kTranspose, OpCode::kCast}, 2},
      // A transpose then a cast on one operand; the other has no batch dims at all.
      {"transpose_then_cast", header + R"(g (float16[2,3,64,48] x, float[64,40] w) => (float[2,3,48,40] y) {
         xt = Transpose <perm = [0, 1, 3, 2]> (x)
         xf = Cast <to = 1> (xt)
         p = MatMul (xf, w)
         y = Relu (p)
       })",
       {OpCode::kTranspose, OpCode::kCast}, 1},
      // A slice of a reshape (rows 2..13 of each batch entry's [16, 24] view).
      {"slice_of_reshape", header + R"(g (float[2,8,48] x, float[24,20] w) => (float[2,12,20] y) {
         shape = Constant <value = int64[3] {2, 16, 24}> ()
         starts = Constant <value = int64[1] {2}> ()
         ends = Constant <value = int64[1] {14}> ()
         axes = Constant <value = int64[1] {1}> ()
         r = Reshape (x, shape)
         s = Slice (r, starts, ends, axes)
         p = MatMul (s, w)
         y = Relu (p)
       })",
       {OpCode::kReshape, OpCode::kSlice}, 1},
      // The epilogue reads a prologue member that is not an operand (the cast): it is
      // materialised too.
      {"epilogue_reads_prologue", header + R"(g (float16[32,32] x, float[32,32] w) => (float[32,32] y) {
         c = Cast <to = 1> (x)
         t = Transpose <perm = [1, 0]> (c)
         p = MatMul (t, w)
         y = Add (p, c)
       })",
       {OpCode::kCast, OpCode::kTranspose}, 2},
      // No epilogue; the product and a prologue member are graph outputs (not in the arena).
      {"outputs_in_prologue", header + R"(g (float16[2,16,24] x, float[24,8] w) => (float[2,16,8] y, float[2,16,24] xf) {
         xf = Cast <to = 1> (x)
         y = MatMul (xf, w)
       })",
       {OpCode::kCast}, 1},
  };
}

void PrintTo(const GemmPrologueCase& c, std::ostream* os) { *os << c.name; }

class GemmPrologueTest : public testing::TestWithParam<GemmPrologueCase> {};

TEST_P(GemmPrologueTest, PrologueRunsAsGeneratedKernelsAndMatchesReference) {
  const GemmPrologueCase& c = GetParam();
  auto model = ImportOnnxText(c.text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  const CpuExecutable& cg = **compiled;

  // The planner made one gemm group with the prologue this case is about.
  const FusionGroup* gemm = nullptr;
  for (const FusionGroup& group : cg.plan().groups)
    if (group.kind == GroupKind::kGemm) gemm = &group;
  ASSERT_NE(gemm, nullptr) << "no gemm group";
  std::vector<OpCode> prologue_ops;
  for (int id : SplitGemmGroup(*graph, *gemm).prologue) prologue_ops.push_back(graph->node(id).op);
  ASSERT_EQ(prologue_ops, c.prologue_ops);

  const KernelInfo& info = cg.kernels()[gemm->id];
  EXPECT_TRUE(info.generated) << info.why_not;
  EXPECT_EQ(info.num_reference_nodes, 0) << info.why_not;
  EXPECT_TRUE(info.why_not.empty()) << info.why_not;
  EXPECT_EQ(info.prologue_kernels.size(), c.prologue_kernels);
  for (const std::string& name : info.prologue_kernels) {
    EXPECT_NE(cg.LoopKernel(name), nullptr) << name << " is not tunable";
    EXPECT_NE(info.source.find(name), std::string::npos) << name << " is not in the group's source";
  }

  // Twice, on different inputs: the arena's bytes from the first run must not leak into
  // the second (and are poisoned anyway).
  for (uint64_t seed : {7, 8}) {
    std::vector<Tensor> inputs = RandomInputs(*graph, seed * 100);
    auto expected = RunReference(*graph, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    auto actual = (*compiled)->Run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    for (size_t i = 0; i < expected->size(); ++i) ExpectClose((*actual)[i], (*expected)[i], c.name + " output " + std::to_string(i));
  }
}

// Values a gemm group materialises (prologue outputs, the product) live in the arena, not
// in tensors allocated on every run.
TEST(GemmPrologueArenaTest, ProductAndPrologueOutputsAreInTheArena) {
  const GemmPrologueCase c = GemmPrologueCases()[0];
  auto model = ImportOnnxText(c.text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  // The gemm group, and its epilogue as a group of its own (on the CPU the epilogue is a
  // pass of its own either way, and the cost model says so).
  ASSERT_EQ((*compiled)->plan().groups.size(), 2u);
  ASSERT_EQ((*compiled)->plan().groups[0].kind, GroupKind::kGemm);
  const int64_t transposed = 3 * 48 * 64 * 4, cast = 64 * 40 * 4, product = 3 * 48 * 40 * 4;
  EXPECT_EQ((*compiled)->arena_bytes(), transposed + cast + product);  // all live at once, 64-byte multiples
  std::vector<Tensor> inputs = RandomInputs(*graph, 40);
  auto times = GroupTimesUs(**compiled, inputs);
  ASSERT_TRUE(times.ok()) << times.status().ToString();
  ASSERT_EQ(times->size(), 2u);
  EXPECT_GT((*times)[0], 0);
}

INSTANTIATE_TEST_SUITE_P(Gemm, GemmPrologueTest, testing::ValuesIn(GemmPrologueCases()),
                         [](const testing::TestParamInfo<GemmPrologueCase>& info) { return info.param.name; });


// ConvNeXt's LayerNorm2d: channels-last transpose, LayerNorm over the channels, transpose
// back to NCHW (once with a residual add in front, as before its downsampling layers). The
// planner once put the transpose back into the layer norm's row-reduction group, which
// computes one row at a time while the transpose needs other rows' statistics: no loop
// kernel could be generated and the group ran on the f64 reference kernels (66 ms of
// ConvNeXt-tiny's 90). Every group must be generated, and the result the reference's.
TEST(RowReductionPlanTest, LayerNormOverChannelsThenTransposeBackIsGenerated) {
  const std::string header = "<ir_version: 8, opset_import: [\"\" : 17]>\n";
  const std::vector<std::string> texts = {
      header + R"(g (float[1,24,10,12] x, float[24] s, float[24] t) => (float[1,24,10,12] y) {
         xt = Transpose <perm = [0, 2, 3, 1]> (x)
         n = LayerNormalization <axis = -1, epsilon = 1e-6> (xt, s, t)
         y = Transpose <perm = [0, 3, 1, 2]> (n)
       })",
      header + R"(g (float[1,24,10,12] x, float[1,24,10,12] r, float[24] s, float[24] t) => (float[1,24,10,12] y) {
         a = Add (x, r)
         xt = Transpose <perm = [0, 2, 3, 1]> (a)
         n = LayerNormalization <axis = -1, epsilon = 1e-6> (xt, s, t)
         y = Transpose <perm = [0, 3, 1, 2]> (n)
       })"};
  for (const std::string& text : texts) {
    auto model = ImportOnnxText(text);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto graph = RunGraphPasses(std::move(model->graph), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    CpuCompileOptions options;
    options.poison_outputs = true;
    options.cache_dir = TestCacheDir();
    auto compiled = CompileForCpu(*graph, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    for (const KernelInfo& info : (*compiled)->kernels()) {
      EXPECT_TRUE(info.generated) << info.name << ": " << info.why_not;
      EXPECT_EQ(info.num_reference_nodes, 0) << info.name << ": " << info.why_not;
    }
    std::vector<Tensor> inputs = RandomInputs(*graph, 300);
    auto expected = RunReference(*graph, inputs);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    auto actual = (*compiled)->Run(inputs);
    ASSERT_TRUE(actual.ok()) << actual.status().ToString();
    ExpectClose((*actual)[0], (*expected)[0], "layer norm over channels");
  }
}

// An iota that is an output, scaled by what another group reads: that group runs after the
// output is written (poisoned before the run, the output read early fails; it segfaulted).
// The generated kernels' 8-bit float conversions (codegen/cpp/cpp_prelude.cc) against the
// reference's (ir/dtype.cc), bit for bit, for all four types: every value of each type, the
// midpoints between neighbours (ties to even), zeros of both signs, overflow, infinities, NaN.
TEST(CpuExecutableTest, EightBitFloatCastsMatchTheReferenceBitForBit) {
  const DType types[] = {DType::kF8E4M3, DType::kF8E5M2, DType::kF8E4M3Fnuz, DType::kF8E5M2Fnuz};
  std::vector<double> values = {0.0, -0.0, 1e6, -1e6, INFINITY, -INFINITY, NAN, 1e-30, -1e-30};
  for (DType d : types)
    for (int bits = 0; bits < 256; ++bits) {
      const double v = Float8BitsToFloat(static_cast<uint8_t>(bits), d), next = Float8BitsToFloat(static_cast<uint8_t>(bits + 1), d);
      values.push_back(v);
      if (bits % 128 != 127 && std::isfinite(v) && std::isfinite(next)) values.push_back((v + next) / 2);
    }
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {static_cast<int64_t>(values.size())});
  for (DType d : types) b.Output(b.Cast(x, d), std::string(DTypeName(d)));
  Graph graph = b.Build().value();
  CpuCompileOptions options;
  options.poison_outputs = true;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  const std::vector<Tensor> inputs = {Tensor::FromDoubles(DType::kF32, {static_cast<int64_t>(values.size())}, values)};
  auto expected = RunReference(graph, inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto actual = (*compiled)->Run(inputs);
  ASSERT_TRUE(actual.ok()) << actual.status().ToString();
  for (size_t t = 0; t < std::size(types); ++t) {
    const auto* got = reinterpret_cast<const uint8_t*>((*actual)[t].data());
    const auto* want = reinterpret_cast<const uint8_t*>((*expected)[t].data());
    int mismatches = 0;
    for (size_t i = 0; i < values.size() && mismatches < 5; ++i)
      if (got[i] != want[i]) {
        ++mismatches;
        ADD_FAILURE() << DTypeName(types[t]) << " of " << values[i] << ": kernel 0x" << std::hex << int(got[i]) << ", reference 0x"
                      << int(want[i]);
      }
  }
}

TEST(CpuExecutableTest, AGeneratorOutputIsWrittenBeforeWhatReadsIt) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {1024, 2048});  // an iota constant folding keeps
  Value negated = b.Unary(OpCode::kNeg, x);
  Value positions = b.Iota({1024, 2048}, 1, DType::kF32);
  b.Output(positions, "positions");
  b.Output(b.Add(negated, b.MulScalar(positions, 0.5)), "y");
  auto graph = RunGraphPasses(*b.Build(), PassOptions{});
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  for (bool fuse : {true, false}) CompileAndCheckGraph(*graph, fuse, RandomInputs(*graph, 301), fuse ? "fused" : "unfused");
}

// The per-group timings of one run (what --trace draws) lie on the run's clock one after
// another, not all at its start.
TEST(CpuTimingsTest, StepsFollowOneAnotherOnTheRunsClock) {
  auto graph = ImportAndPass(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/mlp_block");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<Tensor> inputs = RandomInputs(*graph, 500);
  std::vector<KernelTiming> timings;
  ASSERT_TRUE((*compiled)->Run(inputs, &timings).ok());
  ASSERT_GE(timings.size(), 2u);
  EXPECT_GE(timings[0].start_us, 0);
  for (size_t i = 1; i < timings.size(); ++i)
    EXPECT_GE(timings[i].start_us, timings[i - 1].start_us + timings[i - 1].duration_us) << timings[i].name;
  EXPECT_GT(timings.back().start_us, 0);
}

// An op no generated kernel or library takes (here a pool over f64, which the window rewrite
// the passes would apply is skipped for) runs on the reference interpreter, and the executable
// says so in one line naming the group, the op and why: what the CLI and Python warn of.
TEST(CpuExecutableTest, ReferenceWarningsNameTheGroupTheOpAndWhy) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF64, {1, 2, 8, 8});
  Value pooled = b.MaxPool(b.Unary(OpCode::kRelu, x), PoolParams{{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}});
  b.Output(b.AddScalar(pooled, 1), "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<std::string> warnings = (*compiled)->ReferenceWarnings();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("max_pool %"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("on the reference interpreter: "), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("group "), std::string::npos) << warnings[0];
}

// A kernel whose flops + bytes are under kCallingThreadWork gets a team of one (no worker
// woken, none waited for); a larger one keeps every core. The mechanism only: how much it
// pays is measured in bench/results/2026-11-29-cpu-under-load.md.
std::string PointwiseKernelSource(int64_t elements) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {elements});
  b.Output(b.AddScalar(b.Unary(OpCode::kRelu, x), 1), "y");
  auto graph = b.Build();
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  EXPECT_TRUE((*compiled)->Run({Tensor::Random(DType::kF32, {elements}, 7)}).ok());
  return (*compiled)->kernels().at(0).source;
}

TEST(CpuExecutableTest, SmallKernelsRunOnTheCallingThread) {
  std::string small = PointwiseKernelSource(1024);  // 8 KiB + 2 Kflop
  EXPECT_NE(small.find("#pragma omp parallel for simd schedule(static) num_threads(1)\n"), std::string::npos) << small;
  std::string large = PointwiseKernelSource(int64_t{1} << 20);  // 8 MiB
  EXPECT_NE(large.find("#pragma omp parallel for simd schedule(static)\n"), std::string::npos) << large;
  EXPECT_EQ(large.find("num_threads"), std::string::npos) << large;
}

// A run's parallel regions share one team sized by its largest step's work (RunTeamSize): a
// 64x256x512 product (16.8 MFLOP) gets 8 threads where OpenMP offers 16, a small pointwise
// kernel a few, an attention kernel one per 2 MFLOP of its products, a 1 GFLOP product OpenMP's
// default (0).
TEST(CpuExecutableTest, ARunsTeamFollowsItsLargestStep) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(16);
  auto team_of = [](StatusOr<Graph> graph) {
    EXPECT_TRUE(graph.ok()) << graph.status().ToString();
    CpuCompileOptions options;
    options.cache_dir = TestCacheDir();
    auto compiled = CompileForCpu(*graph, options);
    EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
    EXPECT_TRUE((*compiled)->Run(RandomInputs(*graph, 3)).ok());
    return (*compiled)->team_size();
  };
  const std::string examples = std::string(TILEFUSE_SOURCE_DIR) + "/examples/";
  EXPECT_EQ(team_of(ImportAndPass(examples + "matmul_bias_relu.onnxtxt")), 8);
  const int gelu = team_of(ImportAndPass(examples + "gelu_composite.onnxtxt"));  // 32768 elements, ~10 ops each
  EXPECT_GE(gelu, 1);
  EXPECT_LE(gelu, 4);
  EXPECT_EQ(team_of(ImportAndPass(examples + "causal_attention.onnxtxt")), 2);  // 8 x 64 x 64 x (32 + 32) x 2 flops
  GraphBuilder b;
  b.Output(b.MatMul(b.Parameter("a", DType::kF32, {512, 1024}), b.Parameter("w", DType::kF32, {1024, 1024})), "y");
  EXPECT_EQ(team_of(b.Build()), 0);
  EXPECT_EQ(omp_get_max_threads(), 16);
  omp_set_num_threads(before);
}

// The second run is on the calling thread alone (the reference a stalled team is compared
// with), the others with a team; either way the caller's OpenMP team size is as it was.
TEST(CpuExecutableTest, RunsLeaveTheCallersTeamSizeAsItWas) {
  auto graph = ImportAndPass(std::string(TILEFUSE_SOURCE_DIR) + "/tests/models/mlp_block");
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  CpuCompileOptions options;
  options.cache_dir = TestCacheDir();
  auto compiled = CompileForCpu(*graph, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  std::vector<Tensor> inputs = RandomInputs(*graph, 501);
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  for (int run = 0; run < 3; ++run) {
    ASSERT_TRUE((*compiled)->Run(inputs).ok());
    EXPECT_EQ(omp_get_max_threads(), 3) << "run " << run;
  }
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace tilefuse

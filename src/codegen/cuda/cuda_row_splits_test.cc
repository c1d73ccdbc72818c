// Rows split over blocks (codegen/cuda/cuda_row_splits.h): which kernels the rule splits and
// how far, the source and launch it emits, the configurations it refuses, every tuner
// candidate compiled for sm_90a (skipped without NVRTC), and on a GPU the split kernels against
// the f64 reference, three runs of one compiled model so that a counter not zeroed again (no
// block would be the last) or a total left from the run before shows (skipped without a GPU;
// scripts/gpu-check.sh runs it).
#include "codegen/cuda/cuda_row_splits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <limits>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "codegen/cuda/cuda_config_json.h"
#include "codegen/lower.h"
#include "driver/driver.h"
#include "fusion/group_classifier.h"
#include "fusion/planner.h"
#include "passes/pipeline.h"
#include "testing/random_inputs.h"
#include "testing/reference_check.h"
#include "tilefuse/builder.h"
#include "tune/cuda_search_space.h"

namespace tilefuse {
namespace {

// max |x| over all of x: the amax a quantization reads.
Graph AmaxGraph(DType dtype, const Shape& shape) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, shape);
  std::vector<int64_t> axes;
  for (size_t a = 0; a < shape.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  b.Output(b.Reduce(OpCode::kReduceMax, b.Unary(OpCode::kAbs, x), axes, false), "amax");
  return b.Build().value();
}

// Two reductions of each row, neither reading the other's result, and an epilogue over both:
// sqrt(mean(x²)) / max(x) a row.
Graph RmsOverMaxGraph(DType dtype, int64_t rows, int64_t columns) {
  GraphBuilder b;
  Value x = b.Parameter("x", dtype, {rows, columns});
  Value x32 = b.Cast(x, DType::kF32);
  Value rms = b.Unary(OpCode::kSqrt, b.Reduce(OpCode::kReduceMean, b.Mul(x32, x32), {1}, false));
  b.Output(b.Div(rms, b.Reduce(OpCode::kReduceMax, x32, {1}, false)), "y");
  return b.Build().value();
}

Graph SumGraph(DType dtype, int64_t rows, int64_t columns) {
  GraphBuilder b;
  b.Output(b.Reduce(OpCode::kReduceSum, b.Parameter("x", dtype, {rows, columns}), {1}, false), "y");
  return b.Build().value();
}

// `graph` as one group, lowered. Planned for the CPU: a GPU's plan keeps the stores along a
// few long rows apart from their reduction (so that it splits), and these tests need the group
// that cannot split too.
Kernel Lowered(Graph graph) {
  auto passed = RunGraphPasses(std::move(graph), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  PlannerOptions on_cpu;
  on_cpu.device = "cpu";
  auto plan = PlanFusion(*passed, on_cpu);
  EXPECT_TRUE(plan.ok());
  EXPECT_EQ(plan->groups.size(), 1u);
  auto kernel = LowerGroup(*passed, plan->groups[0], FindInlinedGenerators(*passed));
  EXPECT_TRUE(kernel.ok()) << kernel.status().ToString();
  return *kernel;
}

Kernel SoftmaxKernel(int64_t rows, int64_t columns) {
  GraphBuilder b;
  b.Output(b.Softmax(b.Parameter("x", DType::kF32, {rows, columns}), 1), "y");
  return Lowered(b.Build().value());
}

Kernel MeanThenVarianceKernel(int64_t rows, int64_t columns) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kF32, {rows, columns});
  Value centered = b.Sub(x, b.Reduce(OpCode::kReduceMean, x, {1}, true));
  b.Output(b.Reduce(OpCode::kReduceMean, b.Mul(centered, centered), {1}, false), "variance");
  return Lowered(b.Build().value());
}

CudaKernelConfig OnH100() {
  CudaKernelConfig c;
  c.sm_count = 132;
  c.clusters = true;
  return c;
}

TEST(RowSplitsTest, TheRuleSplitsAFewLongRowsToFillTheGpuTwice) {
  // One row of 2^26 f32: 264 blocks of 1024 threads, each thread 62 vectors of its slice.
  const CudaKernelConfig amax = ResolveCudaConfig(Lowered(AmaxGraph(DType::kF32, {8192, 8192})), OnH100());
  EXPECT_EQ(amax.splits, 264);
  EXPECT_EQ(amax.cache_row, 0);
  // Four rows: 66 blocks each.
  EXPECT_EQ(ResolveCudaConfig(Lowered(SumGraph(DType::kBF16, 4, 1 << 24)), OnH100()).splits, 66);
  // Rows that fill the GPU, and rows too short for 8 vectors a thread in two slices, stay whole.
  EXPECT_EQ(ResolveCudaConfig(Lowered(SumGraph(DType::kF32, 132, 1 << 20)), OnH100()).splits, 0);
  EXPECT_EQ(ResolveCudaConfig(Lowered(SumGraph(DType::kF32, 1, 4096)), OnH100()).splits, 0);
  // Where the row needs its totals in every block, or a pass reads an earlier total.
  const Kernel softmax = SoftmaxKernel(1, 1 << 22), variance = MeanThenVarianceKernel(2, 1 << 22);
  EXPECT_EQ(ResolveCudaConfig(softmax, OnH100()).splits, 0);
  EXPECT_NE(WhyRowsCannotSplit(softmax).find("store along the row"), std::string::npos) << WhyRowsCannotSplit(softmax);
  EXPECT_EQ(ResolveCudaConfig(variance, OnH100()).splits, 0);
  EXPECT_NE(WhyRowsCannotSplit(variance).find("earlier one's result"), std::string::npos) << WhyRowsCannotSplit(variance);
  // The GPU's SM count sets the aim; unknown, an H100's.
  CudaKernelConfig half_the_sms = OnH100();
  half_the_sms.sm_count = 66;
  EXPECT_EQ(ResolveCudaConfig(Lowered(SumGraph(DType::kF32, 1, 1 << 26)), half_the_sms).splits, 132);
  EXPECT_EQ(ResolveCudaConfig(Lowered(SumGraph(DType::kF32, 1, 1 << 26)), CudaKernelConfig{}).splits, 264);
}

TEST(RowSplitsTest, TheSplitKernelHandsItsTotalsToTheRowsLastBlock) {
  Kernel k = Lowered(RmsOverMaxGraph(DType::kBF16, 3, 1 << 21));
  const CudaKernelConfig c = ResolveCudaConfig(k, OnH100());
  ASSERT_EQ(c.splits, 32);  // ceil(264 / 3) = 88 wanted, at most 2^21 / (1024 threads · 8 · 8 vectors of 8)
  auto source = EmitCudaKernel(k, c);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(source->launch.grid[0], 3 * c.splits);
  EXPECT_EQ(source->launch.scratch_bytes, kScratchCounterBytes + 2 * 3 * c.splits * 8);
  int scratch_args = 0;
  for (const LaunchArg& a : source->launch.args) scratch_args += a.kind == LaunchArg::Kind::kScratch;
  EXPECT_EQ(scratch_args, 2);
  EXPECT_EQ(source->num_params, static_cast<int>(source->launch.args.size()));
  for (const char* text : {"tf_store_partial(partials", "atomicAdd(row_counters + blockIdx.x / kSplits, 1u) == kSplits - 1",
                           "row_counters[blockIdx.x / kSplits] = 0",
                           "if (finishes_row) {", "tf_load_partial<float>(partials"})
    EXPECT_NE(source->function.find(text), std::string::npos) << text << " not in:\n" << source->function;
  EXPECT_NE(source->strategy.find(fmt::format("split over {} blocks", c.splits)), std::string::npos) << source->strategy;
}

TEST(RowSplitsTest, ConfigurationsTheSplitCannotRunAreRefused) {
  const Kernel softmax = SoftmaxKernel(1, 1 << 22), sum = Lowered(SumGraph(DType::kF32, 1, 1 << 22));
  CudaKernelConfig asked = OnH100();
  asked.splits = 8;
  const CudaKernelConfig on_softmax = ResolveCudaConfig(softmax, asked);
  EXPECT_FALSE(EmitCudaKernel(softmax, on_softmax).ok());
  CudaKernelConfig base = ResolveCudaConfig(sum, OnH100());
  ASSERT_GT(base.splits, 1);
  for (auto change : std::vector<void (*)(CudaKernelConfig&)>{
           [](CudaKernelConfig& c) { c.threads_per_row = 32; },  // a warp per row
           [](CudaKernelConfig& c) { c.cluster = 2; },           // a cluster and splits
           [](CudaKernelConfig& c) { c.splits = 1 << 21; },      // more splits than vectors
       }) {
    CudaKernelConfig c = base;
    change(c);
    EXPECT_FALSE(EmitCudaKernel(sum, c).ok()) << CudaConfigToJson(c).dump();
  }
  // A held slice asked for is resolved away: split, each block re-reads its slice per pass.
  CudaKernelConfig held = base;
  held.cache_row = 1;
  EXPECT_EQ(ResolveCudaConfig(sum, held).cache_row, 0);
}

TEST(RowSplitsTest, TheTunerTriesHalfTwiceAndNoSplits) {
  const Kernel k = Lowered(SumGraph(DType::kF32, 1, 1 << 26));
  const CudaSearchSpace space = CudaCandidates(k, true);
  const int rule = ResolveCudaConfig(k, CudaKernelConfig{}).splits;
  std::vector<int> tried;
  for (const CudaKernelConfig& c : space.candidates) tried.push_back(c.splits);
  for (int splits : {rule, rule / 2, rule * 2, 0})
    EXPECT_NE(std::find(tried.begin(), tried.end(), splits), tried.end()) << splits << " splits not tried";
}

TEST(RowSplitsTest, EveryCandidateCompilesForSm90aWithoutSpills) {
  auto nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: split rows not compiled";
  std::vector<CudaKernelSource> sources;
  const std::vector<Kernel> kernels = {Lowered(AmaxGraph(DType::kF32, {8192, 8192})), Lowered(RmsOverMaxGraph(DType::kBF16, 3, 1 << 21)),
                                       Lowered(SumGraph(DType::kF64, 2, 1 << 21)), Lowered(SumGraph(DType::kF32, 2, 3000001))};
  for (size_t i = 0; i < kernels.size(); ++i) {
    const CudaSearchSpace space = CudaCandidates(kernels[i], true);
    int split = 0;
    for (size_t c = 0; c < space.candidates.size(); ++c) {
      if (space.candidates[c].splits <= 1) continue;
      ++split;
      Kernel k = kernels[i];
      k.name = fmt::format("split{}_{}", i, c);
      auto source = EmitCudaKernel(k, space.candidates[c]);
      ASSERT_TRUE(source.ok()) << CudaConfigToJson(space.candidates[c]).dump() << ": " << source.status().ToString();
      sources.push_back(*source);
    }
    EXPECT_GE(split, 3) << "kernel " << i << ": the rule's, half and twice its splits";
  }
  auto cubin = nvrtc->Compile(CudaTranslationUnit(sources), "sm_90a");
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  for (const PtxasKernelInfo& info : ParsePtxasLog(cubin->ptxas_log)) {
    EXPECT_EQ(info.spill_store_bytes, 0) << info.line;
    EXPECT_EQ(info.spill_load_bytes, 0) << info.line;
  }
}

// On a GPU: each graph three times through one compiled model, new inputs each run and the
// second run's scaled down (a max left from the first would show), outputs poisoned before
// each run. Rows reaching the edges: a NaN in one slice, every value -inf.
TEST(GpuRowSplitsTest, SplitRowsMatchTheReferenceRunAfterRun) {
  auto device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; split rows not run";
  struct Case {
    Graph graph;
    const char* name;
    std::function<void(Tensor&)> edit = [](Tensor&) {};
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Case> cases;
  cases.push_back({AmaxGraph(DType::kF32, {4096, 4096}), "amax f32 4096x4096"});
  cases.push_back({AmaxGraph(DType::kBF16, {3, 1 << 21}), "amax bf16, a NaN", [](Tensor& x) {
                     x.SetDouble(5000001, std::numeric_limits<double>::quiet_NaN());
                   }});
  cases.push_back({RmsOverMaxGraph(DType::kBF16, 3, 1 << 21), "rms / max bf16, a row of -inf", [&](Tensor& x) {
                     for (int64_t c = 0; c < (1 << 21); ++c) x.SetDouble((1 << 21) + c, -inf);
                   }});
  cases.push_back({SumGraph(DType::kF64, 2, 1 << 21), "sum f64"});
  cases.push_back({SumGraph(DType::kF32, 2, 3000001), "sum f32, ragged slices (a vector of 1)"});
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto passed = RunGraphPasses(c.graph, PassOptions{});
    ASSERT_TRUE(passed.ok()) << passed.status().ToString();
    CudaCompileOptions options;
    options.poison_outputs = true;
    auto compiled = CompileForCuda(*passed, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    EXPECT_NE((*compiled)->source().find("tf_store_partial"), std::string::npos) << "the rows were not split:\n" << (*compiled)->source();
    for (int run = 0; run < 3; ++run) {
      SCOPED_TRACE(fmt::format("run {}", run));
      Tensor x = RandomInputs(*passed, 300 + static_cast<uint64_t>(run)).at(0);
      if (run == 1) {
        std::vector<double> v = x.ToDoubles();
        for (double& e : v) e *= 0.25;
        x = Tensor::FromDoubles(x.dtype(), x.shape(), v);
      }
      c.edit(x);
      std::vector<Tensor> inputs = {x};
      ExpectMatchesReference(*passed, inputs, (*compiled)->Run(inputs));
    }
  }
}

}  // namespace
}  // namespace tilefuse

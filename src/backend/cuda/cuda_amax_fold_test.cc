// Amaxes computed in their products' epilogues (codegen/gemm_amax.h, FoldAmaxesIntoProducts):
// planned and lowered for the GPU (no GPU needed; NVRTC compiles these graphs' kernels in
// cuda_program_test), then, on a GPU (skipped without one; scripts/gpu-check.sh runs it), run
// three times against the reference, the scratch words' reset between launches included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_driver.h"
#include "backend/cuda/cuda_executable.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_program_test_util.h"
#include "driver/driver.h"
#include "frontend/onnx/importer.h"
#include "passes/pipeline.h"
#include "reference/interpreter.h"
#include "runtime/memory_plan.h"
#include "testing/random_inputs.h"

namespace tilefuse {
namespace {

// A model of the source tree (`path` from its root), passed as the CUDA backend passes graphs
// (FP8 products, their weights K-major).
Graph Load(const std::string& path) {
  auto model = ImportOnnx(std::string(TILEFUSE_SOURCE_DIR) + "/" + path);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  PassOptions passes;
  passes.fp8_products = true;
  passes.k_major_weights.eight_bit = true;
  auto graph = RunGraphPasses(std::move(model->graph), passes);
  EXPECT_TRUE(graph.ok()) << graph.status().ToString();
  return std::move(*graph);
}

CudaProgram Lower(const Graph& g, bool amax_in_epilogue = true, GemmPath path = GemmPath::kTemplate) {
  CudaTarget target;
  target.gemm = path;
  target.overrides.amax_in_epilogue = amax_in_epilogue;
  return LowerForTest(g, target);
}

// The graph output named `name`.
int OutputNamed(const Graph& g, const std::string& name) {
  for (const Graph::Output& o : g.outputs())
    if (o.name == name) return o.node;
  ADD_FAILURE() << "no output " << name;
  return -1;
}

// What the graph's Abs reads: the value whose amax is taken.
int AbsInput(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == OpCode::kAbs) return n.inputs[0];
  ADD_FAILURE() << "no Abs";
  return -1;
}

bool Passes(const LaunchSpec& launch, LaunchArg::Kind kind, int node, int64_t scalar = 0) {
  return std::any_of(launch.args.begin(), launch.args.end(),
                     [&](const LaunchArg& a) { return a.kind == kind && a.node == node && (kind != LaunchArg::Kind::kScratch || a.scalar == scalar); });
}

// y = x·w + b is read by the Relu and the amax only: one kernel computes z and the amax, y is
// neither stored nor given memory, and the amax's group keeps no kernel.
TEST(CudaAmaxFoldTest, AnAmaxOfAValueOnlyItReadsIsTakenInTheEpilogueAndTheValueIsNotStored) {
  const Graph g = Load("tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt");
  ASSERT_EQ(KernelSources(Lower(g, false)).size(), 2u) << "the product and the amax's reduction";
  const CudaProgram program = Lower(g);
  const std::vector<CudaKernelSource> kernels = KernelSources(program);
  ASSERT_EQ(kernels.size(), 1u);
  const CudaKernelSource& k = kernels.front();
  const int amax = OutputNamed(g, "amax"), y = AbsInput(g);
  EXPECT_NE(k.strategy.find("the amax of %" + std::to_string(y) + " in the epilogue (%" + std::to_string(y) + " not stored)"), std::string::npos)
      << k.strategy;
  EXPECT_NE(k.function.find("kAmax = 1"), std::string::npos);
  EXPECT_NE(k.function.find("tf_amax = tf::GemmAmaxUpdate(tf_amax, tf_cvt_bf16(tf_pack_bf16("), std::string::npos) << "|u| of u rounded as stored\n" << k.function;
  EXPECT_NE(k.function.find("amax_out[0] = tf_pack_bf16(__uint_as_float(bits))"), std::string::npos) << k.function;
  EXPECT_TRUE(Passes(k.launch, LaunchArg::Kind::kBuffer, amax));
  EXPECT_FALSE(Passes(k.launch, LaunchArg::Kind::kBuffer, y)) << "y is not written";
  EXPECT_TRUE(Passes(k.launch, LaunchArg::Kind::kScratch, -1, kAmaxScratchOffset));
  EXPECT_GE(k.launch.scratch_bytes, kScratchCounterBytes);
  int folded = 0;
  for (const CudaGroupProgram& p : program.groups) {
    if (p.mode == CudaGroupProgram::Mode::kGemmTemplate) {
      EXPECT_EQ(p.unstored_outputs, std::vector<int>{y});
      EXPECT_FALSE(p.library_alternative.has_value()) << "cuBLASLt's call would not compute the amax";
      ASSERT_TRUE(p.kernel.has_value());
      EXPECT_NE(std::find(p.kernel->outputs.begin(), p.kernel->outputs.end(), amax), p.kernel->outputs.end());
      EXPECT_EQ(std::find(p.kernel->outputs.begin(), p.kernel->outputs.end(), y), p.kernel->outputs.end());
    } else {
      EXPECT_FALSE(p.kernel.has_value());
      folded += p.grouped_into >= 0;
    }
  }
  EXPECT_EQ(folded, 1);
}

// The memory plan as the backend makes it holds: no step writes or reads the unstored y (a
// step reading it would read a buffer nothing wrote: the planner refuses that).
TEST(CudaAmaxFoldTest, TheUnstoredValueHasNoMemoryAndThePlanHolds) {
  for (const char* model : {"tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt", "bench/cases/fp8/gemm_e4m3_amax_4096.onnx"}) {
    SCOPED_TRACE(model);
    const Graph g = Load(model);
    CudaTarget target;
    target.gemm = GemmPath::kTemplate;
    StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    Schedule schedule = ScheduleFromFusionPlan(g, plan->plan);
    WriteGroupedOutputsAtTheirKernel(*program, schedule);
    std::vector<std::vector<int>> touched(program->groups.size());  // the nodes each kernel's arguments name
    for (const CudaGroupProgram& p : program->groups)
      if (p.kernel) touched[static_cast<size_t>(p.group)] = GraphValuesOf(p.kernel->source.launch);
    AddStepReads(touched, schedule);
    const int y = AbsInput(g);
    for (const ScheduleStep& step : schedule.steps) {
      for (int b : step.reads) EXPECT_NE(schedule.buffers[static_cast<size_t>(b)].node, y) << step.name << " reads y";
      for (int b : step.writes) EXPECT_NE(schedule.buffers[static_cast<size_t>(b)].node, y) << step.name << " writes y";
    }
    const Status planned = PlanMemory(schedule).status();
    EXPECT_TRUE(planned.ok()) << planned.ToString();
  }
}

// y is a graph output: still stored, its amax taken in the same epilogue ([1, 1], kept dims).
TEST(CudaAmaxFoldTest, AValueReadElsewhereIsStoredAndItsAmaxTakenToo) {
  const Graph g = Load("tests/gemm/gemm_residual_amax_kept_bf16.onnxtxt");
  const CudaProgram program = Lower(g);
  const std::vector<CudaKernelSource> kernels = KernelSources(program);
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_TRUE(Passes(kernels.front().launch, LaunchArg::Kind::kBuffer, OutputNamed(g, "y")));
  EXPECT_TRUE(Passes(kernels.front().launch, LaunchArg::Kind::kBuffer, OutputNamed(g, "amax")));
  for (const CudaGroupProgram& p : program.groups) EXPECT_TRUE(p.unstored_outputs.empty());
}

// The FP8 forms: the f32 sum only the quantization and the amax read is not stored; an amax of
// the bf16 cast (a graph output) widened to f32 after the ReduceMax is of the cast as stored.
TEST(CudaAmaxFoldTest, FP8ProductsTakeTheAmaxOfTheirOutputBeforeItIsQuantized) {
  const Graph unstored = Load("tests/gemm/gemm_fp8_e4m3_amax_of_unstored_output.onnx");
  std::vector<CudaKernelSource> kernels = KernelSources(Lower(unstored));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(kernels.front().strategy.find("FP8"), std::string::npos) << kernels.front().strategy;
  EXPECT_NE(kernels.front().strategy.find("not stored)"), std::string::npos) << kernels.front().strategy;
  EXPECT_NE(kernels.front().function.find("amax_out[0] = tf_pack_f32("), std::string::npos);
  const Graph cast = Load("tests/gemm/gemm_fp8_e4m3_amax_of_cast_output_odd_n.onnx");
  kernels = KernelSources(Lower(cast));
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels.front().strategy.find("not stored)"), std::string::npos) << kernels.front().strategy;
  EXPECT_NE(kernels.front().function.find("GemmAmaxUpdate(tf_amax, tf_cvt_bf16(tf_pack_bf16("), std::string::npos);
  EXPECT_NE(kernels.front().function.find("amax_out[0] = tf_pack_f32("), std::string::npos) << "the widened amax's type";
}

// The planner puts a product's scales and quantization with the amax's reduction where the
// product has no epilogue of its own (y = DQ(x)·DQ(w)ᵀ, q = QuantizeLinear(y), the amax of y):
// those ops join the product's epilogue, and the f32 y is never stored.
TEST(CudaAmaxFoldTest, TheQuantizationPlannedWithTheAmaxJoinsTheProductsEpilogue) {
  const Graph g = Load("bench/cases/fp8/gemm_e4m3_amax_4096.onnx");
  const CudaProgram unfolded = Lower(g, false);
  ASSERT_EQ(KernelSources(unfolded).size(), 2u);
  const CudaProgram program = Lower(g);
  const std::vector<CudaKernelSource> kernels = KernelSources(program);
  ASSERT_EQ(kernels.size(), 1u);
  const CudaKernelSource& k = kernels.front();
  EXPECT_NE(k.strategy.find("not stored)"), std::string::npos) << k.strategy;
  EXPECT_NE(k.strategy.find("TMA store"), std::string::npos) << "q staged and stored by TMA: " << k.strategy;
  EXPECT_TRUE(Passes(k.launch, LaunchArg::Kind::kBuffer, OutputNamed(g, "q")));
  EXPECT_TRUE(Passes(k.launch, LaunchArg::Kind::kBuffer, OutputNamed(g, "amax")));
  const GemmTemplateKernel* product = nullptr;
  for (const CudaGroupProgram& p : program.groups)
    if (p.kernel && p.kernel->template_kernel) product = p.kernel->template_kernel->GemmProblem();
  ASSERT_NE(product, nullptr);
  ASSERT_TRUE(product->amax.has_value());
  EXPECT_FALSE(product->amax->stored);
  for (const LaunchArg& a : k.launch.args) EXPECT_NE(a.node, product->product) << "the f32 product is not passed";
}

// Where the product goes to cuBLASLt, or the fold is switched off, the amax keeps its kernel.
TEST(CudaAmaxFoldTest, OffTheTemplateTheAmaxKeepsItsKernel) {
  const Graph g = Load("tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt");
  for (const CudaProgram& program : {Lower(g, false), Lower(g, true, GemmPath::kLibrary)}) {
    int reductions = 0;
    for (const CudaGroupProgram& p : program.groups) {
      EXPECT_TRUE(p.unstored_outputs.empty());
      reductions += p.kind == GroupKind::kRowReduction && p.kernel.has_value() && p.grouped_into < 0;
    }
    EXPECT_EQ(reductions, 1);
  }
}

// On a GPU: each graph's amax against the reference's, three runs of one compiled model with new
// inputs each, the second's scaled down: an amax left from the run before (scratch words not
// zeroed again) would show there, and so would an amax not written at all (the counter not
// zeroed: no warp would be the last), the buffer keeping the larger value before. Within 2^-7
// of the reference's (bf16 u rounded to bf16 from f32 or from f64 may differ by an ulp).
TEST(GpuAmaxTest, TheAmaxInTheEpilogueMatchesTheReferenceRunAfterRun) {
  if (!CudaDevice::Get().ok()) GTEST_SKIP() << "no GPU: the amax in the epilogue not run";
  for (const char* model : {"tests/gemm/gemm_bias_relu_amax_ragged_bf16.onnxtxt", "tests/gemm/gemm_splitk_tanh_amax_bf16.onnxtxt",
                            "tests/gemm/gemm_fp8_e4m3_amax_of_unstored_output.onnx", "tests/gemm/gemm_fp8_e4m3_amax_of_cast_output_odd_n.onnx",
                            "bench/cases/fp8/gemm_e4m3_amax_4096.onnx"}) {
    SCOPED_TRACE(model);
    const Graph g = Load(model);
    CudaCompileOptions options;
    options.gemm = GemmPath::kTemplate;
    auto compiled = CompileForCuda(g, options);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    size_t amax = g.outputs().size();
    for (size_t o = 0; o < g.outputs().size(); ++o)
      if (g.outputs()[o].name == "amax") amax = o;
    ASSERT_LT(amax, g.outputs().size());
    for (int run = 0; run < 3; ++run) {
      std::vector<Tensor> inputs = RandomInputs(g, 100 + static_cast<uint64_t>(run));
      if (run == 1)  // smaller: a max left from run 0 would be larger than this run's
        for (Tensor& t : inputs)
          if (t.dtype() == DType::kBF16 || t.dtype() == DType::kF32) t = Tensor::FromDoubles(t.dtype(), t.shape(), [&] {
            std::vector<double> v = t.ToDoubles();
            for (double& x : v) x *= 0.25;
            return v;
          }());
      auto expected = RunReference(g, inputs);
      ASSERT_TRUE(expected.ok()) << expected.status().ToString();
      auto got = (*compiled)->Run(inputs);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      const double want = (*expected)[amax].ToDoubles().at(0), have = (*got)[amax].ToDoubles().at(0);
      EXPECT_TRUE(std::isfinite(have)) << "run " << run << ": the amax is " << have;
      EXPECT_NEAR(have, want, std::abs(want) * 0x1p-7) << "run " << run;
    }
  }
}

}  // namespace
}  // namespace tilefuse

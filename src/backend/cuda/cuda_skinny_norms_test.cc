// Layer and RMS norms computed in the skinny products that read them (TILEFUSE_SKINNY_NORMS=1):
// planned and lowered for the GPU and compiled by NVRTC (no GPU needed). The GPU run against the
// reference is bench/experiments/decode.sh's (tests/gemm/gemm_skinny_{layer,rms}_norm_*.onnxtxt).
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/cuda_program_test_util.h"
#include "backend/cuda/nvrtc_compiler.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "tilefuse/builder.h"

namespace tilefuse {
namespace {

// x [rows, 768] through a layer norm (with or without a bias) into x · w + b over `n` columns,
// as a decode step's norm before its first MLP product.
Graph NormThenProduct(int64_t rows, bool bias, bool norm_also_returned = false, int64_t n = 1024) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {rows, 768});
  Value gamma = b.Parameter("gamma", DType::kBF16, {768});
  Value beta = bias ? b.Parameter("beta", DType::kBF16, {768}) : Value{};
  Value w = b.Parameter("w", DType::kBF16, {768, n});
  Value normed = b.LayerNorm(x, gamma, beta, 1, 1e-5);
  b.Output(b.Add(b.MatMul(normed, w), b.BroadcastTo(b.Parameter("b", DType::kBF16, {n}), {rows, n})), "y");
  if (norm_also_returned) b.Output(normed, "normed");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

CudaProgram Lower(const Graph& g, bool skinny_norms, bool skinny_clusters = false) {
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;
  target.overrides.skinny_norms = skinny_norms;
  target.overrides.skinny_clusters = skinny_clusters;
  return LowerForTest(g, target);
}

TEST(CudaSkinnyNormsTest, ALayerNormReadByOneSkinnyProductIsComputedInIt) {
  for (bool bias : {true, false}) {
    const Graph g = NormThenProduct(1, bias);
    const std::vector<CudaKernelSource> unfolded = KernelSources(Lower(g, false));
    ASSERT_EQ(unfolded.size(), 2u) << "a norm and a product";
    const CudaProgram program = Lower(g, true);
    const std::vector<CudaKernelSource> folded = KernelSources(program);
    ASSERT_EQ(folded.size(), 1u) << "the product alone";
    const std::string& text = folded.front().function;
    EXPECT_NE(text.find("kNormA = 1"), std::string::npos) << text;
    EXPECT_NE(text.find(bias ? "norm_x, norm_scale, norm_bias, 9.999999747e-06f" : "norm_x, norm_scale, nullptr"), std::string::npos) << text;
    EXPECT_NE(folded.front().strategy.find("A a layer norm of its input"), std::string::npos);
    int normed_into = 0;
    for (const CudaGroupProgram& p : program.groups) normed_into += p.normed_into >= 0;
    EXPECT_EQ(normed_into, 1);
    // The product reads x, the scale and the bias (or the scale again) as buffers.
    int buffers = 0;
    for (const LaunchArg& a : folded.front().launch.args) buffers += a.kind == LaunchArg::Kind::kBuffer;
    EXPECT_EQ(buffers, 2 + 3) << "the bias vector and the output, then x, the scale and the bias";
  }
}

TEST(CudaSkinnyNormsTest, ANormAlsoReturnedOrOverManyRowsKeepsItsKernel) {
  EXPECT_EQ(KernelSources(Lower(NormThenProduct(1, true, /*norm_also_returned=*/true), true)).size(), 2u);
  EXPECT_EQ(KernelSources(Lower(NormThenProduct(24, true), true)).size(), 2u) << "24 rows: more than the norm's warp holds (16)";
}

// x [rows, 1024] through an RMS norm as transformers' LlamaRMSNorm traces it, read by two
// products (a LLaMA-style layer's gate and up; SwiGLU after them); `also_pointwise`: a pointwise
// op reads the norm too.
Graph RmsNormThenTwoProducts(int64_t rows, bool also_pointwise = false) {
  GraphBuilder b;
  Value x = b.Parameter("x", DType::kBF16, {rows, 1024});
  Value scale = b.Parameter("scale", DType::kBF16, {1024});
  Value xf = b.Cast(x, DType::kF32);
  Value mean = b.Reduce(OpCode::kReduceMean, b.Mul(xf, xf), {1}, true);
  Value normed = b.Mul(scale, b.Cast(b.Mul(xf, b.Unary(OpCode::kRsqrt, b.AddScalar(mean, 1e-6))), DType::kBF16));
  auto linear = [&](const char* name) { return b.MatMul(normed, b.Transpose(b.Parameter(name, DType::kBF16, {2816, 1024}), {1, 0})); };
  const Value gate = linear("wg"), up = linear("wu");
  const Value g32 = b.Cast(gate, DType::kF32);
  b.Output(b.Mul(b.Cast(b.Mul(g32, b.Unary(OpCode::kSigmoid, g32)), DType::kBF16), up), "y");
  if (also_pointwise) b.Output(b.Unary(OpCode::kTanh, normed), "t");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

// Both readers compute the norm (no mean, no bias: kNormA = 2); the norm keeps no kernel.
TEST(CudaSkinnyNormsTest, AnRmsNormReadByTwoSkinnyProductsIsComputedInBoth) {
  const Graph g = RmsNormThenTwoProducts(1);
  const std::vector<CudaKernelSource> unfolded = KernelSources(Lower(g, false));
  ASSERT_EQ(unfolded.size(), 3u) << "a norm and two products";
  const CudaProgram program = Lower(g, true);
  const std::vector<CudaKernelSource> folded = KernelSources(program);
  ASSERT_EQ(folded.size(), 2u) << "the products alone";
  for (const CudaKernelSource& k : folded) {
    EXPECT_NE(k.function.find("kNormA = 2"), std::string::npos) << k.function;
    EXPECT_NE(k.function.find("norm_x, norm_scale, nullptr, 9.999999975e-07f"), std::string::npos) << k.function;
    EXPECT_NE(k.strategy.find("A an RMS norm of its input"), std::string::npos) << k.strategy;
  }
  int normed_into = 0;
  for (const CudaGroupProgram& p : program.groups) normed_into += p.normed_into >= 0;
  EXPECT_EQ(normed_into, 1);
}

// Where the norm's output is needed beyond the products (here a pointwise reader, which the
// planner takes into the norm's group), its kernel stays and the products read it as A.
TEST(CudaSkinnyNormsTest, ANormNeededElsewhereKeepsItsKernel) {
  const CudaProgram program = Lower(RmsNormThenTwoProducts(1, /*also_pointwise=*/true), true);
  const std::vector<CudaKernelSource> kernels = KernelSources(program);
  EXPECT_EQ(kernels.size(), 3u) << "the norm's kernel and the two products";
  for (const CudaKernelSource& k : kernels) EXPECT_EQ(k.function.find("kNormA = 2"), std::string::npos) << k.name;
  for (const CudaGroupProgram& p : program.groups) EXPECT_LT(p.normed_into, 0);
}

// A LLaMA model's end at a decode step: the last layer's down product adds the residual, and
// only the final RMS norm reads the sum, as f32 (the norm's first cast, taken into the product's
// epilogue), then the LM head.
Graph ResidualProductThenFinalNormAndHead() {
  GraphBuilder b;
  Value a = b.Parameter("a", DType::kBF16, {1, 512});
  Value w_down = b.Parameter("w_down", DType::kBF16, {256, 512});
  Value residual = b.Parameter("residual", DType::kBF16, {1, 256});
  Value scale = b.Parameter("scale", DType::kBF16, {256});
  Value w_head = b.Parameter("w_head", DType::kBF16, {320, 256});
  Value h = b.Add(b.MatMul(a, b.Transpose(w_down, {1, 0})), residual);
  Value hf = b.Cast(h, DType::kF32);
  Value mean = b.Reduce(OpCode::kReduceMean, b.Mul(hf, hf), {1}, true);
  Value normed = b.Mul(scale, b.Cast(b.Mul(hf, b.Unary(OpCode::kRsqrt, b.AddScalar(mean, 1e-6))), DType::kBF16));
  b.Output(b.MatMul(normed, b.Transpose(w_head, {1, 0})), "logits");
  StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  StatusOr<Graph> passed = RunGraphPasses(std::move(*g), PassOptions{});
  EXPECT_TRUE(passed.ok()) << passed.status().ToString();
  return std::move(*passed);
}

// Every kernel reads only what is in memory: the graph's inputs and constants and the values
// some group writes. (The final norm computed in the LM head read the bf16 sum, which the down
// product, writing the f32 cast instead, never stored: wrong logits on an H100, 2026-12-06.)
TEST(CudaSkinnyNormsTest, ANormWhoseInputsCastIsItsProducersIsNotComputedInTheProduct) {
  const Graph g = ResidualProductThenFinalNormAndHead();
  CudaTarget target;
  target.gemm = GemmPath::kTemplate;
  target.overrides.skinny_norms = true;
  StatusOr<CudaPlan> plan = PlanFusionForCuda(g, PlannerOptions{}, target);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // The form that went wrong: the norm's cast to f32 computed by the down product.
  bool cast_in_product = false;
  for (const FusionGroup& group : plan->plan.groups)
    if (group.kind == GroupKind::kGemm)
      for (int id : group.nodes) cast_in_product |= g.node(id).op == OpCode::kCast && g.node(id).dtype == DType::kF32;
  ASSERT_TRUE(cast_in_product) << "the plan no longer takes the norm's cast into the product: this test no longer shows the case";
  StatusOr<CudaProgram> program = BuildCudaProgram(g, plan->plan, FindInlinedGenerators(g), "", {}, target);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  std::vector<bool> in_memory(g.num_nodes(), false);
  for (const Node& n : g.nodes()) in_memory[n.id] = n.op == OpCode::kParameter || n.op == OpCode::kConstant;
  for (const FusionGroup& group : plan->plan.groups)
    for (int out : group.outputs) in_memory[out] = true;
  for (const CudaKernelSource& k : KernelSources(*program)) {
    for (const LaunchArg& arg : k.launch.args) {
      if (arg.kind == LaunchArg::Kind::kBuffer) {
        EXPECT_TRUE(in_memory[arg.node]) << k.name << " reads %" << arg.node << ", which no kernel writes";
      }
      if (arg.kind == LaunchArg::Kind::kTensorMap && k.function.find("kNormA") == std::string::npos) {  // (a normed A's map is unused)
        EXPECT_TRUE(in_memory[arg.map.node]) << k.name << " maps %" << arg.map.node << ", which no kernel writes";
      }
    }
  }
}

TEST(CudaSkinnyNormsTest, NormedProductsCompileForHopperWithoutSpills) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create((std::filesystem::temp_directory_path() / "tilefuse_test_cache").string());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available, CUDA kernels not compiled: " << nvrtc.status().ToString();
  for (int64_t rows : {1, 5, 16}) {
    const std::vector<CudaKernelSource> kernels = KernelSources(Lower(NormThenProduct(rows, rows != 5), true));
    ASSERT_EQ(kernels.size(), 1u) << rows;
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
  for (int64_t rows : {1, 16}) {  // the RMS form
    const std::vector<CudaKernelSource> kernels = KernelSources(Lower(RmsNormThenTwoProducts(rows), true));
    ASSERT_EQ(kernels.size(), 2u) << rows;
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
  // With the splits summed in a cluster (TILEFUSE_SKINNY_CLUSTERS=1): GPT-2's c_fc shape.
  for (int64_t rows : {1, 5}) {
    const std::vector<CudaKernelSource> kernels = KernelSources(Lower(NormThenProduct(rows, true, false, 3072), true, true));
    ASSERT_EQ(kernels.size(), 1u) << rows;
    EXPECT_NE(kernels[0].strategy.find("summed in a cluster"), std::string::npos) << kernels[0].strategy;
    EXPECT_NE(kernels[0].function.find("kNormA = 1, kSplitsInCluster = 1"), std::string::npos) << kernels[0].function;
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) {
      EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
      EXPECT_EQ(cubins->PtxasLog().find("are serialized"), std::string::npos);
    }
  }
}

// Where the norm keeps its kernel (the switch off), a decode step's norm is one row: its row,
// scale and bias count alike as the row's data (no other row shares the scale), so the row is
// held in registers and all three are loaded together before the reductions, not the row
// re-read for each pass and the scale and bias read after them (the H100's timeline,
// 2026-12-05: GPT-2's 24 norms added 3.5-3.9 µs each to a step). Over 24 rows the scale and
// bias stay vectors every row reads alike.
TEST(CudaSkinnyNormsTest, ANormOfOneRowHoldsItsRowScaleAndBias) {
  const std::vector<CudaKernelSource> one_row = KernelSources(Lower(NormThenProduct(1, true), false));
  ASSERT_EQ(one_row.size(), 2u);
  const CudaKernelSource& norm = one_row.front();
  ASSERT_EQ(norm.strategy.rfind("row", 0), 0u) << norm.strategy;
  EXPECT_NE(norm.strategy.find("row in registers"), std::string::npos) << norm.strategy;
  const size_t first_reduction = norm.function.find("tf_block_reduce");
  ASSERT_NE(first_reduction, std::string::npos) << norm.function;
  const std::string before = norm.function.substr(0, first_reduction), after = norm.function.substr(first_reduction);
  for (const char* load : {"tf_vload<kVec>(b0 ", "tf_vload<kVec>(b1 ", "tf_vload<kVec>(b2 "})
    EXPECT_NE(before.find(load), std::string::npos) << load << " before the first reduction:\n" << norm.function;
  EXPECT_EQ(after.find("tf_vload"), std::string::npos) << "each read once:\n" << norm.function;
  const std::vector<CudaKernelSource> rows = KernelSources(Lower(NormThenProduct(24, true), false));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NE(rows.front().strategy.find("row and row-invariant vectors in registers"), std::string::npos) << rows.front().strategy;
}

}  // namespace
}  // namespace tilefuse

// The skinny GEMM template's cluster form (TILEFUSE_SKINNY_CLUSTERS=1): the split-K of a product
// summed in a thread-block cluster's shared memory. Every skinny test graph's program with the
// switch on compiles for sm_90a without spills or serialised wgmmas (no GPU needed); and the rule
// counts on a whole wave of its clusters being resident at once (SkinnyClusterCapacity, an
// estimate from the SM count), so on a Hopper GPU the driver says how many clusters of the
// form's own kernel (its threads and shared memory) are resident, for every cluster size the
// form takes, and the estimate must not exceed it (skipped with a message without one; the
// numbers are printed for the rule's next calibration). The GPU run against the reference is
// bench/experiments/decode.sh's.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "backend/cuda/cuda_compile_units.h"
#include "backend/cuda/cuda_program.h"
#include "backend/cuda/device_test_util.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "codegen/lower.h"
#include "frontend/onnx/importer.h"
#include "fusion/group_classifier.h"
#include "passes/pipeline.h"
#include "testing/onnx_text_plan.h"

namespace tilefuse {
namespace {

// One row times a [K][768] weight, K = 128 · splits: two steps of K a unit.
StatusOr<CudaKernelSource> ClusterForm(int splits) {
  const int64_t k = 128 * splits;
  const PlannedText p = PlanOnnxText(fmt::format("g (bfloat16[1,{0}] x, bfloat16[{0},768] w) => (bfloat16[1,768] y)", k), "  y = MatMul (x, w)\n");
  for (const FusionGroup& group : p.plan.groups)
    if (group.kind == GroupKind::kGemm) {
      ASSIGN_OR_RETURN(GemmTemplateKernel gemm, LowerGemmTemplate(p.graph, group, SplitGemmGroup(p.graph, group), FindInlinedGenerators(p.graph)));
      gemm.name = "skinny_cluster";
      CudaSkinnyGemmConfig config;
      config.block_n = 64;
      config.splits = splits;
      config.in_cluster = 1;
      return EmitCudaSkinnyGemm(gemm, config);
    }
  return NotFound("no gemm group");
}

// tests/gemm's skinny graphs with the switch on (and the norms in the products for theirs).
TEST(SkinnyClustersTest, EverySkinnyGraphCompilesForSm90aInTheClusterForm) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  int in_cluster = 0, graphs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(TILEFUSE_SOURCE_DIR) + "/tests/gemm")) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("gemm_skinny_", 0) != 0) continue;
    SCOPED_TRACE(file);
    ++graphs;
    StatusOr<ImportedModel> model = ImportOnnx(entry.path().string());
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    StatusOr<Graph> graph = RunGraphPasses(std::move(model->graph), PassOptions{});
    ASSERT_TRUE(graph.ok()) << graph.status().ToString();
    CudaTarget target;
    target.gemm = GemmPath::kTemplate;
    target.overrides.skinny_clusters = true;
    target.overrides.skinny_norms = file.find("norm") != std::string::npos;
    StatusOr<CudaPlan> plan = PlanFusionForCuda(*graph, PlannerOptions{}, target);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    StatusOr<CudaProgram> program = BuildCudaProgram(*graph, plan->plan, FindInlinedGenerators(*graph), "", {}, target);
    ASSERT_TRUE(program.ok()) << program.status().ToString();
    std::vector<CudaKernelSource> kernels;
    for (const CudaGroupProgram& p : program->groups)
      for (const CudaLaunchable* k : Launchables(p)) {
        kernels.push_back(k->source);
        in_cluster += k->source.strategy.find("summed in a cluster") != std::string::npos;
      }
    StatusOr<CudaCubins> cubins = CompileUnits(*nvrtc, SplitIntoCompileUnits(kernels), "sm_90a");
    ASSERT_TRUE(cubins.ok()) << cubins.status().ToString();
    EXPECT_EQ(cubins->PtxasLog().find("are serialized"), std::string::npos);
    for (const PtxasKernelInfo& k : ParsePtxasLog(cubins->PtxasLog())) EXPECT_EQ(k.spill_store_bytes + k.spill_load_bytes, 0) << k.line;
  }
  EXPECT_GE(graphs, 9);
  EXPECT_GE(in_cluster, 10) << "the skinny products in the cluster form";  // every product
}

TEST(SkinnyClustersTest, TheRulesWaveOfClustersIsResidentOnThisGpu) {
  StatusOr<NvrtcCompiler> nvrtc = NvrtcCompiler::Create(TestKernelCacheDir());
  if (!nvrtc.ok()) GTEST_SKIP() << "NVRTC not available: " << nvrtc.status().ToString();
  StatusOr<CudaDevice*> device = CudaDevice::Get();
  if (!device.ok()) GTEST_SKIP() << "no GPU: " << device.status().ToString() << "; the cluster form's residency not measured";
  if ((*device)->compute_major() < 9) GTEST_SKIP() << (*device)->name() << " is not Hopper: no clusters";
  const CudaDevice& gpu = **device;
  ASSERT_TRUE(gpu.MakeCurrent().ok());
  for (int splits = 2; splits <= 8; ++splits) {
    SCOPED_TRACE(fmt::format("clusters of {}", splits));
    StatusOr<CudaKernelSource> source = ClusterForm(splits);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    ASSERT_EQ(source->launch.cluster[0], splits) << source->strategy;
    StatusOr<CubinResult> cubin = nvrtc->Compile(CudaTranslationUnit({*source}), "sm_90a");
    ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    Status loaded = LoadFunction(gpu, *cubin, source->name, module, function);
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    Status prepared = PrepareFunction(gpu, function, source->launch, source->name);
    ASSERT_TRUE(prepared.ok()) << prepared.ToString();
    CUlaunchConfig config = {};
    config.gridDimX = static_cast<unsigned>(source->launch.grid[0]);
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = source->launch.block[0];
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = static_cast<unsigned>(source->launch.dynamic_shared_bytes);
    CUlaunchAttribute cluster = {};
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = splits;
    cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    int resident = 0;
    Status queried = gpu.Check(gpu.api().cuOccupancyMaxActiveClusters(&resident, function, &config), "cuOccupancyMaxActiveClusters");
    gpu.api().cuModuleUnload(module);
    ASSERT_TRUE(queried.ok()) << queried.ToString();
    const int64_t counted = SkinnyClusterCapacity(gpu.sm_count(), splits);
    std::printf("  clusters of %d (%lld bytes of shared memory a CTA): %d resident, %lld CTAs; the rule counts %lld CTAs\n", splits,
                static_cast<long long>(source->launch.dynamic_shared_bytes), resident, static_cast<long long>(resident) * splits,
                static_cast<long long>(counted));
    EXPECT_GE(int64_t{resident} * splits, counted);
  }
}

}  // namespace
}  // namespace tilefuse

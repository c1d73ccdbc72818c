// The skinny GEMM template's cluster form (TILEFUSE_SKINNY_CLUSTERS=1) counts on a whole wave of
// its clusters being resident at once: the rule takes the form only where its units fit
// SkinnyClusterCapacity, an estimate from the SM count. Here the driver says how many clusters
// of the form's own kernel (its threads and shared memory) are resident on this GPU, for every
// cluster size the form takes, and the estimate must not exceed it. Needs a Hopper GPU (skipped
// with a message without one); the numbers are printed for the rule's next calibration.
#include <gtest/gtest.h>

#include <cstdio>
#include <fmt/format.h>

#include "backend/cuda/device_test_util.h"
#include "codegen/cuda/cuda_skinny_gemm_emitter.h"
#include "codegen/gemm_split.h"
#include "codegen/gemm_template.h"
#include "codegen/lower.h"
#include "fusion/group_classifier.h"
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

TEST(SkinnyClusterCapacityTest, TheRulesWaveOfClustersIsResidentOnThisGpu) {
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

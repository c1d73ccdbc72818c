// The skinny GEMM template: a gemm group whose product has at most 64 rows (a decode step's
// tokens times its batch) printed over codegen/cuda/device/gemm_skinny_sm90.cuh, which
// computes the transposed product so that B's columns fill wgmma's 64-row side and streams
// B once through every SM, K split into units with a deterministic sum. The same problem
// (GemmTemplateKernel) and epilogue functor as the GEMM template; only the skeleton and its
// configuration differ.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/gemm_template.h"
#include "tilefuse/status.h"

namespace tilefuse {

inline constexpr int64_t kSkinnyMaxRows = 64;
// Up to this many rows the rule prefers the skinny template to cuBLASLt's fused epilogues
// (backend/cuda/cuda_program.cc says what was measured); the tuner measures both.
inline constexpr int64_t kSkinnyOverLibraryRows = 16;

struct CudaSkinnyGemmConfig {
  int block_n = 0;  // columns of B a unit: 64 or 128 (one consumer warpgroup per 64); 0: the rule
  int splits = 0;   // units K is split into per column block; 0: enough for two units an SM
  int stages = 0;   // pipeline depth; 0: the rule (6)
  // The splits of a column block summed in a thread-block cluster's shared memory, a CTA a
  // unit (1), or through scratch memory by the last unit (0); -1: the rule, which takes the
  // cluster form only where `clusters` allows it.
  int in_cluster = -1;
  bool clusters = false;  // asked of the rule (TemplateOverrides::skinny_clusters)
  // The epilogue's loads asked of L1 as the consumers start (gemm_skinny_sm90.cuh's
  // kPrefetchEpilogue; TemplateOverrides::skinny_prefetch).
  bool prefetch_epilogue = true;
  int sm_count = 132;
};

// OK where the skinny template takes `gemm`, else the reason: 16-bit operands, one batch
// entry (a shared B folds A's batch into the rows), at most kSkinnyMaxRows rows, A read as
// a [M][K] matrix (not through a view, an im2col or transposed).
Status SkinnyGemmFits(const GemmTemplateKernel& gemm);
// CTAs of one-CTA-an-SM clusters of `size` resident at once, as the rule counts them: the
// SMs lie in 8 GPCs and a cluster in one GPC; an H100's 132 lie unevenly (16 to 18 a GPC, and
// clusters of 8 measured 15 resident), so a GPC is taken as sm_count / 8 rounded down, one
// cluster fewer in all for sizes past 2.
int64_t SkinnyClusterCapacity(int sm_count, int size);
// Every 0 of `requested` resolved for this problem.
CudaSkinnyGemmConfig ResolveSkinnyGemmConfig(const GemmTemplateKernel& gemm, CudaSkinnyGemmConfig requested);
// The rule's configuration first, then the alternatives worth measuring (`clusters`: the
// rule may take the cluster form, and each width's cluster form is among them).
std::vector<CudaSkinnyGemmConfig> SkinnyGemmCandidates(const GemmTemplateKernel& gemm, int sm_count, bool clusters = false);
nlohmann::json SkinnyGemmConfigToJson(const CudaSkinnyGemmConfig& config);
CudaSkinnyGemmConfig SkinnyGemmConfigFromJson(const nlohmann::json& json);
// Where A is normed in the kernel (gemm.layer_norm, the skeleton's kNormA): the norm's kernel
// parameters (x, γ, β) added to `parameters` and `source`'s launch and strategy; returns the
// skeleton's norm argument (", tf::SkinnyNorm<...>{...}"), "" where A is not normed.
std::string SkinnyNormArguments(const GemmTemplateKernel& gemm, CudaKernelSource& source, std::string& parameters);
// B's tensor map as the skinny skeletons load it: [N][K] in boxes of 64 rows × 64 of K, or
// [K][N] in boxes of 64 of K × 64 columns.
TensorMapArg SkinnyWeightMap(const GemmTemplateKernel& gemm);
// InvalidArgument for configurations the skeleton cannot run.
StatusOr<CudaKernelSource> EmitCudaSkinnyGemm(const GemmTemplateKernel& gemm, const CudaSkinnyGemmConfig& config);

}  // namespace tilefuse

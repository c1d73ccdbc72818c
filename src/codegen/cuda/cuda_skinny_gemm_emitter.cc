#include "codegen/cuda/cuda_skinny_gemm_emitter.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <fmt/format.h>

#include "codegen/cuda/cuda_gemm_config.h"
#include "codegen/cuda/cuda_gemm_emitter.h"
#include "codegen/cuda/cuda_scalar_program.h"
#include "codegen/emit_util.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

namespace {

// K steps, their 64-element width and the shared-memory limit are the GEMM template's.
using gemm_layout::CeilDiv;
using gemm_layout::KSteps;
using gemm_layout::kBlockK;
using gemm_layout::kSharedLimit;

constexpr int kDefaultStages = 6;             // 6 × 24 KB in flight an SM at most: ample to stream B
// The last unit of a column block holds every split's partials in flight at once (the
// skeleton's sum): at most 16 splits keep them within the registers.
constexpr int64_t kMaxRuleSplits = 16;
// Clusters of at most 8 CTAs, the portable size (16 would need the non-portable attribute,
// and a whole GPC free at once).
constexpr int kMaxClusterSplits = 8;

int PaddedRows(const GemmTemplateKernel& g) { return static_cast<int>(CeilDiv(g.rows, 16) * 16); }
int64_t Tiles(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) { return CeilDiv(g.n, c.block_n); }
int64_t StepsPerSplit(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) { return CeilDiv(KSteps(g), c.splits); }
// A thread's accumulators, and of them the most one split's CTA sums in the cluster form (an
// upper bound: the skeleton sends only those of rows below M, SkinnyShape::HasRows).
int PerThread(const GemmTemplateKernel& g) { return PaddedRows(g) / 2; }
int64_t Owned(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) { return CeilDiv(PerThread(g), c.splits); }
int64_t SharedBytes(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) {
  // The swizzle's 1024-byte alignment, the two rings, full and empty barriers, a flag for each
  // of two consumers; in a cluster their two `gathered` barriers and every split's partials of the
  // CTA's share (its own included).
  const int64_t rings = 1024 + int64_t{c.stages} * (c.block_n + PaddedRows(g)) * kBlockK * 2 + 2 * c.stages * 8 + 2 * 4;
  if (c.in_cluster != 1) return rings;
  return rings + 2 * 8 + int64_t{c.splits} * (c.block_n / 64) * Owned(g, c) * 128 * 4;
}
// Split-K through memory: the counters' region (launch_spec.h), then every unit's f32 partials.
int64_t ScratchBytes(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) {
  if (c.splits <= 1 || c.in_cluster == 1) return 0;
  return kScratchCounterBytes + Tiles(g, c) * c.splits * c.block_n * PaddedRows(g) * 4;
}
// `splits` rounded so that every unit has steps: ceil(steps / ceil(steps / splits)).
int EvenSplits(const GemmTemplateKernel& g, int64_t splits) {
  splits = std::clamp<int64_t>(splits, 1, KSteps(g));
  return static_cast<int>(CeilDiv(KSteps(g), CeilDiv(KSteps(g), splits)));
}

Status Validate(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c) {
  RETURN_IF_ERROR(SkinnyGemmFits(g));
  if (c.block_n != 64 && c.block_n != 128) return InvalidArgument(fmt::format("{}: block_n {} (need 64 or 128)", g.name, c.block_n));
  if (c.stages < 2) return InvalidArgument(fmt::format("{}: {} stages (need at least 2)", g.name, c.stages));
  if (c.splits < 1 || c.splits > KSteps(g))
    return InvalidArgument(fmt::format("{}: {} split-K units for {} steps of K", g.name, c.splits, KSteps(g)));
  if (c.splits != EvenSplits(g, c.splits))
    return InvalidArgument(fmt::format("{}: {} splits of {} steps leave a unit empty", g.name, c.splits, KSteps(g)));
  if (SharedBytes(g, c) > kSharedLimit)
    return InvalidArgument(fmt::format("{}: {} bytes of shared memory (the limit is {})", g.name, SharedBytes(g, c), kSharedLimit));
  if (c.in_cluster != 0 && c.in_cluster != 1) return InvalidArgument(fmt::format("{}: in_cluster {} (need 0 or 1)", g.name, c.in_cluster));
  if (c.in_cluster == 1 && (c.splits < 2 || c.splits > kMaxClusterSplits))
    return InvalidArgument(fmt::format("{}: {} splits in a cluster (2 to {})", g.name, c.splits, kMaxClusterSplits));
  if (c.splits > 1 && c.in_cluster == 0 && Tiles(g, c) * (c.block_n / 64) * 4 > kScratchCounterBytes)
    return InvalidArgument(fmt::format("{}: split-K over more column blocks than the scratch memory's counter region holds", g.name));
  if (c.sm_count < 1) return InvalidArgument(fmt::format("{}: sm_count must be positive", g.name));
  return Status::Ok();
}

}  // namespace

Status SkinnyGemmFits(const GemmTemplateKernel& g) {
  if (g.dtype != DType::kBF16 && g.dtype != DType::kF16)
    return Unimplemented(fmt::format("the skinny GEMM template takes bf16 and f16 products, not {}", DTypeName(g.dtype)));
  if (g.batch != 1) return Unimplemented("the skinny GEMM template takes one B (batched products with a B each are not skinny)");
  if (g.rows < 1 || g.rows > kSkinnyMaxRows)
    return Unimplemented(fmt::format("{} rows (the skinny GEMM template takes 1 to {})", g.rows, kSkinnyMaxRows));
  if (g.a_view || g.a_conv || g.a_mn_major >= 0) return Unimplemented("the skinny GEMM template reads A as a [M][K] matrix only");
  if (g.k < 1 || g.n < 1) return Unimplemented("an empty product");
  if (g.partner != 0) return Unimplemented("the skinny GEMM template's epilogue reads no partner column (a rotated half)");
  if (g.amax) return Unimplemented("the skinny GEMM template computes no amax in its epilogue");
  if (g.layer_norm && (g.rows > 16 || g.k % 8 != 0 || !g.n_parts.empty() || !g.gate.empty() || g.row_norm))
    return Unimplemented("a norm of A in the skinny template: at most 16 rows, K in 16-byte rows, one product, no other norm");
  if (g.layer_norm && g.layer_norm->rms && g.layer_norm->bias >= 0) return Unimplemented("an RMS norm of A with a bias");
  return Status::Ok();
}

int64_t SkinnyClusterCapacity(int sm_count, int size) {
  const int64_t per_gpc = std::max(sm_count / 8, 1);
  const int64_t clusters = 8 * (per_gpc / size) - (size > 2 ? 1 : 0);
  return std::max<int64_t>(clusters, 0) * size;
}

namespace {

// The cluster form whose busiest SM streams the fewest bytes of B (K steps times columns) in
// one wave of clusters, fewer splits first at equal bytes, if there is one. K steps beyond
// what a unit's steps need are not taken (EvenSplits).
std::optional<CudaSkinnyGemmConfig> BestClusterForm(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& c, int64_t* bytes) {
  std::optional<CudaSkinnyGemmConfig> best;
  for (int block_n : {128, 64}) {
    if (c.block_n != 0 && block_n != c.block_n) continue;
    CudaSkinnyGemmConfig form = c;
    form.block_n = block_n;
    form.in_cluster = 1;
    for (int splits = 2; splits <= kMaxClusterSplits; ++splits) {
      form.splits = EvenSplits(g, splits);
      if (form.splits != splits || Tiles(g, form) * splits > SkinnyClusterCapacity(c.sm_count, splits)) continue;
      const int64_t streamed = CeilDiv(KSteps(g), splits) * block_n;
      if (!best || streamed < *bytes || (streamed == *bytes && splits < best->splits)) best = form, *bytes = streamed;
    }
  }
  return best;
}

}  // namespace

CudaSkinnyGemmConfig ResolveSkinnyGemmConfig(const GemmTemplateKernel& g, CudaSkinnyGemmConfig c) {
  const CudaSkinnyGemmConfig requested = c;
  if (c.block_n == 0) c.block_n = g.n <= 64 ? 64 : 128;
  // The fewest splits whose busiest SM streams the fewest K steps of B: rounds of units times
  // steps a unit. Balance is what matters for a product bound by reading B (two units an SM,
  // 288 units over 132 SMs at K = 14336, ran a third round on 24 of them: 47 µs against
  // cuBLASLt's 33, H200); fewer splits sum fewer partials.
  if (c.splits == 0) {
    int64_t best_steps = INT64_MAX;
    for (int64_t splits = 1; splits <= std::min<int64_t>(KSteps(g), kMaxRuleSplits); ++splits) {
      const int even = EvenSplits(g, splits);
      const int64_t steps = CeilDiv(Tiles(g, c) * even, c.sm_count) * CeilDiv(KSteps(g), even);
      if (steps < best_steps) best_steps = steps, c.splits = even;
    }
  }
  c.splits = EvenSplits(g, c.splits);
  // The cluster form wherever one fits a wave, asked or by the rule, even where its busiest SM
  // streams more of B than the rounds of units above: every decode product of GPT-2 and of
  // TinyLlama's shape ran fastest in a cluster form, TinyLlama's down projection 11.8-12.3 µs
  // against 12.7 through memory while streaming up to 1.6x the bytes an SM (H200, 2026-12-05,
  // bench/results/2026-12-05-h200-skinny-clusters.md): the partials' round trip through memory
  // costs more than those bytes. Where none fits, the splits go through memory.
  if (requested.splits == 0 && (requested.in_cluster == 1 || (requested.in_cluster == -1 && requested.clusters))) {
    int64_t streamed = 0;
    const std::optional<CudaSkinnyGemmConfig> form = BestClusterForm(g, requested, &streamed);
    if (form) c = *form;
    else c.in_cluster = 0;
  }
  if (c.in_cluster == -1) c.in_cluster = 0;
  if (c.stages == 0) c.stages = kDefaultStages;
  return c;
}

std::vector<CudaSkinnyGemmConfig> SkinnyGemmCandidates(const GemmTemplateKernel& g, int sm_count, bool clusters) {
  CudaSkinnyGemmConfig requested;
  requested.sm_count = sm_count;
  requested.clusters = clusters;
  std::vector<CudaSkinnyGemmConfig> out = {ResolveSkinnyGemmConfig(g, requested)};
  auto add = [&](const CudaSkinnyGemmConfig& c) {
    const bool seen = std::any_of(out.begin(), out.end(), [&](const CudaSkinnyGemmConfig& o) {
      return o.block_n == c.block_n && o.splits == c.splits && o.stages == c.stages && o.in_cluster == c.in_cluster;
    });
    if (!seen && Validate(g, c).ok()) out.push_back(c);
  };
  for (int block_n : {128, 64}) {
    CudaSkinnyGemmConfig shape = requested;
    shape.block_n = block_n;
    shape.in_cluster = 0;
    const CudaSkinnyGemmConfig rule = ResolveSkinnyGemmConfig(g, shape);
    for (int splits : {rule.splits, rule.splits / 2, rule.splits * 2}) {
      CudaSkinnyGemmConfig c = rule;
      c.splits = EvenSplits(g, splits);
      add(c);
    }
    if (clusters) {  // the width's cluster form, where one fits
      shape.in_cluster = 1;
      const CudaSkinnyGemmConfig form = ResolveSkinnyGemmConfig(g, shape);
      if (form.in_cluster == 1) add(form);
    }
  }
  return out;
}

nlohmann::json SkinnyGemmConfigToJson(const CudaSkinnyGemmConfig& c) {
  return {{"block_n", c.block_n}, {"splits", c.splits}, {"stages", c.stages}, {"in_cluster", c.in_cluster}};
}

CudaSkinnyGemmConfig SkinnyGemmConfigFromJson(const nlohmann::json& j) {
  CudaSkinnyGemmConfig c;
  c.block_n = j.value("block_n", 0);
  c.splits = j.value("splits", 0);
  c.stages = j.value("stages", 0);
  c.in_cluster = j.value("in_cluster", -1);
  return c;
}

std::string SkinnyNormArguments(const GemmTemplateKernel& g, CudaKernelSource& s, std::string& parameters) {
  if (!g.layer_norm) return "";
  // A normed by the producer's second warp from x (g.a), γ and β (the scale again where there is no bias).
  const char* storage = StorageType(g.dtype);
  parameters += fmt::format(", const {0}* __restrict__ norm_x, const {0}* __restrict__ norm_scale, const {0}* __restrict__ norm_bias", storage);
  for (int node : {g.a, g.layer_norm->scale, g.layer_norm->bias >= 0 ? g.layer_norm->bias : g.layer_norm->scale})
    s.launch.args.push_back({LaunchArg::Kind::kBuffer, node, {}, 0});
  s.strategy += fmt::format(", A {} norm of its input, computed in the kernel", g.layer_norm->rms ? "an RMS" : "a layer");
  return fmt::format(", tf::SkinnyNorm<Config::Element>{{norm_x, norm_scale, {}, {:.9e}f}}", g.layer_norm->bias >= 0 ? "norm_bias" : "nullptr",
                     g.layer_norm->epsilon);
}

TensorMapArg SkinnyWeightMap(const GemmTemplateKernel& g) {
  return g.b_k_major >= 0 ? GemmMatrixMap(g.b_k_major, g.dtype, 1, g.BRowsInMemory(), g.k, 64, kBlockK)
                          : GemmMatrixMap(g.b, g.dtype, 1, g.BKRowsInMemory(), g.n, kBlockK, 64);
}

StatusOr<CudaKernelSource> EmitCudaSkinnyGemm(const GemmTemplateKernel& g, const CudaSkinnyGemmConfig& requested) {
  const CudaSkinnyGemmConfig c = ResolveSkinnyGemmConfig(g, requested);
  RETURN_IF_ERROR(Validate(g, c));
  const int rows = PaddedRows(g);
  const bool b_k_major = g.b_k_major >= 0;
  CudaKernelSource s;
  s.name = g.name;
  s.threads = 128 * (1 + c.block_n / 64);
  s.includes = {"gemm_skinny_sm90.cuh"};
  const int64_t units = Tiles(g, c) * c.splits;
  const bool in_cluster = c.in_cluster == 1;
  // The cluster form launches every unit (a CTA each, in clusters of the splits); the other a
  // persistent grid.
  s.work_blocks = in_cluster ? units : std::min<int64_t>(c.sm_count, units);
  if (in_cluster) s.launch.cluster = {c.splits, 1, 1};
  s.strategy = fmt::format("skinny gemm template, B streamed: {} rows padded to {}, {} columns a unit, {}{} stages, B {}{}", g.rows, rows,
                           c.block_n,
                           c.splits > 1 ? fmt::format("split-K x{}{}, ", c.splits, in_cluster ? " summed in a cluster" : "") : "", c.stages,
                           b_k_major ? "K-major" : "MN-major", g.b_read_only ? ", B's first stages loaded before the grid ahead ends" : "");
  if (c.prefetch_epilogue) s.strategy += ", the epilogue's loads prefetched to L1";
  // A as [M][K] in boxes of the padded rows × 64 of K (TMA fills the rows past M with zeros);
  // B as [N][K] or [K][N] in boxes of 64 × 64.
  s.launch.args.push_back({LaunchArg::Kind::kTensorMap, g.a, GemmMatrixMap(g.a, g.dtype, 1, g.rows, g.k, rows, kBlockK), 0});
  const TensorMapArg map_b = SkinnyWeightMap(g);
  s.launch.args.push_back({LaunchArg::Kind::kTensorMap, map_b.node, map_b, 0});
  std::string parameters = "const __grid_constant__ tf::TensorMap map_a, const __grid_constant__ tf::TensorMap map_b";
  std::string buffers;
  parameters += GemmEpilogueParameters(g, s, buffers);
  const std::string norm = SkinnyNormArguments(g, s, parameters);
  const bool through_memory = c.splits > 1 && !in_cluster;
  if (through_memory) {
    parameters += ", unsigned* __restrict__ tile_counters, float* __restrict__ partials";
    s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, 0});
    s.launch.args.push_back({LaunchArg::Kind::kScratch, -1, {}, kScratchCounterBytes});
  }
  std::string out = fmt::format("extern \"C\" __global__ void __launch_bounds__({}, 1) {}({}) {{\n", s.threads, g.name, parameters);
  out += fmt::format(
      "  struct Config {{\n    using Element = {};\n    using Index = {};\n"
      "    enum : int {{ kRows = {}, kN = {}, kK = {}, kMP = {}, kBN = {}, kStages = {}, kSplits = {}, kSplitSteps = {}, kBKMajor = {} }};\n"
      "    enum : int {{ kBBeforeWait = {}, kNormA = {}, kSplitsInCluster = {}, kPrefetchEpilogue = {} }};\n"
      "  }};\n",
      TileElementType(g.dtype), GemmIndexType(g), g.rows, g.n, g.k, rows, c.block_n, c.stages, c.splits, StepsPerSplit(g, c),
      b_k_major ? 1 : 0, g.b_read_only ? 1 : 0, !g.layer_norm ? 0 : g.layer_norm->rms ? 2 : 1, in_cluster ? 1 : 0, c.prefetch_epilogue ? 1 : 0);
  out += GemmEpilogueStruct(g, -1, -1, -1, "Epilogue", /*with_prefetch=*/c.prefetch_epilogue);
  out += fmt::format("  tf::GemmSkinnySm90<Config>(map_a, map_b, Epilogue{{{}}}, {}{});\n}}\n", buffers,
                     through_memory ? "tile_counters, partials" : "nullptr, nullptr", norm);
  // The skeleton awaits the prior grid itself, its producer after loading what of B it may
  // before (kBBeforeWait).
  FinishTemplateSource(s, std::move(out), SharedBytes(g, c), /*awaits_in_skeleton=*/true);
  s.launch.scratch_bytes = ScratchBytes(g, c);
  return s;
}

}  // namespace tilefuse

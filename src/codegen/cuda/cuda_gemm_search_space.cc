#include "codegen/cuda/cuda_gemm_search_space.h"

#include <algorithm>
#include <fmt/format.h>

#include "codegen/gemm_n_groups.h"
#include "codegen/launch_spec.h"

namespace tilefuse {

namespace {

bool SameGemmConfig(const CudaGemmConfig& a, const CudaGemmConfig& b) {
  return a.pingpong.value_or(false) == b.pingpong.value_or(false) &&
         a.overlap_epilogue.value_or(false) == b.overlap_epilogue.value_or(false) && a.block_m == b.block_m && a.block_n == b.block_n &&
         a.stages == b.stages && a.group_m == b.group_m && a.splits == b.splits && a.cluster_m == b.cluster_m &&
         a.promote.value_or(false) == b.promote.value_or(false) && a.stream_k.value_or(false) == b.stream_k.value_or(false);
}

}  // namespace

GemmSearchSpace GemmCandidates(const GemmTemplateKernel& gemm, int sm_count, std::optional<bool> promote) {
  GemmSearchSpace space;
  CudaGemmConfig rule;
  rule.sm_count = sm_count;
  rule.promote = promote;
  space.candidates.push_back(ResolveGemmConfig(gemm, rule));
  const bool staged = gemm_layout::StagedStore(gemm) >= 0;
  // Consumers: ping-pong, cooperative, cooperative with the epilogue overlapped, or
  // cooperative with stream-K's shared last round (where the tiles leave a partial one); 128
  // rows a tile, and 192 (three cooperative consumers, the epilogue in the tail) for 16-bit
  // operands.
  constexpr const char* kForms[] = {"ping-pong", "cooperative", "cooperative, overlapped epilogue", "cooperative, stream-K"};
  const int rows = space.candidates.front().block_m == 64 ? 64 : 128;
  for (int block_m : {rows, 192})
    for (int consumers : {0, 1, 2, 3})
      for (int block_n : {128, 192, 256})
        for (int stages : {3, 4, 5}) {
          if (block_m == 192 && (!IsHalf(gemm.operand_dtype) || consumers == 0 || consumers == 2 || block_n > 192 || gemm.rows < 192)) continue;
          CudaGemmConfig requested = rule;
          requested.block_m = block_m;
          requested.pingpong = consumers == 0;
          requested.overlap_epilogue = consumers == 2;
          requested.stream_k = consumers == 3;
          requested.block_n = block_n;
          requested.stages = stages;
          const CudaGemmConfig c = ResolveGemmConfig(gemm, requested);
          // An overlapped epilogue needs one unit per tile, and reads only vectors and a residual
          // tile (ProductMayBeHeld).
          if (c.overlap_epilogue.value_or(false) && (c.splits > 1 || !gemm_layout::ProductMayBeHeld(gemm))) continue;
          if (consumers == 3 && (c.splits > 1 || c.cluster_m > 1 || gemm_layout::StreamKTiles(gemm, c) == 0)) continue;
          const std::string name = fmt::format("{} {}x{}, {} stages", kForms[consumers], c.block_m, c.block_n, c.stages);
          if (block_n > 64 && gemm.n < block_n) space.pruned.push_back(name + ": wider than the product's " + std::to_string(gemm.n) + " columns");
          else if (gemm_layout::AccumulatorRegisters(c, c.block_n) > gemm_layout::MaxAccumulatorRegisters(c))
            space.pruned.push_back(name + ": accumulators past the registers a thread has for them");
          else if (gemm.split_f32 && *c.pingpong) space.pruned.push_back(name + ": 3xTF32's consumers share B's split (cooperative only)");
          else if (gemm_layout::SharedBytes(c, gemm, staged, gemm_layout::RingedLoad(gemm, c) >= 0) > gemm_layout::kSharedLimit)
            space.pruned.push_back(name + ": shared memory past 227 KB");
          else if (std::any_of(space.candidates.begin(), space.candidates.end(), [&](const CudaGemmConfig& o) { return SameGemmConfig(o, c); }))
            continue;  // the rule's, or one listed already
          else space.candidates.push_back(c);
        }
  // Too few output tiles to fill the GPU (a decode-like M; GPT-2 at batch 1 has 6 to 24
  // tiles of 128x128): narrower and shorter tiles and K split into more or fewer units, the
  // ways cuBLAS's small-M kernels go (64x16 to 64x64 tiles, split-K). Such a product is bound
  // by latency more than by reading B. A ring of 8 stages beside the rule's keeps more of B in
  // flight an SM (cuBLAS runs LLaMA-style's gate at 128 rows in 11 stages of 64x88 tiles; 12
  // stages were never faster than 8 on its products, H200, 2026-12-02).
  if (gemm_layout::Tiles(gemm, 128, 128) * 2 <= sm_count && !IsFloat8(gemm.operand_dtype) && gemm.operand_dtype != DType::kI8)
    for (int block_m : {64, 128})
      for (int block_n : {64, 128})
        for (int splits : {1, 2, 3, 4, 6, 8, 12})
          for (bool overlap : {false, true})
            for (int stages : {0, 8}) {
              const int64_t steps = gemm_layout::KSteps(gemm);
              if (splits > steps || (block_m == 128 && gemm.rows <= 64) || (block_n > 64 && gemm.n < block_n)) continue;
              if (overlap && (splits > 1 || !gemm_layout::ProductMayBeHeld(gemm))) continue;
              if (stages > 0 && (overlap || splits > 4 || stages > steps / splits)) continue;
              CudaGemmConfig requested = rule;
              requested.pingpong = false;
              requested.block_m = block_m;
              requested.block_n = block_n;
              requested.splits = gemm_layout::UnitsWithoutEmpty(gemm, splits);
              requested.overlap_epilogue = overlap;
              requested.stages = stages;
              const CudaGemmConfig c = ResolveGemmConfig(gemm, requested);
              if (c.splits > 1 && gemm_layout::Tiles(gemm, c.block_m, c.block_n) * 4 > kScratchCounterBytes) continue;
              if (gemm_layout::SharedBytes(c, gemm, staged, gemm_layout::RingedLoad(gemm, c) >= 0) > gemm_layout::kSharedLimit) continue;
              if (std::none_of(space.candidates.begin(), space.candidates.end(), [&](const CudaGemmConfig& o) { return SameGemmConfig(o, c); }))
                space.candidates.push_back(c);
            }
  // A grouped product's tiles keep to one part each.
  std::erase_if(space.candidates, [&](const CudaGemmConfig& c) { return !PartsTakeWidth(gemm, c.block_n); });
  // Each with clusters of two CTAs sharing B (multicast), where they fit.
  const size_t single = space.candidates.size();
  for (size_t i = 0; i < single; ++i) {
    CudaGemmConfig paired = space.candidates[i];
    if (paired.cluster_m != 1 || !gemm_layout::ClustersFit(gemm, paired, 2)) continue;
    paired.cluster_m = 2;
    space.candidates.push_back(paired);
  }
  return space;
}

nlohmann::json GemmConfigToJson(const CudaGemmConfig& c) {
  return {{"pingpong", c.pingpong.value_or(false)}, {"overlap_epilogue", c.overlap_epilogue.value_or(false)}, {"block_m", c.block_m}, {"block_n", c.block_n},
          {"stages", c.stages}, {"group_m", c.group_m}, {"splits", c.splits}, {"cluster_m", c.cluster_m},
          {"promote", c.promote.value_or(false)}, {"stream_k", c.stream_k.value_or(false)}};
}

CudaGemmConfig GemmConfigFromJson(const nlohmann::json& j) {
  CudaGemmConfig c;
  if (j.contains("pingpong")) c.pingpong = j["pingpong"].get<bool>();
  if (j.contains("overlap_epilogue")) c.overlap_epilogue = j["overlap_epilogue"].get<bool>();
  if (j.contains("promote")) c.promote = j["promote"].get<bool>();
  c.stream_k = j.value("stream_k", false);  // configurations tuned before stream-K had none
  c.block_m = j.value("block_m", c.block_m);
  c.block_n = j.value("block_n", c.block_n);
  c.stages = j.value("stages", c.stages);
  c.group_m = j.value("group_m", c.group_m);
  c.splits = j.value("splits", c.splits);
  c.cluster_m = j.value("cluster_m", 1);  // configurations tuned before clusters had none
  return c;
}

}  // namespace tilefuse

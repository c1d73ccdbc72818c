#include "tune/cuda_search_space.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "codegen/column_tiles.h"
#include "codegen/cuda/cuda_row_splits.h"

namespace tilefuse {

namespace {

// Whether a row load reads a half type (a cached row of it may be held as pairs).
bool HasHalfRowLoads(const Kernel& k) {
  return std::any_of(k.values.begin(), k.values.end(), [&](const ScalarValue& v) { return IsRowDataLoad(k, v) && DTypeSize(v.dtype) == 2; });
}

// Column reductions (codegen/cuda/cuda_column_emitter.h): tile widths x block sizes x row splits
// around the default, and the row template (a thread per output), which wins where the
// outputs alone fill the GPU and each reduces few elements.
template <typename Add>
void AddColumnCandidates(const Kernel& k, const CudaKernelConfig& base, CudaSearchSpace& space, Add add) {
  const bool chained = FindColumnTiling(k).chained;
  for (int tile : {base.tile / 2, base.tile, base.tile * 2})
    for (int threads : {128, 256})
      for (int splits : {1, base.splits / 2, base.splits, base.splits * 2}) {
        const std::string name = fmt::format("column tile {} threads {} splits {}", tile, threads, splits);
        if (tile < base.vector || tile > 32 * base.vector) space.pruned.push_back(name + fmt::format(": not 1 to 32 vectors of {}", base.vector));
        else if (splits < 1 || splits > k.inner) space.pruned.push_back(name + fmt::format(": not 1 to {} splits", k.inner));
        else if (splits > 1 && chained) space.pruned.push_back(name + ": a reduction reads an earlier one's result (one split)");
        else add({threads, base.vector, 0, 0, 0, tile, splits});
      }
  add({0, 0, 0, -1, 0, -1});
}

}  // namespace

double CudaConfigRank(const CudaKernelConfig& base, const CudaKernelConfig& c) {
  return (c.cache_row >= 1 ? 0.0 : 1.0) + std::abs(std::log2(double(c.threads) / base.threads)) +
         std::abs(std::log2(double(std::max(1, c.threads_per_row)) / std::max(1, base.threads_per_row))) +
         (c.broadcast_with_row != base.broadcast_with_row ? 0.5 : 0.0);
}

// The flat templates' configurations (tile -1) print as they did before the tiled template,
// so tuning-cache keys and records written then still match.
bool SameCudaConfig(const CudaKernelConfig& a, const CudaKernelConfig& b) {
  return a.threads == b.threads && a.vector == b.vector && a.threads_per_row == b.threads_per_row && a.cache_row == b.cache_row &&
         a.tile == b.tile && a.splits == b.splits &&
         std::max(a.cluster, 1) == std::max(b.cluster, 1) &&  // 0 and 1: no cluster where threads are named
         a.broadcast_with_row == b.broadcast_with_row;
}

CudaSearchSpace CudaCandidates(const Kernel& k, bool clusters) {
  CudaSearchSpace space;
  CudaKernelConfig rule;
  rule.clusters = clusters;
  CudaKernelConfig base = ResolveCudaConfig(k, rule);
  auto add = [&](CudaKernelConfig c) {
    c = ResolveCudaConfig(k, c);
    for (const CudaKernelConfig& seen : space.candidates)
      if (SameCudaConfig(seen, c)) return;
    space.candidates.push_back(c);
  };
  add(base);
  if (k.reductions.empty() && base.tile > 0) {
    // Transposed loads (codegen/cuda/cuda_transposed_emitter.h): tile edges x block sizes, and the
    // flat template, which wins where the transposed operand is small beside the others.
    for (int tile : {64, 32})
      for (int threads : {128, 256, 512}) {
        CudaKernelConfig c = base;
        c.tile = tile;
        c.threads = threads;
        if (tile * tile / c.vector < threads) {
          space.pruned.push_back(fmt::format("tile {} threads {}: more threads than the tile's {} output vectors", tile, threads, tile * tile / c.vector));
          continue;
        }
        add(c);
      }
    add({0, 0, 0, 0, 0, -1});
    return space;
  }
  if (!k.reductions.empty() && base.tile > 0) {
    AddColumnCandidates(k, base, space, add);
    return space;
  }
  if (k.reductions.empty()) {
    // Pointwise: block size x elements per thread (the default is 32 bytes of the
    // narrowest access; half and double that are tried).
    for (int threads : {128, 256, 512})
      for (int vector : {base.vector / 2, base.vector, base.vector * 2}) {
        if (vector < 1 || vector > 16) {
          space.pruned.push_back(fmt::format("vector {}: outside 1..16", vector));
          continue;
        }
        add({threads, vector, 0, 0});
      }
    return space;
  }
  const int vector = base.vector;
  const int64_t row_loads = RowDataLoads(k);
  const int64_t chunks_per_row = (k.inner + vector - 1) / vector;
  const bool has_broadcast = BroadcastRegisters(k, vector) > 0;
  for (int tpr : {1, 32, 64, 128, 256, 512, 1024}) {
    if (tpr > 1 && base.threads_per_row == 1) {
      space.pruned.push_back(fmt::format("threads_per_row {}: no access is contiguous along the row", tpr));
      continue;
    }
    if (tpr > 32 && tpr > chunks_per_row) {
      space.pruned.push_back(fmt::format("threads_per_row {}: more threads than the row's {} chunks", tpr, chunks_per_row));
      continue;
    }
    if (tpr == 1 && base.threads_per_row != 1 && k.inner > 256) {
      space.pruned.push_back(fmt::format("threads_per_row 1: a {}-element row for one thread", k.inner));
      continue;
    }
    std::vector<int> block_sizes = tpr == 1 ? std::vector<int>{128, 256} : tpr == 32 ? std::vector<int>{32, 64, 128, 256, 512}
                                                                                    : std::vector<int>{tpr};
    for (int threads : block_sizes)
      for (int cache : {0, 1}) {
        int64_t chunks = (k.inner + int64_t{tpr} * vector - 1) / (int64_t{tpr} * vector);
        int64_t budget = threads >= 1024 ? 32 : 64;
        if (cache && (tpr == 1 || row_loads == 0 || chunks * vector * row_loads > budget)) {
          space.pruned.push_back(fmt::format("threads_per_row {} threads {}: row of {} values per thread exceeds the register budget {}",
                                             tpr, threads, chunks * vector * row_loads, budget));
          continue;
        }
        add({threads, vector, tpr, cache});
        // The same with the row-invariant vectors held beside the row, where they fit too.
        if (cache == 1 && has_broadcast) {
          const int64_t with_broadcast = HeldBesideRegisters(k, chunks, vector);
          if (with_broadcast > budget) {
            space.pruned.push_back(fmt::format("threads_per_row {} threads {} with the row-invariant vectors: {} registers a thread exceed the budget {}",
                                               tpr, threads, with_broadcast, budget));
            continue;
          }
          // More than 4 warps' rows a block: a layer norm over 1024 bf16 columns spilled at 256
          // threads and ran 22% slower at 512 (H200, 2026-11-28).
          if (tpr == 32 && threads > 128) {
            space.pruned.push_back(fmt::format("threads_per_row 32 threads {} with the row-invariant vectors: more than 4 rows a block", threads));
            continue;
          }
          CudaKernelConfig c{threads, vector, tpr, cache};
          c.broadcast_with_row = true;
          add(c);
        }
      }
  }
  // A block per row split over a cluster: each CTA a slice (a row too long to cache may
  // fit in registers then, and rows that fill few SMs spread over more).
  if (base.threads_per_row == base.threads && base.threads > 32)
    for (int cluster : {2, 4, 8})
      for (int tpr : {256, 512, 1024}) {
        const int64_t slice = k.inner / cluster;
        if (k.inner % (int64_t{cluster} * vector) != 0 || slice < int64_t{tpr} * vector) {
          space.pruned.push_back(fmt::format("cluster {} threads {}: slices of {} elements, fewer than a chunk a thread", cluster, tpr, slice));
          continue;
        }
        // Re-read, cached as the rule decides for the slice, or a half-type slice as pairs
        // (half the registers: more CTAs an SM).
        for (int cache : {0, -1, 2}) {
          if (cache == 2 && !HasHalfRowLoads(k)) continue;
          CudaKernelConfig c{tpr, vector, tpr, cache};
          c.cluster = cluster;
          add(c);
        }
      }
  // A few long rows split over blocks (codegen/cuda/cuda_row_splits.h): half and twice the
  // rule's splits, and none.
  if (base.splits > 1)
    for (int splits : {1, base.splits / 2, base.splits * 2}) {
      if (splits > 1 && RowSplitSlice(k, splits, base.vector) < int64_t{base.threads} * base.vector) {
        space.pruned.push_back(fmt::format("{} splits: slices of fewer than a vector a thread", splits));
        continue;
      }
      CudaKernelConfig c = base;
      c.splits = splits;
      add(c);
    }
  return space;
}

}  // namespace tilefuse
